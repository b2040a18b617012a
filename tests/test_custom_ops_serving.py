"""Serving scatters on their device ops: npu_scatter_nd_update(_) (index tuples over leading dimensions) and
scatter_update(_) (per-batch slices from an offset along an axis, the KV-cache append), against CPU references
written from the documented definitions; functional forms leave self alone, in-place forms return self, Meta
kernels give self's shape, and bad arguments raise clear errors."""

import pytest
import torch

import torch_npu
from op_refs import misc_ops as ref

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int32, torch.int64, torch.bool]


def sample(shape, dtype, g):
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-100, 100, shape, generator=g).to(dtype)


def distinct_rows(shape_prefix, dims, g):
    """Index tuples [*shape_prefix, len(dims)] without repeats (repeated targets are unordered on NPUs)."""
    count = 1
    for s in shape_prefix:
        count *= s
    total = 1
    for s in dims:
        total *= s
    flat = torch.randperm(total, generator=g)[:count]
    coords = []
    for s in reversed(dims):
        coords.append(flat % s)
        flat = flat // s
    return torch.stack(coords[::-1], -1).reshape(*shape_prefix, len(dims))


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


# --- npu_scatter_nd_update --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_scatter_nd_update(dtype, index_dtype):
    g = torch.Generator().manual_seed(1)
    var = sample((4, 5, 6), dtype, g)
    for prefix, depth in (((3,), 2), ((2, 2), 1), ((5,), 3)):
        indices = distinct_rows(prefix, var.shape[:depth], g).to(index_dtype)
        updates = sample(tuple(prefix) + tuple(var.shape[depth:]), dtype, g)
        expect = ref.scatter_nd_update(var, indices, updates)
        npu_var = var.npu()
        out = torch_npu.npu_scatter_nd_update(npu_var, indices.npu(), updates.npu())
        assert out.dtype == dtype and out.shape == var.shape
        assert torch.equal(out.cpu(), expect)
        assert torch.equal(npu_var.cpu(), var)  # the functional form leaves self alone
        back = torch_npu.npu_scatter_nd_update_(npu_var, indices.npu(), updates.npu())
        assert back is npu_var
        assert torch.equal(npu_var.cpu(), expect)


def test_scatter_nd_update_upstream_example_and_strided_self():
    # torch_npu's documented case: [24, 128] float16 rows replaced by index [12, 1].
    g = torch.Generator().manual_seed(2)
    var = torch.rand(24, 128, generator=g).half()
    indices = torch.randperm(24, generator=g)[:12].reshape(12, 1).to(torch.int32)
    updates = (torch.rand(12, 128, generator=g) + 1).half()
    out = torch_npu.npu_scatter_nd_update(var.npu(), indices.npu(), updates.npu())
    assert torch.equal(out.cpu(), ref.scatter_nd_update(var, indices, updates))
    # In place through a transposed (non-contiguous) view writes through to its base.
    base = torch.randn(6, 4, generator=g)
    npu_base = base.npu()
    view = npu_base.t()  # [4, 6]
    idx = torch.tensor([[3], [0]])
    upd = torch.randn(2, 6, generator=g)
    torch_npu.npu_scatter_nd_update_(view, idx.npu(), upd.npu())
    assert torch.equal(npu_base.cpu().t(), ref.scatter_nd_update(base.t(), idx, upd))


def test_scatter_nd_update_meta_device_op_and_errors():
    m = torch.ops.npu.npu_scatter_nd_update(torch.empty(4, 5, 6, device="meta"),
                                            torch.empty(3, 2, dtype=torch.int64, device="meta"),
                                            torch.empty(3, 6, device="meta"))
    assert m.shape == (4, 5, 6) and m.device.type == "meta"
    var = torch.zeros(3, 2).npu()
    before = device_op_count("aclnnScatterNdUpdate")
    torch_npu.npu_scatter_nd_update(var, torch.tensor([[0, 1]]).npu(), torch.tensor([2.0]).npu())
    torch.npu.synchronize()
    assert device_op_count("aclnnScatterNdUpdate") == before + 1
    with pytest.raises(ValueError, match="updates must have shape"):
        torch_npu.npu_scatter_nd_update(var, torch.tensor([[0, 1]]).npu(), torch.ones(1, 2).npu())
    with pytest.raises(TypeError, match="int32 or int64"):
        torch_npu.npu_scatter_nd_update(var, torch.tensor([[0.0, 1.0]]).npu(), torch.ones(1).npu())
    with pytest.raises(TypeError, match="self's dtype"):
        torch_npu.npu_scatter_nd_update(var, torch.tensor([[0, 1]]).npu(), torch.ones(1).half().npu())
    with pytest.raises(RuntimeError, match=r"must be in \[0, 3\)"):
        torch_npu.npu_scatter_nd_update(var, torch.tensor([[3, 0]]).npu(), torch.ones(1).npu()).cpu()


# --- scatter_update ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int32])
@pytest.mark.parametrize("axis", [-2, -1, 2, 1])
def test_scatter_update_offsets_per_batch(dtype, axis):
    g = torch.Generator().manual_seed(3)
    data = sample((3, 4, 8, 6), dtype, g)
    dim = axis % 4
    length = 2
    shape = list(data.shape)
    shape[dim] = length
    updates = sample(tuple(shape), dtype, g)
    indices = torch.randint(0, data.shape[dim] - length + 1, (3,), generator=g)
    for index_dtype in (torch.int32, torch.int64):
        expect = ref.scatter_update(data, indices.to(index_dtype), updates, axis)
        npu_data = data.npu()
        out = torch.ops.npu.scatter_update(npu_data, indices.to(index_dtype).npu(), updates.npu(), axis)
        assert out.dtype == dtype and torch.equal(out.cpu(), expect)
        assert torch.equal(npu_data.cpu(), data)
        back = torch_npu.scatter_update_(npu_data, indices.to(index_dtype).npu(), updates.npu(), axis)
        assert back is npu_data and torch.equal(npu_data.cpu(), expect)


def test_scatter_update_batch_offset_pairs_and_scalar_index():
    g = torch.Generator().manual_seed(4)
    data = torch.randn(4, 2, 8, 16, generator=g)
    # [n, 2] rows of (batch, offset): two updates into batches 3 and 1.
    pairs = torch.tensor([[3, 5], [1, 0]], dtype=torch.int32)
    updates = torch.randn(2, 2, 2, 16, generator=g)
    out = torch_npu.scatter_update(data.npu(), pairs.npu(), updates.npu(), -2)
    assert torch.equal(out.cpu(), ref.scatter_update(data, pairs, updates, -2))
    # A 0-D index is one batch.
    one = torch.tensor(6)
    upd1 = torch.randn(1, 2, 1, 16, generator=g)
    out = torch_npu.scatter_update(data.npu(), one.npu(), upd1.npu(), -2)
    assert torch.equal(out.cpu(), ref.scatter_update(data, one, upd1, -2))
    # The documented example: [1, 1, 2, 8], index [1] along -2.
    d = torch.tensor([[[[1.0] * 8, [2.0] * 8]]])
    u = torch.full((1, 1, 1, 8), 3.0)
    out = torch_npu.scatter_update(d.npu(), torch.tensor([1]).npu(), u.npu(), axis=-2)
    assert torch.equal(out.cpu(), ref.scatter_update(d, torch.tensor([1]), u, -2))


def test_scatter_update_meta_device_op_and_errors():
    m = torch.ops.npu.scatter_update(torch.empty(2, 3, 8, 4, device="meta"),
                                     torch.empty(2, dtype=torch.int64, device="meta"),
                                     torch.empty(2, 3, 1, 4, device="meta"), -2)
    assert m.shape == (2, 3, 8, 4)
    data = torch.zeros(2, 3, 8, 4).npu()
    before = device_op_count("aclnnInplaceScatterUpdate")
    torch_npu.scatter_update_(data, torch.tensor([0, 7]).npu(), torch.ones(2, 3, 1, 4).npu(), -2)
    torch.npu.synchronize()
    assert device_op_count("aclnnInplaceScatterUpdate") == before + 1
    with pytest.raises(ValueError, match="batch dimension"):
        torch_npu.scatter_update(data, torch.tensor([0, 1]).npu(), torch.ones(2, 3, 8, 4).npu(), 0)
    with pytest.raises(ValueError, match="must match data|must match self"):
        torch_npu.scatter_update(data, torch.tensor([0, 1]).npu(), torch.ones(2, 2, 1, 4).npu(), -2)
    with pytest.raises(ValueError, match=r"\[n, 2\]"):
        torch_npu.scatter_update(data, torch.zeros(2, 3, dtype=torch.long).npu(), torch.ones(2, 3, 1, 4).npu(), -2)
    with pytest.raises(RuntimeError, match="does not fit"):
        torch_npu.scatter_update(data, torch.tensor([0, 7]).npu(), torch.ones(2, 3, 2, 4).npu(), -2).cpu()
