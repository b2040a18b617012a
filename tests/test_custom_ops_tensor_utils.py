"""torch_npu's tensor utilities as registered ops (one_, npu_dtype_cast_, npu_reshape, npu_stride_copy,
npu_view_copy, copy_memory_, npu_scatter, get_npu_format, get_storage_size, npu_format_cast_,
npu_sim_exponential_) against the same operations on CPU tensors; Meta kernels, device ops, errors."""

import math

import pytest
import torch

import torch_npu


def _device_ops(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32])
def test_one_fills_with_ones(dtype):
    x = torch.zeros(3, 5, dtype=dtype).npu()
    before = _device_ops("aclnnInplaceOne")
    out = torch.ops.npu.one_(x)
    torch.npu.synchronize()
    assert out.data_ptr() == x.data_ptr()
    assert torch.equal(x.cpu(), torch.ones(3, 5, dtype=dtype))
    assert _device_ops("aclnnInplaceOne") == before + 1
    base = torch.zeros(4, 6).npu()
    torch.ops.npu.one_(base[:, ::2])
    expect = torch.zeros(4, 6)
    expect[:, ::2] = 1
    assert torch.equal(base.cpu(), expect)


@pytest.mark.parametrize("src_dtype,dst_dtype", [(torch.float32, torch.float16), (torch.float16, torch.float32),
                                                 (torch.float32, torch.bfloat16), (torch.float32, torch.int32)])
def test_dtype_cast_in_place(src_dtype, dst_dtype):
    src = (torch.randn(4, 6) * 10).to(src_dtype)
    dst = torch.empty(4, 6, dtype=dst_dtype).npu()
    out = torch.ops.npu.npu_dtype_cast_(dst, src.npu())
    assert out.data_ptr() == dst.data_ptr()
    assert torch.equal(dst.cpu(), src.to(dst_dtype))
    with pytest.raises(ValueError, match="elements"):
        torch.ops.npu.npu_dtype_cast_(dst, torch.randn(5).npu())


def test_reshape_and_stride_copy():
    x = torch.randn(2, 8)
    out = torch_npu.npu_reshape(x.npu(), (4, 4))
    assert out.shape == (4, 4) and torch.equal(out.cpu(), x.reshape(4, 4))
    nc = torch.randn(6, 4)
    assert torch.equal(torch_npu.npu_reshape(nc.npu().t(), [3, 8]).cpu(), nc.t().reshape(3, 8))
    with pytest.raises(ValueError, match="elements"):
        torch_npu.npu_reshape(x.npu(), (3, 5))
    base = torch.arange(30.0)
    got = torch_npu.npu_stride_copy(base.npu(), [3, 4], [5, 1], 2)
    assert got.is_contiguous() and torch.equal(got.cpu(), base.as_strided([3, 4], [5, 1], 2))
    with pytest.raises(ValueError, match="as many values"):
        torch_npu.npu_stride_copy(base.npu(), [3, 4], [5], 0)
    assert torch.ops.npu.npu_reshape(torch.empty(2, 8, device="meta"), [16]).shape == (16,)
    assert torch.ops.npu.npu_stride_copy(torch.empty(30, device="meta"), [3, 4], [5, 1], 2).shape == (3, 4)


def test_view_copy_and_copy_memory():
    dst = torch.zeros(4, 6).npu()
    src = torch.randn(4, 3)
    torch.ops.npu.npu_view_copy(dst[:, 1::2], src.npu(), False)
    expect = torch.zeros(4, 6)
    expect[:, 1::2] = src
    assert torch.equal(dst.cpu(), expect)
    a, b = torch.empty(2, 6).npu(), torch.randn(3, 4)
    torch_npu.copy_memory_(a, b.npu())
    assert torch.equal(a.cpu(), b.reshape(2, 6))
    torch.ops.npu.copy_memory_(a, torch.zeros(12).npu())
    assert torch.equal(a.cpu(), torch.zeros(2, 6))
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.ops.npu.copy_memory_(a, torch.zeros(12, dtype=torch.float16).npu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_scatter_along_dim(dtype):
    g = torch.Generator().manual_seed(0)
    self = torch.randn(4, 7, generator=g).to(dtype)
    for dim in (1, 0, -1):
        d = dim % 2
        n = self.shape[1 - d]
        idx = torch.randint(0, self.shape[d], (n,), generator=g)
        upd = torch.randn(n, generator=g).to(dtype)
        got = torch_npu.npu_scatter(self.npu(), idx.int().npu(), upd.npu(), dim).cpu()
        expect = self.scatter(d, idx.unsqueeze(d), upd.unsqueeze(d))
        assert torch.equal(got, expect), dim
    meta = torch.ops.npu.npu_scatter(torch.empty(4, 7, device="meta"), torch.empty(4, dtype=torch.long, device="meta"),
                                     torch.empty(4, device="meta"), 1)
    assert meta.shape == (4, 7)
    with pytest.raises(ValueError, match="without dimension"):
        torch_npu.npu_scatter(self.npu(), torch.zeros(5, dtype=torch.long).npu(), torch.zeros(5, dtype=dtype).npu(), 1)
    with pytest.raises(RuntimeError, match="index"):
        torch_npu.npu_scatter(self.npu(), torch.full((4,), 9).npu(), torch.zeros(4, dtype=dtype).npu(), 1).cpu()


def test_storage_queries_and_format_cast():
    x = torch.randn(2, 3, 4, 5).npu()
    assert torch.ops.npu.get_npu_format(x) == 0  # NCHW
    assert torch.ops.npu.get_npu_format(torch.randn(3, 4).npu()) == 2  # ND
    assert torch.ops.npu.get_storage_size(x) == 120
    assert torch.ops.npu.get_npu_format(torch.empty(2, 3, 4, 5, device="meta")) == 0
    nz = torch_npu.npu_format_cast(torch.randn(16, 32).npu(), 29)
    target = torch.randn(16, 32)
    y = target.npu()
    torch.ops.npu.npu_format_cast_(y, nz)
    assert torch.ops.npu.get_npu_format(y) == 29
    assert torch.equal(y.cpu(), target)
    assert torch.ops.npu.get_storage_size(y) == torch_npu.get_storage_size(y)
    with pytest.raises(NotImplementedError, match="CPU"):  # the op has npu and Meta kernels only
        torch.ops.npu.get_storage_size(torch.randn(2))


@pytest.mark.parametrize("lambd", [0.5, 2.0])
def test_sim_exponential_distribution(lambd):
    torch.npu.manual_seed(3)
    x = torch.empty(200000).npu()
    before = _device_ops("aclnnSimThreadExponential")
    out = torch_npu.npu_sim_exponential_(x, lambd)
    assert out.data_ptr() == x.data_ptr()
    got = x.cpu().double()
    assert _device_ops("aclnnSimThreadExponential") == before + 1
    assert (got >= 0).all()
    # Moments and quantiles of Exp(lambd) against the same draw on CPU: both sit within sampling error.
    ref = torch.empty(200000, dtype=torch.float64).exponential_(lambd, generator=torch.Generator().manual_seed(1))
    assert abs(got.mean().item() - 1 / lambd) < 0.02 / lambd
    for q in (0.1, 0.5, 0.9, 0.99):
        assert abs(torch.quantile(got[:100000], q) - torch.quantile(ref[:100000], q)) < 0.05 * (-math.log(1 - q)) / lambd + 0.01
    torch.npu.manual_seed(3)
    again = torch_npu.npu_sim_exponential_(torch.empty(200000).npu(), lambd).cpu()
    assert torch.equal(again, x.cpu())  # the npu generator's seed reproduces the draw
    half = torch_npu.npu_sim_exponential_(torch.empty(1000, dtype=torch.float16).npu(), lambd).cpu()
    assert (half >= 0).all() and half.float().mean() > 0
    with pytest.raises(ValueError, match="lambd > 0"):
        torch_npu.npu_sim_exponential_(x, 0.0)
    assert torch.ops.npu.npu_sim_exponential_(torch.empty(3, device="meta")).shape == (3,)


def test_prefetch_keeps_values_and_checks_ranges():
    x = torch.randn(8, 8).half()
    dev = x.npu()
    dependency = torch.randn(8, 8).npu()
    for max_size, offset, dep in ((256, 0, None), (1000, 0, dependency), (256, 10, None)):
        assert torch_npu.npu_prefetch(dev, dep, max_size, offset) is None
        assert torch.equal(dev.cpu(), x)
    with pytest.raises(RuntimeError, match="max_size should be greater than zero, but got -1"):
        torch_npu.npu_prefetch(dev, None, -1)
    with pytest.raises(RuntimeError, match="offset should not be smaller than zero, but got -1"):
        torch_npu.npu_prefetch(dev, None, 1000, -1)
    with pytest.raises(RuntimeError, match="offset out of range of tensor size, tensor size: 128, offset: 1000"):
        torch_npu.npu_prefetch(dev, None, 1000, 1000)
    torch.ops.npu.npu_prefetch(torch.empty(4, device="meta"), None, 16)  # the Meta kernel checks only
