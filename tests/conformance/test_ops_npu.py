"""PyTorch's OpInfo database run on npu: every op's outputs (float32, float16) and gradients (float32) against CPU.

Samples are built on the npu (as PyTorch builds them for a device: arguments that must stay on the CPU stay
there) and copied to the CPU, so both devices see the same inputs. Known gaps are listed,
with reasons, in expected_failures.yaml. By default (CI) a representative slice of ops runs; NPU_CONFORMANCE=all
(`make conformance`) runs the whole op_db.
"""

import copy
import os
import unittest

import pytest
import torch
import yaml
from torch.testing._internal.common_device_type import (PrivateUse1TestBase, instantiate_device_type_tests, ops)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase
from torch.utils._pytree import tree_leaves

import torch_npu  # noqa: F401  (registers the npu device before the tests are instantiated)

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_SAMPLES = int(os.environ.get("NPU_CONFORMANCE_MAX_SAMPLES", "12"))

# The CI slice: elementwise, reductions, linear algebra, shape ops, indexing, nn functional, sorting.
CI_SLICE = [
    "add", "sub", "mul", "div", "neg", "abs", "exp", "sqrt", "sigmoid", "tanh", "nn.functional.relu", "pow",
    "clamp", "where", "sum", "mean", "amax", "argmax", "cumsum", "var", "matmul", "mm", "bmm", "addmm",
    "cat", "stack", "transpose", "reshape", "permute", "expand", "index_select", "gather", "masked_fill",
    "softmax", "log_softmax", "nn.functional.gelu", "nn.functional.silu", "nn.functional.layer_norm",
    "nn.functional.linear", "nn.functional.conv2d", "nn.functional.embedding", "nn.functional.cross_entropy",
    "topk", "sort", "max.reduction_with_dim", "nn.functional.dropout",
]


def _load_expected_failures():
    with open(os.path.join(HERE, "expected_failures.yaml"), encoding="utf-8") as f:
        entries = yaml.safe_load(f) or []
    table = {}
    for e in entries:
        for dtype in str(e["dtype"]).split(","):
            table[(e["test"], e["op"], dtype.strip())] = e["reason"]
    return table


EXPECTED_FAILURES = _load_expected_failures()


def _to_cpu(sample, keep_grad):
    def move(t):
        if isinstance(t, torch.Tensor):
            out = t.detach().to("cpu")
            return out.requires_grad_(True) if keep_grad and t.requires_grad else out
        return t

    moved = sample.transform(move)
    if keep_grad:  # transform() runs under no_grad; leaves get requires_grad back after it
        for a, b in zip(tree_leaves([sample.input, sample.args, sample.kwargs]),
                        tree_leaves([moved.input, moved.args, moved.kwargs])):
            if isinstance(a, torch.Tensor) and a.requires_grad and isinstance(b, torch.Tensor):
                b.requires_grad_(True)
    return moved


def _tolerance(dtype):
    return {"atol": 1e-3, "rtol": 1e-3} if dtype == torch.float16 else {"atol": 1e-5, "rtol": 1.3e-6}


def _without_cuda_expectations(ops_list):
    """op_db marks some ops expectedFailure for TestCommon.test_compare_cpu because of CUDA's results; npu
    failures are listed (with reasons) in expected_failures.yaml instead. op_db's skips still apply."""
    out = []
    for op in ops_list:
        kept = [d for d in op.decorators
                if not (getattr(d, "test_name", None) == "test_compare_cpu"
                        and unittest.expectedFailure in getattr(d, "decorators", ()))]
        if len(kept) != len(op.decorators):
            op = copy.copy(op)
            op.decorators = tuple(kept)
        out.append(op)
    return out


NPU_OP_DB = _without_cuda_expectations(op_db)


class TestCommon(TestCase):
    """Named like PyTorch's test_ops class so op_db's own skips for CPU comparison apply here too."""

    def _run_expecting(self, kind, op, dtype, body):
        reason = EXPECTED_FAILURES.get((kind, op.full_name, str(dtype).replace("torch.", "")))
        try:
            body()
        except (unittest.SkipTest, pytest.skip.Exception):
            raise
        except Exception:
            if reason:
                pytest.xfail(reason)
            raise
        if reason:
            self.fail(f"{op.full_name} ({dtype}) passes now: remove it from tests/conformance/expected_failures.yaml")

    @ops(NPU_OP_DB, allowed_dtypes=(torch.float32, torch.float16))
    def test_compare_cpu(self, device, dtype, op):
        def body():
            ran = 0
            for sample in op.sample_inputs(device, dtype):
                if ran == MAX_SAMPLES:
                    break
                cpu_sample = _to_cpu(sample, keep_grad=False)
                expected = cpu_sample.output_process_fn_grad(op(cpu_sample.input, *cpu_sample.args,
                                                                **cpu_sample.kwargs))
                actual = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
                self.assertEqual(actual, expected, exact_device=False, **_tolerance(dtype))
                ran += 1

        self._run_expecting("output", op, dtype, body)

    @ops([op for op in NPU_OP_DB if op.supports_autograd], allowed_dtypes=(torch.float32,))
    def test_grad_compare_cpu(self, device, dtype, op):
        def grads(sample, outputs_grad):
            out = sample.output_process_fn_grad(op(sample.input, *sample.args, **sample.kwargs))
            outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
            inputs = [t for t in tree_leaves([sample.input, sample.args, sample.kwargs])
                      if isinstance(t, torch.Tensor) and t.requires_grad]
            if not outs or not inputs:
                return None, None
            if outputs_grad is None:
                gen = torch.Generator().manual_seed(0)
                outputs_grad = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outs]
            g = torch.autograd.grad(outs, inputs, [t.to(outs[0].device) for t in outputs_grad], allow_unused=True)
            return outputs_grad, [x.detach() if x is not None else None for x in g]

        def body():
            ran = 0
            for sample in op.sample_inputs(device, dtype, requires_grad=True):
                if ran == MAX_SAMPLES:
                    break
                grad_out, expected = grads(_to_cpu(sample, keep_grad=True), None)
                if expected is None:
                    continue
                _, actual = grads(sample, grad_out)
                self.assertEqual(actual, expected, exact_device=False, **_tolerance(dtype))
                ran += 1

        self._run_expecting("grad", op, dtype, body)


if os.environ.get("NPU_CONFORMANCE", "slice") != "all":
    PrivateUse1TestBase.op_allowlist = CI_SLICE
instantiate_device_type_tests(TestCommon, globals(), only_for="npu")
