"""Quantized-matmul variants against CPU references written from their documented definitions, with Meta kernels,
device-op counters and argument errors."""

import pytest
import torch

import torch_npu
from op_refs import quant_matmul_variants as ref


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def int8(shape, g):
    return torch.randint(-8, 8, shape, generator=g, dtype=torch.int8)


# ---- npu_quant_matmul_gelu ----

def gelu_inputs(m=6, k=32, n=16, scale_dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x1, x2 = int8((m, k), g), int8((k, n), g)
    x1_scale = (torch.rand(m, generator=g) * 0.02 + 0.001).to(torch.float32)
    x2_scale = (torch.rand(n, generator=g) * 0.02 + 0.001).to(scale_dtype)
    return x1, x2, x1_scale, x2_scale


@pytest.mark.parametrize("approximate", ["gelu_erf", "gelu_tanh"])
@pytest.mark.parametrize("bias_dtype", [None, torch.float32, torch.float16, torch.bfloat16, torch.int32])
def test_quant_matmul_gelu_a8w8(approximate, bias_dtype):
    x1, x2, x1_scale, x2_scale = gelu_inputs()
    bias = None if bias_dtype is None else (torch.randn(16) * 4).to(bias_dtype)
    expected = ref.quant_matmul_gelu(x1, x2, x1_scale, x2_scale, bias, approximate)
    got = torch_npu.npu_quant_matmul_gelu(x1.npu(), x2.npu(), x1_scale.npu(), x2_scale.npu(),
                                          bias=None if bias is None else bias.npu(), approximate=approximate).cpu()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got.float(), expected.float(), rtol=1e-2, atol=1e-2)
    assert got.float().abs().sum() > 0


def test_quant_matmul_gelu_bfloat16_scale_and_batch():
    g = torch.Generator().manual_seed(1)
    x1, x2 = int8((2, 5, 16), g), int8((16, 8), g)
    x1_scale, x2_scale = torch.rand(5, generator=g) * 0.05, (torch.rand(8, generator=g) * 0.05).to(torch.bfloat16)
    expected = ref.quant_matmul_gelu(x1, x2, x1_scale, x2_scale)
    got = torch_npu.npu_quant_matmul_gelu(x1.npu(), x2.npu(), x1_scale.npu(), x2_scale.npu()).cpu()
    assert got.dtype == torch.bfloat16 and got.shape == (2, 5, 8)
    torch.testing.assert_close(got.float(), expected.float(), rtol=1e-2, atol=1e-2)


def test_quant_matmul_gelu_int4_packed():
    g = torch.Generator().manual_seed(2)
    m, k, n = 4, 64, 16
    a = torch.randint(-8, 8, (m, k), generator=g)
    b = torch.randint(-8, 8, (k, n), generator=g)
    x1, x2 = ref.pack_int4_words(a), ref.pack_int4_words(b)
    x1_scale, x2_scale = torch.rand(m, generator=g) * 0.02, torch.rand(n, generator=g) * 0.02
    assert torch.equal(ref.unpack_int4_words(x1), a)
    expected = ref.quant_matmul_gelu(x1, x2, x1_scale, x2_scale)
    got = torch_npu.npu_quant_matmul_gelu(x1.npu(), x2.npu(), x1_scale.npu(), x2_scale.npu()).cpu()
    assert got.shape == (m, n) and got.dtype == torch.float16
    torch.testing.assert_close(got.float(), expected.float(), rtol=1e-2, atol=1e-2)


def test_quant_matmul_gelu_meta_and_device_op():
    x1, x2, x1_scale, x2_scale = gelu_inputs()
    meta = torch.ops.npu.npu_quant_matmul_gelu(x1.to("meta"), x2.to("meta"), x1_scale.to("meta"),
                                               x2_scale.to("meta"), bias=torch.empty(16, dtype=torch.bfloat16,
                                                                                     device="meta"))
    assert meta.shape == (6, 16) and meta.dtype == torch.bfloat16
    before = device_op_count("aclnnFusedQuantMatmul")
    torch_npu.npu_quant_matmul_gelu(x1.npu(), x2.npu(), x1_scale.npu(), x2_scale.npu())
    torch.npu.synchronize()
    assert device_op_count("aclnnFusedQuantMatmul") == before + 1


def test_quant_matmul_gelu_errors():
    x1, x2, x1_scale, x2_scale = gelu_inputs()
    with pytest.raises(ValueError, match="approximate"):
        torch_npu.npu_quant_matmul_gelu(x1.npu(), x2.npu(), x1_scale.npu(), x2_scale.npu(), approximate="relu")
    with pytest.raises(TypeError, match="int8"):
        torch_npu.npu_quant_matmul_gelu(x1.float().npu(), x2.npu(), x1_scale.npu(), x2_scale.npu())
    with pytest.raises(ValueError, match="do not multiply"):
        torch_npu.npu_quant_matmul_gelu(x1.npu(), x2[:8].npu(), x1_scale.npu(), x2_scale.npu())


# ---- npu_quant_matmul_reduce_sum ----

def reduce_sum_inputs(batch=3, m=5, k=16, n=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    x1, x2 = int8((batch, m, k), g), int8((batch, k, n), g)
    x1_scale = torch.rand((batch, m), generator=g) * 0.1
    x2_scale = (torch.rand(n, generator=g) * 0.1).to(torch.bfloat16)
    return x1, x2, x1_scale, x2_scale


@pytest.mark.parametrize("nz", [True, False])
def test_quant_matmul_reduce_sum(nz):
    x1, x2, x1_scale, x2_scale = reduce_sum_inputs()
    expected = ref.quant_matmul_reduce_sum(x1, x2, x1_scale, x2_scale)
    x2_npu = x2.npu()
    if nz:  # upstream's documented form: the weight cast to FRACTAL_NZ (29)
        x2_npu = torch_npu.npu_format_cast(x2_npu.contiguous(), 29)
    got = torch_npu.npu_quant_matmul_reduce_sum(x1.npu(), x2_npu, x1_scale=x1_scale.npu(),
                                                x2_scale=x2_scale.npu()).cpu()
    assert got.dtype == torch.bfloat16 and got.shape == (5, 8)
    torch.testing.assert_close(got.float(), expected.float(), rtol=1e-2, atol=1e-2)
    assert got.float().abs().sum() > 0


def test_quant_matmul_reduce_sum_meta_and_device_op():
    x1, x2, x1_scale, x2_scale = reduce_sum_inputs(batch=2, m=4, k=8, n=6)
    meta = torch.ops.npu.npu_quant_matmul_reduce_sum(x1.to("meta"), x2.to("meta"), x1_scale=x1_scale.to("meta"),
                                                     x2_scale=x2_scale.to("meta"))
    assert meta.shape == (4, 6) and meta.dtype == torch.bfloat16
    before = device_op_count("aclnnQuantMatmulReduceSumWeightNz")
    torch_npu.npu_quant_matmul_reduce_sum(x1.npu(), x2.npu(), x1_scale=x1_scale.npu(), x2_scale=x2_scale.npu())
    torch.npu.synchronize()
    assert device_op_count("aclnnQuantMatmulReduceSumWeightNz") == before + 1


def test_quant_matmul_reduce_sum_errors():
    x1, x2, x1_scale, x2_scale = reduce_sum_inputs()
    with pytest.raises(ValueError, match="x1_scale is required"):
        torch_npu.npu_quant_matmul_reduce_sum(x1.npu(), x2.npu(), x2_scale=x2_scale.npu())
    with pytest.raises(ValueError, match="share batch and k"):
        torch_npu.npu_quant_matmul_reduce_sum(x1.npu(), x2[:2].npu(), x1_scale=x1_scale.npu(),
                                              x2_scale=x2_scale.npu())
    with pytest.raises(TypeError, match="bfloat16"):
        torch_npu.npu_quant_matmul_reduce_sum(x1.npu(), x2.npu(), x1_scale=x1_scale.npu(),
                                              x2_scale=x2_scale.float().npu())


# ---- npu_rotate_quant ----

def rotate_inputs(dtype, m=6, n=64, k=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, n, generator=g).to(dtype)
    rotation = torch.randn(k, k, generator=g)
    rotation = (rotation / rotation.norm(dim=1, keepdim=True)).to(dtype)
    return x, rotation


def assert_quantized_close(got, expected):
    # One step of rounding difference is allowed where float32 summation order differs.
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert (got.to(torch.int64) - expected.to(torch.int64)).abs().max() <= 1


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("round_mode", ["rint", "round", "floor"])
def test_rotate_quant_int8(dtype, round_mode):
    x, rotation = rotate_inputs(dtype)
    y_ref, scale_ref = ref.rotate_quant(x, rotation, round_mode=round_mode)
    y, scale = torch_npu.npu_rotate_quant(x.npu(), rotation.npu(), dst_dtype=torch.int8, round_mode=round_mode)
    assert_quantized_close(y.cpu(), y_ref)
    torch.testing.assert_close(scale.cpu(), scale_ref, rtol=1e-5, atol=1e-7)
    assert y.cpu().abs().max() == 127  # the row maximum maps to the top of the grid


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_rotate_quant_int4(dtype):
    x, rotation = rotate_inputs(dtype, seed=3)
    y_ref, scale_ref = ref.rotate_quant(x, rotation, int4=True)
    y, scale = torch_npu.npu_rotate_quant(x.npu(), rotation.npu(), dst_dtype=torch.quint4x2)
    assert y.dtype == torch.int32 and y.shape == (6, 8)
    assert_quantized_close(ref.unpack_int4_words(y.cpu()), ref.unpack_int4_words(y_ref))
    torch.testing.assert_close(scale.cpu(), scale_ref, rtol=1e-5, atol=1e-7)


def test_rotate_quant_meta_and_device_op():
    x, rotation = rotate_inputs(torch.float16)
    y, scale = torch.ops.npu.npu_rotate_quant(x.to("meta"), rotation.to("meta"), dst_dtype=torch.quint4x2)
    assert y.shape == (6, 8) and y.dtype == torch.int32 and scale.shape == (6,) and scale.dtype == torch.float32
    before = device_op_count("aclnnRotateQuant")
    torch_npu.npu_rotate_quant(x.npu(), rotation.npu())
    torch.npu.synchronize()
    assert device_op_count("aclnnRotateQuant") == before + 1


def test_rotate_quant_errors():
    x, rotation = rotate_inputs(torch.float16)
    with pytest.raises(ValueError, match="multiple of K"):
        torch_npu.npu_rotate_quant(x[:, :40].npu(), rotation.npu())
    with pytest.raises(TypeError, match="float16 or both bfloat16"):
        torch_npu.npu_rotate_quant(x.float().npu(), rotation.float().npu())
    with pytest.raises(ValueError, match="chip number formats"):
        torch_npu.npu_rotate_quant(x.npu(), rotation.npu(), dst_dtype=torch.float8_e4m3fn)


# ---- npu_dequant_bias ----

@pytest.mark.parametrize("output_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("with_activation_scale", [True, False])
@pytest.mark.parametrize("bias_dtype", [None, torch.float32, torch.float16, torch.bfloat16, torch.int32])
def test_dequant_bias(output_dtype, with_activation_scale, bias_dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-2000, 2000, (4, 6), generator=g, dtype=torch.int32)
    weight_scale = torch.rand(6, generator=g) * 0.01
    activation_scale = torch.rand(4, generator=g) + 0.5 if with_activation_scale else None
    bias = None if bias_dtype is None else (torch.randn(6, generator=g) * 50).to(bias_dtype)
    expected = ref.dequant_bias(x, weight_scale, activation_scale, bias, output_dtype)
    got = torch_npu.npu_dequant_bias(x.npu(), weight_scale.npu(),
                                     None if activation_scale is None else activation_scale.npu(),
                                     None if bias is None else bias.npu(), output_dtype=output_dtype).cpu()
    assert got.dtype == output_dtype and got.shape == x.shape
    torch.testing.assert_close(got.float(), expected.float(), rtol=1e-2, atol=1e-2)


def test_dequant_bias_meta_and_device_op():
    x = torch.randint(-50, 50, (3, 5), dtype=torch.int32)
    weight_scale = torch.rand(5)
    meta = torch.ops.npu.npu_dequant_bias(x.to("meta"), weight_scale.to("meta"), None, None,
                                          output_dtype=torch.bfloat16)
    assert meta.shape == (3, 5) and meta.dtype == torch.bfloat16
    before = device_op_count("aclnnDequantBias")
    torch_npu.npu_dequant_bias(x.npu(), weight_scale.npu(), None, None)
    torch.npu.synchronize()
    assert device_op_count("aclnnDequantBias") == before + 1


def test_dequant_bias_errors():
    x = torch.randint(-50, 50, (3, 5), dtype=torch.int32)
    with pytest.raises(ValueError, match="output_dtype"):
        torch_npu.npu_dequant_bias(x.npu(), torch.rand(5).npu(), None, None, output_dtype=torch.float32)
    with pytest.raises(TypeError, match="int32"):
        torch_npu.npu_dequant_bias(x.float().npu(), torch.rand(5).npu(), None, None)
    with pytest.raises(ValueError, match="weight_scale"):
        torch_npu.npu_dequant_bias(x.npu(), torch.rand(4).npu(), None, None)


# ---- npu_gelu_quant ----

def gelu_quant_inputs(dtype, shape=(5, 24), seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3).to(dtype)
    scale = (torch.rand(shape[-1], generator=g) * 20 + 1).to(dtype)
    offset = (torch.randn(shape[-1], generator=g) * 4).to(dtype)
    return x, scale, offset


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_quant_static(dtype, approximate):
    x, scale, offset = gelu_quant_inputs(dtype)
    y_ref, _ = ref.gelu_quant(x, scale, offset, approximate, "static")
    y, out_scale = torch_npu.npu_gelu_quant(x.npu(), input_scale=scale.npu(), input_offset=offset.npu(),
                                            approximate=approximate, quant_mode="static")
    assert out_scale is None
    assert_quantized_close(y.cpu(), y_ref)
    assert y.cpu().abs().sum() > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("smooth", [True, False])
def test_gelu_quant_dynamic(dtype, smooth):
    x, scale, _ = gelu_quant_inputs(dtype, shape=(2, 3, 16), seed=1)
    y_ref, scale_ref = ref.gelu_quant(x, scale if smooth else None, quant_mode="dynamic")
    y, out_scale = torch_npu.npu_gelu_quant(x.npu(), input_scale=scale.npu() if smooth else None)
    assert_quantized_close(y.cpu(), y_ref)
    assert out_scale.shape == (2, 3) and out_scale.dtype == torch.float32
    torch.testing.assert_close(out_scale.cpu(), scale_ref, rtol=1e-5, atol=1e-7)


def test_gelu_quant_meta_and_device_op():
    x, scale, _ = gelu_quant_inputs(torch.float16)
    y, out_scale = torch.ops.npu.npu_gelu_quant(x.to("meta"))
    assert y.shape == x.shape and y.dtype == torch.int8 and out_scale.shape == (5,)
    before = device_op_count("aclnnGeluQuant")
    torch_npu.npu_gelu_quant(x.npu())
    torch.npu.synchronize()
    assert device_op_count("aclnnGeluQuant") == before + 1


def test_gelu_quant_errors():
    x, scale, _ = gelu_quant_inputs(torch.float16)
    with pytest.raises(ValueError, match="static quantization needs input_scale"):
        torch_npu.npu_gelu_quant(x.npu(), quant_mode="static")
    with pytest.raises(ValueError, match="quant_mode"):
        torch_npu.npu_gelu_quant(x.npu(), quant_mode="pertensor")
    with pytest.raises(ValueError, match="chip number formats"):
        torch_npu.npu_gelu_quant(x.npu(), dst_type=torch.float8_e4m3fn)
    with pytest.raises(TypeError, match="self must be"):
        torch_npu.npu_gelu_quant(x.to(torch.int32).npu())


# ---- npu_quant_matmul_dequant ----

def qmm_dequant_inputs(dtype, m=6, k=32, n=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g).to(dtype)
    weight = int8((n, k), g)
    weight_scale = torch.rand(n, generator=g) * 0.05
    return x, weight, weight_scale


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("smooth", [False, True])
def test_quant_matmul_dequant_dynamic_pertoken(dtype, smooth):
    x, weight, weight_scale = qmm_dequant_inputs(dtype)
    smooth_scale = (torch.rand(32) + 0.5).to(dtype) if smooth else None
    bias = torch.randn(12)
    expected = ref.quant_matmul_dequant(x, weight, weight_scale, bias=bias, smooth_scale=smooth_scale)
    got = torch_npu.npu_quant_matmul_dequant(x.npu(), weight.npu(), weight_scale.npu(), bias=bias.npu(),
                                             smooth_scale=None if smooth_scale is None else smooth_scale.npu()).cpu()
    assert got.dtype == dtype and got.shape == (6, 12)
    torch.testing.assert_close(got.float(), expected.float(), rtol=2e-2, atol=5e-2)
    # Quantization keeps the result close to the float matmul it approximates.
    plain = (x.float() * (smooth_scale.float() if smooth else 1)) @ (weight.float() * weight_scale.unsqueeze(-1)).t()
    assert ((got.float() - bias) - plain).abs().max() < 0.05 * plain.abs().max() + 0.05


@pytest.mark.parametrize("mode", ["pertensor", "pertoken"])
def test_quant_matmul_dequant_static(mode):
    x, weight, weight_scale = qmm_dequant_inputs(torch.float16, seed=1)
    x_scale = torch.rand(1 if mode == "pertensor" else 6) * 0.02 + 0.01
    x_offset = torch.randint(-3, 3, x_scale.shape).float()
    expected = ref.quant_matmul_dequant(x, weight, weight_scale, x_scale=x_scale, x_offset=x_offset)
    got = torch_npu.npu_quant_matmul_dequant(x.npu(), weight.npu(), weight_scale.npu(), x_scale=x_scale.npu(),
                                             x_offset=x_offset.npu(), quant_mode=mode).cpu()
    torch.testing.assert_close(got.float(), expected.float(), rtol=2e-2, atol=5e-2)


def test_quant_matmul_dequant_meta_and_device_op():
    x, weight, weight_scale = qmm_dequant_inputs(torch.bfloat16)
    meta = torch.ops.npu.npu_quant_matmul_dequant(x.to("meta"), weight.to("meta"), weight_scale.to("meta"))
    assert meta.shape == (6, 12) and meta.dtype == torch.bfloat16
    before = device_op_count("aclnnQuantMatmulDequant")
    torch_npu.npu_quant_matmul_dequant(x.npu(), weight.npu(), weight_scale.npu())
    torch.npu.synchronize()
    assert device_op_count("aclnnQuantMatmulDequant") == before + 1


def test_quant_matmul_dequant_errors():
    x, weight, weight_scale = qmm_dequant_inputs(torch.float16)
    with pytest.raises(ValueError, match="quant_mode"):
        torch_npu.npu_quant_matmul_dequant(x.npu(), weight.npu(), weight_scale.npu(), quant_mode="perchannel")
    with pytest.raises(TypeError, match="int8"):
        torch_npu.npu_quant_matmul_dequant(x.npu(), weight.float().npu(), weight_scale.npu())
    with pytest.raises(ValueError, match="weight_scale"):
        torch_npu.npu_quant_matmul_dequant(x.npu(), weight.npu(), weight_scale[:5].npu())


# ---- npu_quant_grouped_matmul_dequant ----

def grouped_dequant_inputs(dtype, m=10, k=32, n=8, groups=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g).to(dtype)
    weight = int8((groups, n, k), g)
    weight_scale = torch.rand(groups, n, generator=g) * 0.05
    group_list = torch.tensor([3, 3, 8], dtype=torch.int64)  # an empty group; rows 8-9 belong to none
    return x, weight, weight_scale, group_list


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_quant_grouped_matmul_dequant_dynamic(dtype):
    x, weight, weight_scale, group_list = grouped_dequant_inputs(dtype)
    bias = torch.randn(3, 8)
    expected = ref.quant_grouped_matmul_dequant(x, weight, weight_scale, group_list, bias=bias)
    got = torch_npu.npu_quant_grouped_matmul_dequant(x.npu(), weight.npu(), weight_scale.npu(), group_list.npu(),
                                                     bias=bias.npu()).cpu()
    assert got.dtype == dtype and got.shape == (10, 8)
    torch.testing.assert_close(got.float(), expected.float(), rtol=2e-2, atol=5e-2)
    assert torch.equal(got[8:].float(), torch.zeros(2, 8))


def test_quant_grouped_matmul_dequant_static_pertensor():
    x, weight, weight_scale, group_list = grouped_dequant_inputs(torch.float16, seed=2)
    smooth_scale = (torch.rand(32) + 0.5).half()
    x_scale = torch.tensor([0.02])
    expected = ref.quant_grouped_matmul_dequant(x, weight, weight_scale, group_list, x_scale=x_scale,
                                                smooth_scale=smooth_scale)
    got = torch_npu.npu_quant_grouped_matmul_dequant(x.npu(), weight.npu(), weight_scale.npu(), group_list.npu(),
                                                     x_scale=x_scale.npu(), smooth_scale=smooth_scale.npu(),
                                                     quant_mode="pertensor").cpu()
    torch.testing.assert_close(got.float(), expected.float(), rtol=2e-2, atol=5e-2)


def test_quant_grouped_matmul_dequant_meta_and_device_op():
    x, weight, weight_scale, group_list = grouped_dequant_inputs(torch.float16)
    meta = torch.ops.npu.npu_quant_grouped_matmul_dequant(x.to("meta"), weight.to("meta"), weight_scale.to("meta"),
                                                          group_list.to("meta"))
    assert meta.shape == (10, 8) and meta.dtype == torch.float16
    before = device_op_count("aclnnQuantGroupedMatmulDequant")
    torch_npu.npu_quant_grouped_matmul_dequant(x.npu(), weight.npu(), weight_scale.npu(), group_list.npu())
    torch.npu.synchronize()
    assert device_op_count("aclnnQuantGroupedMatmulDequant") == before + 1


def test_quant_grouped_matmul_dequant_errors():
    x, weight, weight_scale, group_list = grouped_dequant_inputs(torch.float16)
    with pytest.raises(ValueError, match="group_list"):
        torch_npu.npu_quant_grouped_matmul_dequant(x.npu(), weight.npu(), weight_scale.npu(), group_list[:2].npu())
    with pytest.raises(ValueError, match="weight_scale"):
        torch_npu.npu_quant_grouped_matmul_dequant(x.npu(), weight.npu(), weight_scale[:, :4].npu(),
                                                   group_list.npu())
    with pytest.raises(RuntimeError, match="non-decreasing"):
        torch_npu.npu_quant_grouped_matmul_dequant(x.npu(), weight.npu(), weight_scale.npu(),
                                                   torch.tensor([5, 2, 8]).npu()).cpu()
