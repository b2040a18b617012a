"""torch_npu.empty_with_format / unsafe_empty_with_format (factories with a format, an aligned base and
the deterministic fill) and npu_change_data_ptr, against CPU and the format API."""

import pytest
import torch

import torch_npu


@pytest.fixture
def internal_formats():
    torch.npu.config.allow_internal_format = True
    yield
    torch.npu.config.allow_internal_format = False


def test_formats_devices_and_dtypes(internal_formats):
    t = torch_npu.empty_with_format((2, 3, 16, 16), dtype=torch.float16, device="npu", acl_format=29)
    assert t.shape == (2, 3, 16, 16) and t.dtype == torch.float16 and int(torch_npu.get_npu_format(t)) == 29
    t.fill_(2.5)  # a private format still computes as the logical tensor
    assert torch.equal(t.cpu(), torch.full((2, 3, 16, 16), 2.5, dtype=torch.float16))
    other = torch_npu.empty_with_format([10, 9], device="npu:1")
    assert other.device == torch.device("npu:1") and int(torch_npu.get_npu_format(other)) == 2
    assert torch_npu.empty_with_format([3], device="npu").dtype == torch.get_default_dtype()
    meta = torch_npu.empty_with_format([4, 3], device="meta", dtype=torch.bfloat16)
    assert meta.device.type == "meta" and meta.dtype == torch.bfloat16


def test_private_formats_follow_allow_internal_format_unless_kept():
    plain = torch_npu.empty_with_format((2, 3, 16, 16), device="npu", acl_format=3)
    assert int(torch_npu.get_npu_format(plain)) == 0  # internal formats off: the base format
    kept = torch.ops.npu.unsafe_empty_with_format([2, 3, 16, 16], device="npu", acl_format=3, keep_format=True)
    assert int(torch_npu.get_npu_format(kept)) == 3


def test_aligned_base_and_errors():
    for kb in (1, 4, 16):
        t = torch_npu.empty_with_format((5, 7), device="npu", base_addr_aligned_kb=kb)
        assert t.data_ptr() % (kb * 1024) == 0 and t.is_contiguous()
        t.copy_(torch.arange(35.0).view(5, 7))
        assert torch.equal(t.cpu(), torch.arange(35.0).view(5, 7))
    with pytest.raises(ValueError, match=r"base_addr_aligned_kb must be in \[0, 16\]"):
        torch_npu.empty_with_format((2,), device="npu", base_addr_aligned_kb=17)
    with pytest.raises(ValueError, match="unknown acl_format"):
        torch_npu.empty_with_format((2,), device="npu", acl_format=1234)


def test_deterministic_fill():
    torch.use_deterministic_algorithms(True)
    try:
        assert torch.isnan(torch_npu.empty_with_format((3, 4), device="npu").cpu()).all()
        assert (torch_npu.empty_with_format((3,), dtype=torch.int32, device="npu").cpu() == 2 ** 31 - 1).all()
    finally:
        torch.use_deterministic_algorithms(False)


def test_compiles_fullgraph():
    fn = torch.compile(lambda: torch_npu.empty_with_format((2, 2), device="npu").fill_(1.0), fullgraph=True)
    assert torch.equal(fn().cpu(), torch.ones(2, 2))


def test_change_data_ptr_points_into_the_source():
    combined = torch.zeros(10, device="npu")
    part = torch.empty(3, device="npu")
    assert torch_npu.npu_change_data_ptr(part, combined, 4) == 0
    part.fill_(7.0)
    assert combined.cpu().tolist() == [0, 0, 0, 0, 7, 7, 7, 0, 0, 0]
    del combined  # the part keeps the source's memory alive
    assert part.cpu().tolist() == [7, 7, 7]
    with pytest.raises(ValueError, match="run past src's storage"):
        torch_npu.npu_change_data_ptr(torch.empty(5, device="npu"), torch.zeros(6, device="npu"), 3)
    with pytest.raises(ValueError, match="share a dtype"):
        torch_npu.npu_change_data_ptr(torch.empty(2, device="npu"), torch.zeros(6, dtype=torch.int32, device="npu"), 0)
