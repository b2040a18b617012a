"""Shared helpers of the engine tests (test_engine.py, test_engine_async.py): the default-policy
marker, input builders and the npu-vs-CPU comparison."""

import os

import pytest
import torch


def _flag(name, default):
    v = os.environ.get(name, "")
    return default if v == "" else v != "0"


# These tests describe the default execution policy (generic executor, queued tasks); the other
# policies are tested in subprocesses (test_engine_errors.py).
pytestmark = pytest.mark.skipif(
    _flag("NPU_SIM_STRICT", False) or not _flag("TASK_QUEUE_ENABLE", True)
    or _flag("ASCEND_LAUNCH_BLOCKING", False),
    reason="needs the default execution policy")

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
ALL = FLOATS + [torch.int64, torch.bool]


# ---------------------------------------------------------------------------------------------------
# helpers


def _make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype == torch.int64:
        return torch.randint(-4, 5, shape, generator=g)  # small range: ties and repeats
    return torch.randn(shape, generator=g).to(dtype)


# A layout: (shape of the base tensor for a wanted view shape, the view of the base). The same view
# is taken of the CPU base and of its npu copy, so both ops see the same strides and offset.
LAYOUTS = {
    "contiguous": (lambda s: s, lambda b: b),
    "transposed": (lambda s: s[:-2] + (s[-1], s[-2]), lambda b: b.transpose(-1, -2)),
    "sliced": (lambda s: s[:-1] + (2 * s[-1] + 1,), lambda b: b[..., 1::2]),
}


def _inputs(shape, dtype, layout, seed=0):
    base_shape, view = LAYOUTS[layout]
    base = _make(tuple(base_shape(tuple(shape))), dtype, seed)
    cpu = view(base)
    npu = view(base.npu())
    assert cpu.shape == npu.shape and cpu.stride() == npu.stride()
    if layout != "contiguous" and cpu.numel() > 1:
        assert not npu.is_contiguous()
    return cpu, npu


def assert_matches(got, expected, exact=False, atol=None, rtol=None):
    """npu result(s) `got` equal CPU result(s) `expected`: device, dtype, shape and values."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_matches(g, e, exact, atol, rtol)
        return
    if not isinstance(expected, torch.Tensor):
        assert got == expected
        return
    assert got.device.type == "npu", got.device
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    host = got.cpu()
    if exact or not (expected.is_floating_point() or expected.is_complex()):
        torch.testing.assert_close(host, expected, atol=0, rtol=0, equal_nan=True)
    elif atol is not None:
        torch.testing.assert_close(host, expected, atol=atol, rtol=rtol, equal_nan=True)
    else:
        torch.testing.assert_close(host, expected, equal_nan=True)


def _idx(x, values):
    return torch.tensor(values, device=x.device)


