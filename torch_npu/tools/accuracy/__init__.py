"""One-command accuracy check: a model step on npu against the CPU, in one process.

    report = torch_npu.tools.accuracy.compare_with_cpu(model, inputs, loss_fn)
    print(report.summary())

or over a whole script: python -m torch_npu.tools.accuracy [-o DIR] [--max-ops N] train.py [args]

Every npu op runs a second time on the CPU on copies of the same inputs; the report (the same
columns as msaccucmp's) names the first op whose results differ.
"""

import copy
from typing import Callable, Optional

import torch

from torch_npu.tools.accucmp.compare import CompareResult
from torch_npu.tools.accuracy.shadow import CpuShadow

__all__ = ["compare_with_cpu", "CpuShadow"]


def _to_npu(value):
    if isinstance(value, torch.Tensor):
        return value.npu() if value.device.type != "npu" else value
    if isinstance(value, (list, tuple)):
        return type(value)(_to_npu(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_npu(v) for k, v in value.items()}
    return value


def compare_with_cpu(model: torch.nn.Module, inputs, loss_fn: Optional[Callable] = None,
                     out_dir: Optional[str] = None, max_ops: Optional[int] = None,
                     backward: bool = True) -> CompareResult:
    """Runs one step of `model` (forward, `loss_fn(output)` and backward) on npu, every op checked
    against the CPU on the same inputs. `inputs` is a tensor, a tuple of positional inputs or a dict
    of keyword inputs. The model is copied first, so its parameters, gradients and buffers are left
    as they were. Without `loss_fn`, the sum of the output is differentiated. With `out_dir`, the
    CSV and HTML reports are written there."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"compare_with_cpu: model must be a torch.nn.Module, got {type(model).__name__}")
    npu_model = copy.deepcopy(model).npu()
    args = _to_npu(inputs)
    with CpuShadow(max_ops=max_ops) as shadow:
        if isinstance(args, dict):
            output = npu_model(**args)
        elif isinstance(args, (list, tuple)):
            output = npu_model(*args)
        else:
            output = npu_model(args)
        if backward:
            loss = loss_fn(output) if loss_fn is not None else output
            if not isinstance(loss, torch.Tensor):
                raise TypeError("compare_with_cpu: pass loss_fn(output) -> scalar tensor for a model whose output "
                                f"is a {type(loss).__name__}, or backward=False")
            if loss.requires_grad:
                (loss if loss.numel() == 1 else loss.float().sum()).backward()
    result = shadow.result()
    if out_dir is not None:
        from torch_npu.tools.accucmp.report import write_reports

        write_reports(result, out_dir)
    return result
