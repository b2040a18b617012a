"""CpuShadow: runs every npu op a second time on the CPU, on copies of the same inputs, and
compares the results as they come. Each op is judged on its own inputs, so a failing op is
wrong itself, wherever it sits in the model."""

import threading
from collections import defaultdict
from typing import List, Optional

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torch_npu.tools.accucmp.compare import CompareResult, OpResult, mark_causes, tensor_row
from torch_npu.utils.dump_file import TensorRecord, tensor_stats
from torch_npu.utils.dumper import _SKIPPED, _Call, _each_tensor, _ModuleTracker, op_name, python_line


def _on_npu(value) -> bool:
    return any(t.device.type == "npu" for t in _each_tensor(value))


def _to_cpu(value):
    """Inputs for the CPU run: npu tensors copied to the CPU, CPU tensors copied (the CPU op may
    write into them), npu devices replaced by the CPU."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu() if value.device.type == "npu" else value.detach().clone()
    if isinstance(value, torch.device) and value.type == "npu":
        return torch.device("cpu")
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    return value


def _record(t: torch.Tensor) -> TensorRecord:
    host = t.detach().cpu()
    if host.dtype == torch.bfloat16:
        host = host.float()
    data = host.numpy() if host.layout == torch.strided and not host.is_meta else np.zeros(0)
    return TensorRecord(dtype=str(t.dtype), shape=tuple(t.shape), data=data, stats=tensor_stats(data))


class CpuShadow(TorchDispatchMode):
    """`with CpuShadow() as shadow:` ... `shadow.result()`. Stops shadowing after `max_ops` ops."""

    def __init__(self, max_ops: Optional[int] = None):
        super().__init__()
        self.max_ops = max_ops
        self.ops: List[OpResult] = []
        self.skipped: List[str] = []    # ops not compared, with the reason
        self._seq = defaultdict(int)
        self._order = 0
        self._lock = threading.Lock()
        self._modules = _ModuleTracker()

    def __enter__(self):
        self._modules.install()
        return super().__enter__()

    def __exit__(self, *exc):
        self._modules.remove()
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = op_name(func)
        if (name in _SKIPPED or func.namespace == "prim" or not _on_npu((args, kwargs))
                or (self.max_ops is not None and self._order >= self.max_ops)):
            return func(*args, **kwargs)
        call = _Call(func, args, kwargs)
        if call.is_view:  # no computation: the values are its input's
            return func(*args, **kwargs)
        backward = torch._C._current_graph_task_id() != -1
        with self._lock:
            seqid, order = self._seq[name], self._order
            self._seq[name] += 1
            self._order += 1
        cpu_args, cpu_kwargs = _to_cpu(args), _to_cpu(kwargs)
        out = func(*args, **kwargs)
        key = f"{name}/{seqid}"
        if call.is_random or any(isinstance(v, torch.Generator) for v in list(args) + list(kwargs.values())):
            self.skipped.append(f"{key} (random op: not compared)")
            return out
        try:
            cpu_out = func(*cpu_args, **cpu_kwargs)
        except Exception as e:  # noqa: BLE001  (an op the CPU does not run is reported, not fatal)
            self.skipped.append(f"{key} (no CPU reference: {str(e).splitlines()[0]})")
            return out
        result = OpResult(name=name, seqid=seqid, op=func._schema.name, order=order,
                          phase="backward" if backward else "forward", stack="" if backward else python_line(),
                          module="" if backward else self._modules.current())
        for i, (a, b) in enumerate(zip(_each_tensor(out), _each_tensor(cpu_out))):
            row = tensor_row(f"{key}/output/{i}", f"{key}/output/{i}", _record(a), _record(b), "output")
            row.op, row.stack, row.module = result.op, result.stack, result.module
            result.outputs.append(row)
        with self._lock:
            self.ops.append(result)
        return out

    def result(self) -> CompareResult:
        ops = sorted(self.ops, key=lambda op: op.order)
        mark_causes(ops)
        return CompareResult(ops=ops, unmatched=[], not_compared=list(self.skipped), npu_path="npu",
                             bench_path="cpu (same inputs)")
