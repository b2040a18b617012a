"""TransData between every pair of formats and back, for every dtype a private format holds; casts
are counted as aclnnTransData launches; npu_format_cast_ converts a storage in place."""

import itertools

import pytest
import torch

import torch_npu

from .reference import (FRACTAL_NZ, FRACTAL_Z, FRACTAL_Z_3D, NC1HWC0, NCDHW, NCHW, ND, NDC1HWC0,
                        PRIVATE_DTYPES, random_tensor, transdata_count)

# The formats that can hold a 4-d and a 5-d tensor (plain ones included).
GROUPS = [((3, 17, 2, 5), (NCHW, ND, NC1HWC0, FRACTAL_Z, FRACTAL_NZ)),
          ((17, 18, 2, 3, 4), (NCDHW, ND, NDC1HWC0, FRACTAL_Z_3D, FRACTAL_NZ))]


@pytest.mark.parametrize("shape,formats", GROUPS)
@pytest.mark.parametrize("dtype", PRIVATE_DTYPES)
def test_round_trip_through_every_pair(shape, formats, dtype):
    x = random_tensor(shape, dtype, seed=3)
    for a, b in itertools.permutations(formats, 2):
        ya = torch_npu.npu_format_cast(x.npu(), a)
        yb = torch_npu.npu_format_cast(ya, b)
        assert torch_npu.get_npu_format(yb) == b, (a, b)
        back = torch_npu.npu_format_cast(yb, ND)
        assert torch.equal(back.cpu(), x), (a, b)
        assert torch.equal(yb.cpu(), x), (a, b)


def test_each_conversion_is_one_transdata_launch():
    x = torch.randn(4, 32, 8, 8).npu()
    torch.npu.op_stats(reset=True)
    y = torch_npu.npu_format_cast(x, NC1HWC0)  # plain -> private
    z = torch_npu.npu_format_cast(y, FRACTAL_Z)  # private -> private, directly
    w = torch_npu.npu_format_cast(z, NCHW)  # private -> plain
    assert transdata_count() == 3
    assert torch.equal(w.cpu(), x.cpu())
    assert "aclnnTransData" in torch.npu.op_stats()
    assert "aclnnTransData" in torch_npu._C._device_ops()


def test_same_format_cast_copies_and_keeps_the_format():
    x = torch_npu.npu_format_cast(torch.randn(16, 32).npu(), FRACTAL_NZ)
    y = torch_npu.npu_format_cast(x, FRACTAL_NZ)
    assert torch_npu.get_npu_format(y) == FRACTAL_NZ
    assert y.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    assert torch.equal(y.cpu(), x.cpu())


def test_spellings_of_the_cast():
    x = torch.randn(2, 16, 4, 4).npu()
    nz = torch_npu.npu_format_cast(torch.randn(8, 8).npu(), 29)
    assert torch_npu.get_npu_format(x.npu_format_cast(3)) == 3
    assert torch_npu.get_npu_format(torch_npu.npu_format_cast(x, torch_npu.Format.FRACTAL_Z)) == 4
    assert torch_npu.get_npu_format(torch.ops.npu.npu_format_cast(x, 3)) == 3
    # A tensor as the format argument: take its format.
    assert torch_npu.get_npu_format(torch_npu.npu_format_cast(torch.randn(3, 8).npu(), nz)) == 29
    assert torch_npu.get_npu_format(x.npu_format_cast_(3)) == 3


def test_in_place_cast_changes_the_storage_every_alias_sees():
    ref = torch.randn(2, 20, 3, 3)
    x = ref.npu()
    alias = x.view(2, 20, 9)
    before = x.untyped_storage().nbytes()
    assert torch_npu.npu_format_cast_(x, NC1HWC0) is x
    assert torch_npu.get_npu_format(x) == NC1HWC0 and torch_npu.get_npu_format(alias) == NC1HWC0
    assert x.untyped_storage().nbytes() == 2 * 2 * 9 * 16 * 4 > before
    assert torch.equal(x.cpu(), ref) and torch.equal(alias.cpu(), ref.view(2, 20, 9))
    torch_npu.npu_format_cast_(x, ND)
    assert torch_npu.get_npu_format(x) == ND and torch.equal(alias.cpu(), ref.view(2, 20, 9))


def test_in_place_cast_of_a_partial_view_gives_it_a_storage_of_its_own():
    base = torch.randn(4, 16, 16).npu()
    part = base[1]
    torch_npu.npu_format_cast_(part, FRACTAL_NZ)
    assert torch_npu.get_npu_format(part) == FRACTAL_NZ
    assert torch_npu.get_npu_format(base) == ND  # the rest of the storage is untouched
    assert torch.equal(part.cpu(), base[1].cpu())


def test_cast_keeps_autograd():
    x = torch.randn(4, 16, 4, 4, requires_grad=True)
    y = x.detach().npu().requires_grad_()
    out = torch_npu.npu_format_cast(y, NC1HWC0)
    (out * out).sum().backward()
    assert torch.allclose(y.grad.cpu(), 2 * x.detach())
    # In place (a layout change, not a value change): allowed on leaves that require grad.
    w = torch.randn(8, 4, 3, 3).npu().requires_grad_()
    torch_npu.npu_format_cast_(w, FRACTAL_Z)
    assert w.requires_grad and torch_npu.get_npu_format(w) == FRACTAL_Z


def test_cast_works_with_torch_compile():
    f = torch.compile(lambda t: torch_npu.npu_format_cast(t, 29) * 2, backend="eager", fullgraph=True)
    x = torch.randn(16, 16).npu()
    assert torch.equal(f(x).cpu(), x.cpu() * 2)
