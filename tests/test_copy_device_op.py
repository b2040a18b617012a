"""Copies between tensors of one npu that are not one dense block (views made contiguous, broadcasts,
dtype conversions) run as the device op aclnnInplaceCopy, as torch_npu launches them; the values equal
CPU's."""

import pytest
import torch

import torch_npu  # noqa: F401


def ran(fn):
    torch.npu.synchronize()
    torch.npu.op_stats(reset=True)
    out = fn()
    torch.npu.synchronize()
    return out, torch.npu.op_stats()


@pytest.mark.parametrize("case", ["permute", "slice", "select_transpose", "broadcast", "dtype"])
def test_strided_copies_are_aclnn_inplace_copy(case):
    x = torch.randn(2, 3, 16, 15)
    make = {"permute": lambda t: t.permute(1, 3, 2, 0).contiguous(),
            "slice": lambda t: t[:, 1:3, ::2].contiguous(),
            "select_transpose": lambda t: t.select(1, 2).transpose(0, 2).contiguous(),
            "broadcast": lambda t: torch.empty(4, 2, 3, 16, 15, device=t.device).copy_(t),
            "dtype": lambda t: torch.empty(2, 3, 16, 15, dtype=torch.float16, device=t.device).copy_(t)}[case]
    npu = x.npu()
    out, stats = ran(lambda: make(npu))
    assert stats.get("aclnnInplaceCopy", {}).get("device_op", 0) >= 1, stats
    torch.testing.assert_close(out.cpu(), make(x))


def test_dense_copy_stays_a_memcpy():
    x = torch.randn(64, device="npu")
    _, stats = ran(lambda: x.clone())
    assert "aclnnInplaceCopy" not in stats
