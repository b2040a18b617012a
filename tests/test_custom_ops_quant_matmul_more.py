"""npu_transpose_quant_batchmatmul, npu_add_quant_matmul(_) and npu_add_quant_gmm(_) against CPU references written
from their documented formulas (int8 / int4 operands in place of the chip's float8 / hifloat8), with Meta kernels,
device-op counters and argument errors."""

import pytest
import torch

import torch_npu
from op_refs import quant_matmul_more as ref

HIFLOAT8 = 256 + 34  # torch_npu's code for hifloat8 (an aclDataType + 256)


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def int8(shape, g, lo=-8, hi=8):
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int8)


# ---- npu_transpose_quant_batchmatmul ----

def tqbmm_inputs(m=5, b=3, k=32, n=8, perm_x2=(0, 1, 2), seed=0):
    g = torch.Generator().manual_seed(seed)
    x1 = int8((m, b, k), g)
    x2 = int8((b, n, k) if tuple(perm_x2) == (0, 2, 1) else (b, k, n), g)
    x1_scale = torch.rand(m, generator=g) * 0.02 + 0.001
    x2_scale = torch.rand(n, generator=g) * 0.02 + 0.001
    return x1, x2, x1_scale, x2_scale


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("perm_x2", [[0, 1, 2], [0, 2, 1]])
def test_transpose_quant_batchmatmul(dtype, perm_x2):
    x1, x2, x1_scale, x2_scale = tqbmm_inputs(perm_x2=perm_x2)
    expected = ref.transpose_quant_batchmatmul(x1, x2, dtype, x1_scale, x2_scale, perm_x2=perm_x2)
    got = torch_npu.npu_transpose_quant_batchmatmul(x1.npu(), x2.npu(), dtype, x1_scale=x1_scale.npu(),
                                                    x2_scale=x2_scale.npu(), perm_x1=[1, 0, 2], perm_x2=perm_x2,
                                                    perm_y=[1, 0, 2]).cpu()
    assert got.dtype == dtype and got.shape == (5, 3, 8)
    torch.testing.assert_close(got.float(), expected.float(), rtol=1e-2, atol=1e-3)
    assert got.float().abs().sum() > 0


def test_transpose_quant_batchmatmul_per_tensor_scale_and_defaults():
    # T-C form: x1_scale (1,); the perms default to [1, 0, 2] / [0, 1, 2] / [1, 0, 2].
    x1, x2, _, x2_scale = tqbmm_inputs(seed=1)
    x1_scale = torch.tensor([0.5])
    expected = ref.transpose_quant_batchmatmul(x1, x2, torch.float16, x1_scale, x2_scale)
    got = torch_npu.npu_transpose_quant_batchmatmul(x1.npu(), x2.npu(), torch.float16, x1_scale=x1_scale.npu(),
                                                    x2_scale=x2_scale.npu()).cpu()
    torch.testing.assert_close(got.float(), expected.float(), rtol=1e-2, atol=1e-3)


def test_transpose_quant_batchmatmul_int4_packed():
    g = torch.Generator().manual_seed(2)
    m, b, k, n = 4, 2, 16, 16
    a = torch.randint(-8, 8, (m, b, k), generator=g)
    w = torch.randint(-8, 8, (b, k, n), generator=g)
    x1, x2 = ref.pack_int4_words(a), ref.pack_int4_words(w)
    assert torch.equal(ref.unpack_int4_words(x1), a)
    x2_scale = torch.rand(n, generator=g) * 0.05
    expected = ref.transpose_quant_batchmatmul(x1, x2, torch.bfloat16, x2_scale=x2_scale)
    got = torch_npu.npu_transpose_quant_batchmatmul(x1.npu(), x2.npu(), torch.bfloat16, x2_scale=x2_scale.npu()).cpu()
    assert got.shape == (m, b, n) and got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), expected.float(), rtol=1e-2, atol=1e-3)


def test_transpose_quant_batchmatmul_batch_split():
    x1, x2, x1_scale, x2_scale = tqbmm_inputs(m=4, b=2, k=16, n=6, seed=3)
    expected = ref.transpose_quant_batchmatmul(x1, x2, torch.float16, x1_scale, x2_scale, batch_split_factor=3)
    got = torch_npu.npu_transpose_quant_batchmatmul(x1.npu(), x2.npu(), torch.float16, x1_scale=x1_scale.npu(),
                                                    x2_scale=x2_scale.npu(), batch_split_factor=3).cpu()
    assert got.shape == (3, 4, 4)
    torch.testing.assert_close(got.float(), expected.float(), rtol=1e-2, atol=1e-3)


def test_transpose_quant_batchmatmul_exact_integers():
    # Unit scales and small products: the float16 result is the exact integer product.
    x1, x2, _, _ = tqbmm_inputs(m=3, b=2, k=8, n=4, seed=4)
    got = torch_npu.npu_transpose_quant_batchmatmul(x1.npu(), x2.npu(), torch.float16).cpu()
    exact = torch.matmul(x1.long().permute(1, 0, 2), x2.long()).permute(1, 0, 2)
    assert torch.equal(got.long(), exact)


def test_transpose_quant_batchmatmul_meta_and_device_op():
    x1, x2, x1_scale, x2_scale = tqbmm_inputs()
    meta = torch.ops.npu.npu_transpose_quant_batchmatmul(x1.to("meta"), x2.to("meta"), torch.bfloat16,
                                                         x1_scale=x1_scale.to("meta"), x2_scale=x2_scale.to("meta"))
    assert meta.shape == (5, 3, 8) and meta.dtype == torch.bfloat16
    meta = torch.ops.npu.npu_transpose_quant_batchmatmul(x1.to("meta"), x2.to("meta"), torch.float16,
                                                         batch_split_factor=2)
    assert meta.shape == (2, 5, 12) and meta.dtype == torch.float16
    before = device_op_count("aclnnTransposeQuantBatchMatMul")
    torch_npu.npu_transpose_quant_batchmatmul(x1.npu(), x2.npu(), torch.float16, x2_scale=x2_scale.npu())
    torch.npu.synchronize()
    assert device_op_count("aclnnTransposeQuantBatchMatMul") == before + 1


def test_transpose_quant_batchmatmul_errors():
    x1, x2, x1_scale, x2_scale = tqbmm_inputs()
    n1, n2 = x1.npu(), x2.npu()
    with pytest.raises(ValueError, match=r"perm_x1 should be \[1, 0, 2\]"):
        torch_npu.npu_transpose_quant_batchmatmul(n1, n2, torch.float16, perm_x1=[1, 1, 2])
    with pytest.raises(ValueError, match=r"perm_x2 should be"):
        torch_npu.npu_transpose_quant_batchmatmul(n1, n2, torch.float16, perm_x2=[1, 1, 2])
    with pytest.raises(ValueError, match=r"perm_y should be \[1, 0, 2\]"):
        torch_npu.npu_transpose_quant_batchmatmul(n1, n2, torch.float16, perm_y=[1, 1, 2])
    with pytest.raises(ValueError, match="do not multiply"):
        torch_npu.npu_transpose_quant_batchmatmul(n1, x2[:, :16].npu(), torch.float16)
    with pytest.raises(ValueError, match="dtype must be torch.float16 or torch.bfloat16"):
        torch_npu.npu_transpose_quant_batchmatmul(n1, n2, torch.float32)
    with pytest.raises(ValueError, match="x2_scale must have shape"):
        torch_npu.npu_transpose_quant_batchmatmul(n1, n2, torch.float16, x2_scale=x2_scale[:5].npu())
    with pytest.raises(ValueError, match="bias is not supported"):
        torch_npu.npu_transpose_quant_batchmatmul(n1, n2, torch.float16, bias=torch.zeros(8).npu())
    with pytest.raises(TypeError, match="must be float8_e4m3fn, float8_e5m2, int8"):
        torch_npu.npu_transpose_quant_batchmatmul(x1.half().npu(), x2.half().npu(), torch.float16)
    with pytest.raises(ValueError, match="x1_dtype .* does not name"):
        torch_npu.npu_transpose_quant_batchmatmul(n1, n2, torch.float16, x1_dtype=torch.float8_e4m3fn)


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_transpose_quant_batchmatmul_float8(fp8, dtype):
    # upstream's operands: float8 values (here small integers and halves, as its tests draw them)
    g = torch.Generator().manual_seed(7)
    x1 = (torch.randint(-5, 5, (4, 3, 64), generator=g) * 0.5).to(fp8)
    x2 = (torch.randint(-5, 5, (3, 64, 16), generator=g) * 0.5).to(fp8)
    x1_scale, x2_scale = torch.rand(4, generator=g), torch.rand(16, generator=g)
    expected = ref.transpose_quant_batchmatmul(x1, x2, dtype, x1_scale, x2_scale)
    got = torch_npu.npu_transpose_quant_batchmatmul(x1.npu(), x2.npu(), dtype, x1_scale=x1_scale.npu(),
                                                    x2_scale=x2_scale.npu(), perm_x1=[1, 0, 2], perm_x2=[0, 1, 2],
                                                    perm_y=[1, 0, 2], x1_dtype=fp8, x2_dtype=fp8).cpu()
    assert got.dtype == dtype and got.shape == (4, 3, 16)
    torch.testing.assert_close(got.float(), expected.float(), rtol=1e-2, atol=1e-2)
    meta = torch.ops.npu.npu_transpose_quant_batchmatmul(x1.to("meta"), x2.to("meta"), dtype)
    assert meta.shape == (4, 3, 16) and meta.dtype == dtype


def test_transpose_quant_batchmatmul_chip_formats():
    x1, x2, x1_scale, x2_scale = tqbmm_inputs()
    n1, n2 = x1.npu(), x2.npu()
    with pytest.raises(ValueError, match="chip number format the software NPU does not have"):
        torch_npu.npu_transpose_quant_batchmatmul(n1, n2, HIFLOAT8)
    with pytest.raises(ValueError, match="mx block quantisation, a chip number format"):
        torch_npu.npu_transpose_quant_batchmatmul(n1, n2, torch.bfloat16, group_sizes=[0, 0, 32])
    with pytest.raises(TypeError, match="chip number format"):
        torch_npu.npu_transpose_quant_batchmatmul(n1, n2, torch.bfloat16,
                                                  x1_scale=torch.ones(5, 3, 1, 2).npu())


# ---- npu_add_quant_matmul_ / npu_add_quant_matmul ----

def aqmm_inputs(m=6, k=32, n=10, per_channel=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(m, n, generator=g)
    x1, x2 = int8((m, k), g), int8((k, n), g)
    x2_scale = torch.rand(n if per_channel else 1, generator=g) * 0.05 + 0.001
    x1_scale = torch.rand(m if per_channel else 1, generator=g) * 0.5 + 0.5
    return y, x1, x2, x2_scale, x1_scale


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("with_x1_scale", [False, True])
def test_add_quant_matmul_inplace(per_channel, with_x1_scale):
    y, x1, x2, x2_scale, x1_scale = aqmm_inputs(per_channel=per_channel)
    x1_scale = x1_scale if with_x1_scale else None
    expected = ref.add_quant_matmul(y, x1, x2, x2_scale, x1_scale)
    y_npu = y.npu()
    out = torch_npu.npu_add_quant_matmul_(y_npu, x1.npu(), x2.npu(), x2_scale.npu(),
                                          x1_scale=None if x1_scale is None else x1_scale.npu())
    assert out.data_ptr() == y_npu.data_ptr()
    torch.testing.assert_close(y_npu.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_add_quant_matmul_functional_leaves_self():
    y, x1, x2, x2_scale, x1_scale = aqmm_inputs(seed=1)
    expected = ref.add_quant_matmul(y, x1, x2, x2_scale, x1_scale)
    y_npu = y.npu()
    got = torch_npu.npu_add_quant_matmul(y_npu, x1.npu(), x2.npu(), x2_scale.npu(), x1_scale=x1_scale.npu(),
                                         group_sizes=[0, 0, 0])
    assert got.dtype == torch.float32 and got.shape == y.shape
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(y_npu.cpu(), y)


def test_add_quant_matmul_transposed_x1_view():
    # Upstream's documented call passes x1 as the transpose of a (K, M) tensor.
    y, x1, x2, x2_scale, x1_scale = aqmm_inputs(seed=2)
    x1_km = x1.t().contiguous()
    expected = ref.add_quant_matmul(y, x1, x2, x2_scale, x1_scale)
    got = torch_npu.npu_add_quant_matmul(y.npu(), x1_km.npu().t(), x2.npu(), x2_scale.npu(), x1_scale=x1_scale.npu())
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_add_quant_matmul_meta_and_device_op():
    y, x1, x2, x2_scale, x1_scale = aqmm_inputs()
    meta = torch.ops.npu.npu_add_quant_matmul(y.to("meta"), x1.to("meta"), x2.to("meta"), x2_scale.to("meta"))
    assert meta.shape == y.shape and meta.dtype == torch.float32
    y_meta = y.to("meta")
    assert torch.ops.npu.npu_add_quant_matmul_(y_meta, x1.to("meta"), x2.to("meta"), x2_scale.to("meta")) is y_meta
    before = device_op_count("aclnnQuantBatchMatmulInplaceAdd")
    torch_npu.npu_add_quant_matmul_(y.npu(), x1.npu(), x2.npu(), x2_scale.npu())
    torch_npu.npu_add_quant_matmul(y.npu(), x1.npu(), x2.npu(), x2_scale.npu())
    torch.npu.synchronize()
    assert device_op_count("aclnnQuantBatchMatmulInplaceAdd") == before + 2


def test_add_quant_matmul_errors():
    y, x1, x2, x2_scale, x1_scale = aqmm_inputs()
    ny, n1, n2, ns = y.npu(), x1.npu(), x2.npu(), x2_scale.npu()
    with pytest.raises(ValueError, match="do not multiply"):
        torch_npu.npu_add_quant_matmul(ny, n1, x2[:16].npu(), ns)
    with pytest.raises(TypeError, match="self accumulates in float32"):
        torch_npu.npu_add_quant_matmul(y.half().npu(), n1, n2, ns)
    with pytest.raises(ValueError, match="self must be"):
        torch_npu.npu_add_quant_matmul(y[:3].npu(), n1, n2, ns)
    with pytest.raises(TypeError, match="must be int8"):
        torch_npu.npu_add_quant_matmul(ny, x1.float().npu(), x2.float().npu(), ns)
    with pytest.raises(ValueError, match="x2_scale must have shape"):
        torch_npu.npu_add_quant_matmul(ny, n1, n2, torch.rand(3).npu())
    with pytest.raises(ValueError, match="hifloat8, a chip number format the software NPU does not have"):
        torch_npu.npu_add_quant_matmul(ny, n1, n2, ns, x1_dtype=HIFLOAT8, x2_dtype=HIFLOAT8)
    with pytest.raises(ValueError, match="float8_e8m0fnu, a chip number format"):
        torch_npu.npu_add_quant_matmul(ny, n1, n2, ns, x2_scale_dtype=torch.float8_e8m0fnu)
    with pytest.raises(ValueError, match="mx block quantisation, a chip number format"):
        torch_npu.npu_add_quant_matmul_(ny, n1, n2, ns, group_sizes=[1, 1, 32])
    with pytest.raises(ValueError, match="mx block scale"):
        torch_npu.npu_add_quant_matmul_(ny, n1, n2, torch.ones(1, 10, 2).npu())


# ---- npu_add_quant_gmm_ / npu_add_quant_gmm ----

def aqgmm_inputs(m=5, k=24, n=6, group_list=(4, 4, 15, 20), flat=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    groups = len(group_list)
    y = torch.randn(groups * m, n, generator=g) if flat else torch.randn(groups, m, n, generator=g)
    x1, x2 = int8((m, k), g), int8((k, n), g)
    x2_scale = torch.rand(groups, n, generator=g) * 0.05 + 0.001
    x1_scale = torch.rand(groups, generator=g) * 0.5 + 0.5
    return y, x1, x2, x2_scale, torch.tensor(group_list, dtype=torch.int64), x1_scale


@pytest.mark.parametrize("group_list_type", [0, 1])
@pytest.mark.parametrize("with_x1_scale", [False, True])
def test_add_quant_gmm_inplace(group_list_type, with_x1_scale):
    y, x1, x2, x2_scale, group_list, x1_scale = aqgmm_inputs()
    if group_list_type == 1:
        group_list = torch.tensor([4, 0, 11, 5], dtype=torch.int64)  # the same groups, as sizes
    x1_scale = x1_scale if with_x1_scale else None
    expected = ref.add_quant_gmm(y, x1, x2, x2_scale, group_list, x1_scale, group_list_type)
    y_npu = y.npu()
    out = torch_npu.npu_add_quant_gmm_(y_npu, x1.npu(), x2.npu(), x2_scale.npu(), group_list.npu(),
                                       x1_scale=None if x1_scale is None else x1_scale.npu(),
                                       group_list_type=group_list_type)
    assert out.data_ptr() == y_npu.data_ptr()
    torch.testing.assert_close(y_npu.cpu(), expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(y_npu.cpu()[1], y[1])  # the empty group adds nothing


def test_add_quant_gmm_functional_flat_self_and_transposed_x1():
    y, x1, x2, x2_scale, group_list, x1_scale = aqgmm_inputs(flat=True, seed=1)
    expected = ref.add_quant_gmm(y, x1, x2, x2_scale, group_list, x1_scale)
    y_npu = y.npu()
    got = torch_npu.npu_add_quant_gmm(y_npu, x1.t().contiguous().npu().t(), x2.npu(), x2_scale.npu(),
                                      group_list.npu(), x1_scale=x1_scale.npu())
    assert got.shape == y.shape and got.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(y_npu.cpu(), y)


def test_add_quant_gmm_per_group_scale():
    y, x1, x2, _, group_list, x1_scale = aqgmm_inputs(seed=2)
    x2_scale = torch.rand(4, 1) * 0.05
    expected = ref.add_quant_gmm(y, x1, x2, x2_scale, group_list, x1_scale)
    got = torch_npu.npu_add_quant_gmm(y.npu(), x1.npu(), x2.npu(), x2_scale.npu(), group_list.npu(),
                                      x1_scale=x1_scale.npu())
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_add_quant_gmm_meta_and_device_op():
    y, x1, x2, x2_scale, group_list, x1_scale = aqgmm_inputs()
    meta = torch.ops.npu.npu_add_quant_gmm(y.to("meta"), x1.to("meta"), x2.to("meta"), x2_scale.to("meta"),
                                           group_list.to("meta"))
    assert meta.shape == y.shape and meta.dtype == torch.float32
    y_meta = y.to("meta")
    assert torch.ops.npu.npu_add_quant_gmm_(y_meta, x1.to("meta"), x2.to("meta"), x2_scale.to("meta"),
                                            group_list.to("meta")) is y_meta
    before = device_op_count("aclnnQuantGroupedMatmulInplaceAdd")
    torch_npu.npu_add_quant_gmm_(y.npu(), x1.npu(), x2.npu(), x2_scale.npu(), group_list.npu())
    torch.npu.synchronize()
    assert device_op_count("aclnnQuantGroupedMatmulInplaceAdd") == before + 1


def test_add_quant_gmm_errors():
    y, x1, x2, x2_scale, group_list, x1_scale = aqgmm_inputs()
    ny, n1, n2, ns, ng = y.npu(), x1.npu(), x2.npu(), x2_scale.npu(), group_list.npu()
    with pytest.raises(ValueError, match="group_sizes is not supported"):
        torch_npu.npu_add_quant_gmm(ny, n1, n2, ns, ng, group_sizes=[0, 0, 0])
    with pytest.raises(ValueError, match="group_list_type"):
        torch_npu.npu_add_quant_gmm(ny, n1, n2, ns, ng, group_list_type=2)
    with pytest.raises(ValueError, match="split different k"):
        torch_npu.npu_add_quant_gmm(ny, n1, x2[:20].npu(), ns, ng)
    with pytest.raises(ValueError, match="self must hold 4 groups"):
        torch_npu.npu_add_quant_gmm(y[:3].npu(), n1, n2, ns, ng)
    with pytest.raises(ValueError, match="x2_scale must be"):
        torch_npu.npu_add_quant_gmm(ny, n1, n2, x2_scale[:3].npu(), ng)
    with pytest.raises(ValueError, match="x1_scale must be"):
        torch_npu.npu_add_quant_gmm(ny, n1, n2, ns, ng, x1_scale=torch.rand(3).npu())
    with pytest.raises(ValueError, match="hifloat8, a chip number format the software NPU does not have"):
        torch_npu.npu_add_quant_gmm(ny, n1, n2, ns, ng, x1_dtype=HIFLOAT8, x2_dtype=HIFLOAT8)
    with pytest.raises(RuntimeError, match="non-decreasing"):
        torch_npu.npu_add_quant_gmm(ny, n1, n2, ns, torch.tensor([4, 2, 15, 20]).npu()).cpu()
    with pytest.raises(RuntimeError, match="non-decreasing"):
        torch_npu.npu_add_quant_gmm(ny, n1, n2, ns, torch.tensor([4, 4, 15, 30]).npu()).cpu()
