"""Views of private-format tensors share their storage and read and write the logical values (their
sizes, strides and offset index the base tensor, as for a plain storage)."""

import pytest
import torch

import torch_npu

from .reference import FRACTAL_NZ, FRACTAL_Z, NC1HWC0, ND

VIEWS = {
    "index": lambda t: t[1],
    "slice": lambda t: t[:, 3:9],
    "step": lambda t: t[..., ::2],
    "transpose": lambda t: t.transpose(1, 3),
    "permute": lambda t: t.permute(3, 1, 0, 2),
    "view": lambda t: t.view(3, 17, 20),
    "flatten": lambda t: t.view(-1),
    "select": lambda t: t.select(2, 1),
    "narrow": lambda t: t.narrow(1, 2, 7),
    "expand": lambda t: t.unsqueeze(0).expand(2, 3, 17, 4, 5),
    "diagonal": lambda t: t.diagonal(dim1=2, dim2=3),
    "unfold": lambda t: t.unfold(3, 2, 1),
    "as_strided": lambda t: t.as_strided((5, 7), (11, 3), 4),
    "dtype": lambda t: t.view(torch.int32),
}


@pytest.mark.parametrize("fmt", [NC1HWC0, FRACTAL_Z, FRACTAL_NZ])
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_read_logical_values_and_share_the_storage(fmt, name):
    a = torch.randn(3, 17, 4, 5)
    x = torch_npu.npu_format_cast(a.npu(), fmt)
    v, ref = VIEWS[name](x), VIEWS[name](a)
    assert v.shape == ref.shape and v.stride() == ref.stride() and v.storage_offset() == ref.storage_offset()
    assert torch.equal(v.cpu(), ref)
    assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert torch_npu.get_npu_format(v) == fmt
    assert torch.equal((v * 2).cpu(), ref * 2)  # ops on the view


@pytest.mark.parametrize("fmt", [NC1HWC0, FRACTAL_Z, FRACTAL_NZ])
def test_writes_through_views_reach_the_private_storage(fmt):
    a = torch.randn(3, 17, 4, 5)
    x = torch_npu.npu_format_cast(a.npu(), fmt)
    seen_before = x.transpose(0, 1)
    x[:, 2:5].mul_(0)
    a[:, 2:5].mul_(0)
    x[1].add_(torch.ones(17, 4, 5).npu())
    a[1].add_(1)
    x[0, 16, 3, 4] = 7.0
    a[0, 16, 3, 4] = 7.0
    x[:, :, 0].copy_(torch.full((3, 17, 5), -2.0))
    a[:, :, 0] = -2.0
    x.select(3, 2).fill_(0.5)
    a.select(3, 2).fill_(0.5)
    x[2].zero_()
    a[2].zero_()
    x[torch.tensor([0, 2]).npu(), 1] = 9.0  # index_put through advanced indexing
    a[torch.tensor([0, 2]), 1] = 9.0
    assert torch_npu.get_npu_format(x) == fmt
    assert torch.equal(x.cpu(), a)
    assert torch.equal(seen_before.cpu(), a.transpose(0, 1))


def test_cast_of_a_view_holds_the_views_values():
    a = torch.randn(6, 32, 8)
    x = torch_npu.npu_format_cast(a.npu(), FRACTAL_NZ)
    y = torch_npu.npu_format_cast(x[2:4].transpose(1, 2), NC1HWC0)
    assert y.shape == (2, 8, 32) and torch_npu.get_npu_format(y) == NC1HWC0
    assert torch.equal(y.cpu(), a[2:4].transpose(1, 2))
    z = torch_npu.npu_format_cast(torch.randn(4, 8).npu().t(), FRACTAL_NZ)  # a strided plain source
    assert torch_npu.get_npu_format(z) == FRACTAL_NZ


def test_set_and_resize_of_formatted_storages():
    a = torch.randn(4, 16, 3, 3)
    x = torch_npu.npu_format_cast(a.npu(), NC1HWC0)
    y = torch.empty(0, device="npu")
    y.set_(x.untyped_storage(), 16 * 9, (16, 9), (9, 1))
    assert torch.equal(y.cpu(), a[1].reshape(16, 9))
    assert torch_npu.get_npu_format(y) == NC1HWC0
    alias = x[0]
    x.resize_(2, 8)  # a new shape: the storage goes back to a plain layout; aliases keep their values
    assert torch_npu.get_npu_format(alias) == torch_npu.get_npu_format(torch.empty(16, 3, 3, device="npu"))
    assert torch.equal(alias.cpu(), a[0]) and torch.equal(x.cpu(), a.view(-1)[:16].view(2, 8))
    assert torch_npu.get_npu_format(x) == ND


def test_views_cannot_show_padding():
    x = torch_npu.npu_format_cast(torch.randn(5, 17).npu(), FRACTAL_NZ)
    assert x.untyped_storage().nbytes() > 85 * 4
    with pytest.raises(RuntimeError, match=r"FRACTAL_NZ.*base tensor \[5, 17\].*npu_format_cast"):
        x.as_strided((100,), (1,))
    with pytest.raises(RuntimeError, match="cannot grow"):
        torch.empty(0, device="npu").set_(x.untyped_storage(), 0, (40, 40), (40, 1))
