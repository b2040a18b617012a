"""Quantization ops against CPU references written from their definitions (custom_op_refs.py): npu_dynamic_quant and
npu_dynamic_quant_asymmetric (per token / tensor / channel, smoothing, MoE groups), npu_quantize (dividing and
multiplying forms), npu_anti_quant, npu_convert_weight_to_int4pack, npu_swiglu_quant, npu_dequant_swiglu_quant,
npu_rms_norm_quant, npu_add_rms_norm_quant, npu_add_rms_norm_dynamic_quant, npu_group_quant, npu_quant_scatter(_)
and npu_dynamic_block_quant; int8 / uint8 / int32 outputs and int4 packed into int32 (or int8 pairs); rounding half
to even; Meta shapes, device ops and clear errors (chip number formats such as float8 / hifloat8 are refused)."""

import pytest
import torch

from op_refs import quantize as ref
import torch_npu

FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def assert_quantized_close(got, expected, int4=None):
    """Integer outputs: same dtype and shape, at most one step apart, and nearly all equal (the device computes the
    reference's float32 formula; a step can only come from a value at a rounding boundary). int4 data is compared
    unpacked ("int32": eight to an int32, "int8": two to an int8)."""
    got = got.cpu()
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, got.shape, expected.shape)
    if got.dim() == 0:
        int4 = None
    if int4 == "int32":
        got, expected = ref.int4_unpack32(got), ref.int4_unpack32(expected)
    elif int4 == "int8":
        got, expected = ref.int4_unpack8(got), ref.int4_unpack8(expected)
    diff = (got.to(torch.int64) - expected.to(torch.int64)).abs()
    assert diff.max().item() <= 1, diff.max()
    assert (diff > 0).float().mean().item() <= 0.01, (diff > 0).float().mean()


def device_op_count(name):
    torch.npu.synchronize()
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def _groups(rows, count, g):
    ends = torch.sort(torch.randint(0, rows + 1, (count,), generator=g)).values
    ends[-1] = rows
    return ends.to(torch.int32)


# --- npu_dynamic_quant / npu_dynamic_quant_asymmetric -----------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dst_type", [None, torch.int8, torch.quint4x2])
@pytest.mark.parametrize("smoothing", ["none", "row", "groups"])
@pytest.mark.parametrize("symmetric", [True, False])
def test_dynamic_quant_per_token(dtype, dst_type, smoothing, symmetric):
    g = torch.Generator().manual_seed(10)
    x = (torch.randn(2, 12, 64, generator=g) * 3).to(dtype)
    smooth, groups = None, None
    if smoothing == "row":
        smooth = (torch.rand(64, generator=g) + 0.5).to(dtype)
    elif smoothing == "groups":
        smooth = (torch.rand(5, 64, generator=g) + 0.5).to(dtype)
        groups = _groups(24, 5, g)
    kwargs = dict(smooth_scales=smooth.npu() if smooth is not None else None,
                  group_index=groups.npu() if groups is not None else None, dst_type=dst_type)
    op = torch_npu.npu_dynamic_quant if symmetric else torch_npu.npu_dynamic_quant_asymmetric
    got = op(x.npu(), **kwargs)
    expected = ref.dynamic_quant(x, smooth, groups, dst_type=dst_type or torch.int8, symmetric=symmetric)
    int4 = dst_type == torch.quint4x2
    assert got[0].shape == ((2, 12, 8) if int4 else (2, 12, 64))
    assert_quantized_close(got[0], expected[0], int4="int32" if int4 else None)
    for g_out, e_out in zip(got[1:], expected[1:]):  # scale (and offset)
        assert g_out.dtype == torch.float32 and g_out.shape == (2, 12)
        torch.testing.assert_close(g_out.cpu(), e_out, rtol=1e-6, atol=0)


@pytest.mark.parametrize("quant_mode", ["pertensor", "perchannel"])
@pytest.mark.parametrize("symmetric", [True, False])
def test_dynamic_quant_per_tensor_and_channel(quant_mode, symmetric):
    g = torch.Generator().manual_seed(11)
    x = torch.randn(3, 16, 32, generator=g).bfloat16()
    smooth = (torch.rand(16, generator=g) + 0.5).bfloat16() if quant_mode == "perchannel" else None
    op = torch_npu.npu_dynamic_quant if symmetric else torch_npu.npu_dynamic_quant_asymmetric
    got = op(x.npu(), smooth_scales=smooth.npu() if smooth is not None else None, quant_mode=quant_mode)
    expected = ref.dynamic_quant(x, smooth, quant_mode=quant_mode, symmetric=symmetric)
    assert_quantized_close(got[0], expected[0])
    for g_out, e_out in zip(got[1:], expected[1:]):
        assert g_out.shape == ((1,) if quant_mode == "pertensor" else (3, 32))
        torch.testing.assert_close(g_out.cpu(), e_out, rtol=1e-6, atol=0)


def test_dynamic_quant_rounds_half_to_even_and_zero_rows():
    # Row 0's amax is 127, so y = rint(x): the .5 ties show the rounding (half to even, the NPU's CAST_RINT).
    x = torch.tensor([[127.0, 0.5, 1.5, 2.5, -2.5, -3.5, 4.0, 0.0],
                      [0.0] * 8])
    y, scale = torch_npu.npu_dynamic_quant(x.npu())
    assert torch.equal(y[0].cpu(), torch.round(x[0]).to(torch.int8))
    assert torch.equal(y[0].cpu()[1:6], torch.tensor([0, 2, 2, -2, -4], dtype=torch.int8))
    assert torch.equal(y[1].cpu(), torch.zeros(8, dtype=torch.int8)) and scale[1].item() == 0  # no NaN from 0 / 0
    assert_quantized_close(y, ref.dynamic_quant(x)[0])


def test_dynamic_quant_meta_device_op_and_errors():
    meta = torch.empty(2, 3, 16, dtype=torch.float16, device="meta")
    y, scale = torch.ops.npu.npu_dynamic_quant(meta, dst_type=torch.quint4x2)
    assert y.shape == (2, 3, 2) and y.dtype == torch.int32 and scale.shape == (2, 3) and scale.dtype == torch.float32
    y, scale, offset = torch.ops.npu.npu_dynamic_quant_asymmetric(meta, quant_mode="perchannel")
    assert y.shape == (2, 3, 16) and y.dtype == torch.int8 and scale.shape == offset.shape == (2, 16)
    before = device_op_count("aclnnDynamicQuantV4")
    torch_npu.npu_dynamic_quant(torch.randn(2, 8).half().npu())
    torch_npu.npu_dynamic_quant_asymmetric(torch.randn(2, 8).half().npu())
    assert device_op_count("aclnnDynamicQuantV4") == before + 2

    x = torch.randn(4, 16).half().npu()
    with pytest.raises(ValueError, match="dst_type selects float8_e4m3fn, a chip number format"):
        torch_npu.npu_dynamic_quant(x, dst_type=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="dst_type selects hifloat8"):
        torch_npu.npu_dynamic_quant(x, dst_type=256 + 34)  # torch_npu's hifloat8 code
    with pytest.raises(ValueError, match="dst_type must be torch.int8 or torch.quint4x2"):
        torch_npu.npu_dynamic_quant(x, dst_type=torch.int16)
    with pytest.raises(ValueError, match="multiple of 8"):
        torch_npu.npu_dynamic_quant(torch.randn(4, 12).half().npu(), dst_type=torch.quint4x2)
    with pytest.raises(ValueError, match="quant_mode must be"):
        torch_npu.npu_dynamic_quant(x, quant_mode="perblock")
    with pytest.raises(ValueError, match="2 to 8 dimensions"):
        torch_npu.npu_dynamic_quant(torch.randn(16).half().npu())
    with pytest.raises(TypeError, match="float16, bfloat16 or float32"):
        torch_npu.npu_dynamic_quant(torch.ones(4, 16, dtype=torch.int32).npu())
    with pytest.raises(RuntimeError, match="smoothScales must be"):
        torch_npu.npu_dynamic_quant(x, smooth_scales=torch.ones(8).half().npu())
    with pytest.raises(RuntimeError, match="groupIndex needs smoothScales"):
        torch_npu.npu_dynamic_quant(x, group_index=torch.tensor([4], dtype=torch.int32).npu())


# --- npu_quantize ------------------------------------------------------------------------------------------------

ZERO_POINT_TYPE = {torch.qint8: torch.int8, torch.int8: torch.int8, torch.quint8: torch.uint8,
                   torch.qint32: torch.int32}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("target", [torch.qint8, torch.quint8, torch.qint32, torch.int8])
def test_quantize_divides_by_scales(dtype, target):
    g = torch.Generator().manual_seed(20)
    x = (torch.randn(3, 5, 7, generator=g) * 4).to(dtype)
    scales = torch.rand(5, generator=g) * 0.1 + 0.01
    zero_points = torch.randint(0, 10, (5,), generator=g).to(ZERO_POINT_TYPE[target])
    float_zero_points = torch.randn(5, generator=g).bfloat16()
    cases = ((scales, zero_points, 1), (scales, None, -2), (scales[:1], zero_points[:1], 0),
             (scales.bfloat16(), float_zero_points, 1))
    for s, z, axis in cases:
        got = torch_npu.npu_quantize(x.npu(), s.npu(), z.npu() if z is not None else None, target, axis)
        assert got.shape == x.shape
        assert_quantized_close(got, ref.quantize(x, s, z, target, axis))


@pytest.mark.parametrize("dtype", FLOATS)
def test_quantize_multiplies_by_scales(dtype):
    g = torch.Generator().manual_seed(21)
    x = (torch.randn(16, 64, generator=g) * 3).to(dtype)
    cases = (((torch.rand(64, generator=g) * 20).to(dtype), torch.randn(64, generator=g).to(dtype), -1),  # channel
             ((torch.rand(16, 1, generator=g) * 20).to(dtype), torch.randn(16, 1, generator=g).to(dtype), -2),  # row
             ((torch.rand(1, generator=g) * 20).to(dtype), None, 1))  # tensor (axis 1 means the last one)
    for s, z, axis in cases:
        got = torch_npu.npu_quantize(x.npu(), s.npu(), z.npu() if z is not None else None, torch.qint8, axis,
                                     div_mode=False)
        assert_quantized_close(got, ref.quantize(x, s, z, torch.qint8, axis, div_mode=False))
    s4 = (torch.rand(64, generator=g) * 4).to(dtype)
    got = torch_npu.npu_quantize(x.npu(), s4.npu(), None, torch.quint4x2, -1, div_mode=False)
    assert got.dtype == torch.int32 and got.shape == (16, 8)
    assert_quantized_close(got, ref.quantize(x, s4, None, torch.quint4x2, -1, div_mode=False), int4="int32")


def test_quantize_rounds_half_to_even():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 3.25])
    for div_mode in (True, False):
        got = torch_npu.npu_quantize(x.npu(), torch.ones(1).npu(), None, torch.qint8, 0, div_mode=div_mode).cpu()
        assert torch.equal(got, torch.round(x).to(torch.int8)), (div_mode, got)


def test_quantize_meta_device_ops_and_errors():
    meta = torch.empty(4, 16, device="meta")
    assert torch.ops.npu.npu_quantize(meta, torch.empty(16, device="meta"), None, torch.quint8).dtype == torch.uint8
    packed = torch.ops.npu.npu_quantize(meta, torch.empty(16, device="meta"), None, torch.quint4x2, -1, False)
    assert packed.shape == (4, 2) and packed.dtype == torch.int32
    before = device_op_count("aclnnQuantize"), device_op_count("aclnnAscendQuantV3")
    x, s = torch.randn(4, 16).npu(), torch.rand(16).npu()
    torch_npu.npu_quantize(x, s, None, torch.qint8)
    torch_npu.npu_quantize(x, s, None, torch.qint8, -1, False)
    assert (device_op_count("aclnnQuantize"), device_op_count("aclnnAscendQuantV3")) == (before[0] + 1, before[1] + 1)

    with pytest.raises(ValueError, match="dtype selects float8_e5m2, a chip number format"):
        torch_npu.npu_quantize(x, s, None, torch.float8_e5m2)
    with pytest.raises(ValueError, match="quint4x2 needs div_mode=False"):
        torch_npu.npu_quantize(x, s, None, torch.quint4x2)
    with pytest.raises(ValueError, match="dtype must be"):
        torch_npu.npu_quantize(x, s, None, torch.float16)
    with pytest.raises(ValueError, match="axis 3 is out of range"):
        torch_npu.npu_quantize(x, s, None, torch.qint8, 3)
    with pytest.raises(TypeError, match="float16, bfloat16 or float32"):
        torch_npu.npu_quantize(torch.ones(4, 16, dtype=torch.int8).npu(), s, None, torch.qint8)
    with pytest.raises(RuntimeError, match="scales must hold 1 or 16 values"):
        torch_npu.npu_quantize(x, torch.rand(5).npu(), None, torch.qint8, 1)
    with pytest.raises(RuntimeError, match="scale must be"):
        torch_npu.npu_quantize(x, torch.rand(5).npu(), None, torch.qint8, -1, False)


# --- npu_anti_quant ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dst_dtype", [None, torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("packed", [False, True])
def test_anti_quant(dst_dtype, packed):
    g = torch.Generator().manual_seed(30)
    if packed:  # int4 data, eight values to an int32
        x = torch.randint(-2 ** 31, 2 ** 31 - 1, (10, 13), generator=g, dtype=torch.int32)
    else:
        x = torch.randint(-128, 128, (10, 100), generator=g, dtype=torch.int8)
    cols = 104 if packed else 100
    kwargs = {} if dst_dtype is None else {"dst_dtype": dst_dtype}
    for param_dtype in (torch.float32, torch.bfloat16):
        scale = (torch.randn(cols, generator=g) * 0.1).to(param_dtype)
        offset = torch.randn(cols, generator=g).to(param_dtype)
        per_row = torch.rand(10, generator=g).to(param_dtype)
        for s, o in ((scale, None), (scale, offset), (scale[:1], offset[:1]), (per_row, per_row)):
            got = torch_npu.npu_anti_quant(x.npu(), s.npu(), offset=o.npu() if o is not None else None, **kwargs)
            expected = ref.anti_quant(x, s, o, dst_dtype or torch.float16)
            assert got.dtype == expected.dtype and got.shape == (10, cols)
            torch.testing.assert_close(got.cpu(), expected)


def test_anti_quant_meta_device_op_and_errors():
    meta = torch.ops.npu.npu_anti_quant(torch.empty(3, 4, dtype=torch.int32, device="meta"),
                                        torch.empty(32, device="meta"), dst_dtype=torch.bfloat16)
    assert meta.shape == (3, 32) and meta.dtype == torch.bfloat16
    before = device_op_count("aclnnAscendAntiQuant")
    x, s = torch.ones(2, 8, dtype=torch.int8).npu(), torch.ones(8).npu()
    torch_npu.npu_anti_quant(x, s)
    assert device_op_count("aclnnAscendAntiQuant") == before + 1

    with pytest.raises(ValueError, match="Input dst_type must be valid, but got UNKNOWN_SCALAR .*dst_dtype must be "
                                         "torch.float16, torch.bfloat16 or torch.float32"):
        torch_npu.npu_anti_quant(x, s, dst_dtype=-10)
    with pytest.raises(ValueError, match="dst_dtype selects float8_e4m3fn"):
        torch_npu.npu_anti_quant(x, s, dst_dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="reads a uint8 x as hifloat8"):
        torch_npu.npu_anti_quant(x.to(torch.uint8), s)
    with pytest.raises(ValueError, match="x's dtype selects float8_e5m2"):
        torch.ops.npu.npu_anti_quant(torch.empty(2, 8, dtype=torch.float8_e5m2, device="meta"),
                                     torch.empty(8, device="meta"))
    with pytest.raises(ValueError, match="src_dtype must describe x"):
        torch_npu.npu_anti_quant(x, s, src_dtype=torch.quint4x2)
    with pytest.raises(TypeError, match="x must be int8, or int32"):
        torch_npu.npu_anti_quant(x.half(), s)
    with pytest.raises(RuntimeError, match="scale must hold 1, 8"):
        torch_npu.npu_anti_quant(x, torch.ones(5).npu())


# --- npu_convert_weight_to_int4pack ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(64, 32), (2, 8, 16)])
def test_convert_weight_to_int4pack(shape):
    g = torch.Generator().manual_seed(40)
    weight = torch.randint(-8, 8, shape, generator=g, dtype=torch.int32)
    packed = torch_npu.npu_convert_weight_to_int4pack(weight.npu())
    assert packed.dtype == torch.int32 and packed.shape == (*shape[:-1], shape[-1] // 8)
    assert torch.equal(packed.cpu(), ref.int4_pack32(weight))
    assert torch.equal(ref.int4_unpack32(packed.cpu()), weight.to(torch.int8))


def test_int4pack_feeds_weight_quant_batchmatmul():
    g = torch.Generator().manual_seed(41)
    x = torch.randn(8, 64, generator=g).half()
    weight = torch.randint(-8, 8, (64, 32), generator=g, dtype=torch.int32)
    scale, offset = torch.randn(1, 32, generator=g).half(), torch.randn(1, 32, generator=g).half()
    packed = torch_npu.npu_convert_weight_to_int4pack(weight.npu())
    got = torch_npu.npu_weight_quant_batchmatmul(x.npu(), packed, scale.npu(), offset.npu())
    unpacked = torch_npu.npu_weight_quant_batchmatmul(x.npu(), weight.to(torch.int8).npu(), scale.npu(), offset.npu())
    assert torch.equal(got.cpu(), unpacked.cpu())


def test_convert_weight_to_int4pack_meta_device_op_and_errors():
    meta = torch.ops.npu.npu_convert_weight_to_int4pack(torch.empty(16, 64, dtype=torch.int32, device="meta"))
    assert meta.shape == (16, 8) and meta.dtype == torch.int32
    before = device_op_count("aclnnConvertWeightToInt4Pack")
    torch_npu.npu_convert_weight_to_int4pack(torch.zeros(4, 8, dtype=torch.int32).npu())
    assert device_op_count("aclnnConvertWeightToInt4Pack") == before + 1
    with pytest.raises(ValueError, match="float4_e2m1 values"):
        torch_npu.npu_convert_weight_to_int4pack(torch.zeros(4, 8).npu())
    with pytest.raises(TypeError, match="weight must be int32"):
        torch_npu.npu_convert_weight_to_int4pack(torch.zeros(4, 8, dtype=torch.int8).npu())
    with pytest.raises(ValueError, match="multiple of 8"):
        torch_npu.npu_convert_weight_to_int4pack(torch.zeros(4, 12, dtype=torch.int32).npu())
    with pytest.raises(ValueError, match="2-d"):
        torch_npu.npu_convert_weight_to_int4pack(torch.zeros(8, dtype=torch.int32).npu())


# --- npu_swiglu_quant / npu_dequant_swiglu_quant ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("quant_mode", [0, 1])
@pytest.mark.parametrize("dst_type", [None, torch.quint4x2])
@pytest.mark.parametrize("grouping", ["none", "cumsum", "count"])
def test_swiglu_quant(dtype, quant_mode, dst_type, grouping):
    g = torch.Generator().manual_seed(50)
    x = (torch.randn(2, 12, 64, generator=g) * 2).to(dtype)
    groups, list_type, count = None, 0, 1
    if grouping == "cumsum":
        groups, count = torch.tensor([5, 5, 17, 20], dtype=torch.int32), 4  # rows 20..23 are in no group
    elif grouping == "count":
        groups, list_type, count = torch.tensor([3, 0, 9, 12], dtype=torch.int32), 1, 4
    smooth = torch.rand(count, 32, generator=g) + 0.5
    offsets = torch.randn(count, 32, generator=g) if quant_mode == 0 else None
    for activate_left in (False, True):
        got = torch_npu.npu_swiglu_quant(
            x.npu(), smooth_scales=smooth.npu(), offsets=offsets.npu() if offsets is not None else None,
            group_index=groups.npu() if groups is not None else None, activate_left=activate_left,
            quant_mode=quant_mode, group_list_type=list_type, dst_type=dst_type)
        expected = ref.swiglu_quant(x, smooth, offsets, groups, activate_left, quant_mode, list_type,
                                    dst_type or torch.int8)
        int4 = dst_type == torch.quint4x2
        assert got[0].shape == ((2, 12, 16) if int4 else (2, 12, 32)) and got[0].dtype == torch.int8
        assert_quantized_close(got[0], expected[0], int4="int8" if int4 else None)
        assert got[1].shape == (2, 12) and got[1].dtype == torch.float32
        torch.testing.assert_close(got[1].cpu(), expected[1], rtol=1e-6, atol=0)


def test_swiglu_quant_per_tensor_smoothing_and_meta():
    g = torch.Generator().manual_seed(51)
    x = torch.randn(6, 16, generator=g)
    smooth, offsets = torch.rand(1, generator=g) * 8, torch.randn(1, generator=g)  # one value for the one group
    got = torch_npu.npu_swiglu_quant(x.npu(), smooth_scales=smooth.npu(), offsets=offsets.npu(), quant_mode=0)
    assert_quantized_close(got[0], ref.swiglu_quant(x, smooth, offsets, quant_mode=0)[0])
    y, scale = torch.ops.npu.npu_swiglu_quant(torch.empty(3, 4, 16, device="meta"), dst_type=torch.quint4x2)
    assert y.shape == (3, 4, 4) and y.dtype == torch.int8 and scale.shape == (3, 4)
    before = device_op_count("aclnnSwiGluQuantV2")
    torch_npu.npu_swiglu_quant(x.npu(), quant_mode=1)
    assert device_op_count("aclnnSwiGluQuantV2") == before + 1
    with pytest.raises(ValueError, match="dst_type selects float8_e4m3fn"):
        torch_npu.npu_swiglu_quant(x.npu(), dst_type=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="quant_mode must be 0"):
        torch_npu.npu_swiglu_quant(x.npu(), quant_mode=2)
    with pytest.raises(ValueError, match="even last dimension"):
        torch_npu.npu_swiglu_quant(torch.randn(4, 7).npu())
    with pytest.raises(ValueError, match="multiple of 2"):
        torch_npu.npu_swiglu_quant(torch.randn(4, 6).npu(), dst_type=torch.quint4x2)
    with pytest.raises(RuntimeError, match="smoothScales must be"):
        torch_npu.npu_swiglu_quant(x.npu(), smooth_scales=torch.ones(3, 5).npu(), quant_mode=1)


@pytest.mark.parametrize("swiglu_mode", [0, 1, 2])
@pytest.mark.parametrize("quant_mode", [0, 1])
def test_dequant_swiglu_quant_int32_groups(swiglu_mode, quant_mode):
    g = torch.Generator().manual_seed(52)
    x = torch.randint(-10, 10, (24, 64), generator=g, dtype=torch.int32)
    weight_scale = torch.randn(3, 64, generator=g) * 0.1
    activation_scale = torch.rand(24, 1, generator=g) + 0.5
    quant_scale = torch.rand(3, 32, generator=g) + 0.5
    quant_offset = torch.randn(3, 32, generator=g) if quant_mode == 0 else None
    groups = torch.tensor([5, 9, 7])  # 21 rows: rows 21..23 come out 0
    for activate_left in (False, True):
        got = torch_npu.npu_dequant_swiglu_quant(
            x.npu(), weight_scale=weight_scale.npu(), activation_scale=activation_scale.npu(),
            quant_scale=quant_scale.npu(), quant_offset=quant_offset.npu() if quant_offset is not None else None,
            group_index=groups.npu(), activate_left=activate_left, quant_mode=quant_mode, swiglu_mode=swiglu_mode,
            clamp_limit=5.0, glu_alpha=1.5, glu_bias=0.5)
        expected = ref.dequant_swiglu_quant(x, weight_scale, activation_scale, None, quant_scale, quant_offset, groups,
                                            activate_left, quant_mode, swiglu_mode=swiglu_mode, clamp_limit=5.0,
                                            glu_alpha=1.5, glu_bias=0.5)
        assert got[0].shape == (24, 32) and got[1].shape == (24,)
        assert_quantized_close(got[0], expected[0])
        torch.testing.assert_close(got[1].cpu(), expected[1], rtol=1e-6, atol=0)


def test_dequant_swiglu_quant_bias_float_input_and_activate_dim():
    g = torch.Generator().manual_seed(53)
    x = torch.randint(-10, 10, (2, 4, 16), generator=g, dtype=torch.int32)
    weight_scale = torch.rand(16, generator=g) * 0.2
    for bias in (torch.randint(-5, 5, (16,), generator=g, dtype=torch.int32), torch.randn(16, generator=g)):
        got = torch_npu.npu_dequant_swiglu_quant(x.npu(), weight_scale=weight_scale.npu(), bias=bias.npu(),
                                                 quant_mode=1)
        expected = ref.dequant_swiglu_quant(x, weight_scale, None, bias, quant_mode=1)
        assert_quantized_close(got[0], expected[0])
        torch.testing.assert_close(got[1].cpu(), expected[1], rtol=1e-6, atol=0)
    xf = torch.randn(4, 6, 8, generator=g).bfloat16()
    quant_scale, quant_offset = torch.tensor([0.05]), torch.tensor([1.0])
    got = torch_npu.npu_dequant_swiglu_quant(xf.npu(), quant_scale=quant_scale.npu(), quant_offset=quant_offset.npu(),
                                             activate_left=True, activate_dim=1)
    expected = ref.dequant_swiglu_quant(xf, quant_scale=quant_scale, quant_offset=quant_offset, activate_left=True,
                                        activate_dim=1)
    assert got[0].shape == (4, 3, 8) and got[1].shape == (4, 3)
    assert_quantized_close(got[0], expected[0])


def test_dequant_swiglu_quant_meta_device_op_and_errors():
    y, scale = torch.ops.npu.npu_dequant_swiglu_quant(torch.empty(6, 32, dtype=torch.int32, device="meta"),
                                                      quant_mode=1)
    assert y.shape == (6, 16) and y.dtype == torch.int8 and scale.shape == (6,) and scale.dtype == torch.float32
    x, w = torch.randint(-4, 4, (4, 16), dtype=torch.int32).npu(), torch.rand(16).npu()
    before = device_op_count("aclnnDequantSwigluQuantV2")
    torch_npu.npu_dequant_swiglu_quant(x, weight_scale=w, quant_mode=1)
    assert device_op_count("aclnnDequantSwigluQuantV2") == before + 1
    with pytest.raises(ValueError, match="dst_type selects hifloat8"):  # float8: test_hifloat8.py
        torch_npu.npu_dequant_swiglu_quant(x, weight_scale=w, quant_mode=1, dst_type=256 + 34)
    with pytest.raises(ValueError, match="round_mode 1 .'round'. applies to hifloat8"):
        torch_npu.npu_dequant_swiglu_quant(x, weight_scale=w, quant_mode=1, round_mode=1)
    with pytest.raises(ValueError, match="swiglu_mode must be 0, 1 or 2"):
        torch_npu.npu_dequant_swiglu_quant(x, weight_scale=w, swiglu_mode=3)
    with pytest.raises(ValueError, match="clamp_limit must be positive"):
        torch_npu.npu_dequant_swiglu_quant(x, weight_scale=w, swiglu_mode=1, clamp_limit=-1.0)
    with pytest.raises(RuntimeError, match="a float x takes none of them"):
        torch_npu.npu_dequant_swiglu_quant(x.half(), weight_scale=w)
    with pytest.raises(RuntimeError, match="weightScale must be"):
        torch_npu.npu_dequant_swiglu_quant(x, weight_scale=torch.rand(8).npu())


# --- npu_rms_norm_quant / npu_add_rms_norm_quant / npu_add_rms_norm_dynamic_quant --------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dst_dtype", [None, torch.int8, torch.quint4x2])
def test_rms_norm_quant(dtype, dst_dtype):
    g = torch.Generator().manual_seed(60)
    x = torch.randn(2, 5, 64, generator=g).to(dtype)
    int4 = dst_dtype == torch.quint4x2
    for norm_shape in ((64,), (1, 64)):
        gamma, beta = torch.randn(norm_shape, generator=g).to(dtype), torch.randn(norm_shape, generator=g).to(dtype)
        scale = ((torch.rand(1, generator=g) * 0.2 + 0.3) if int4 else (torch.rand(1, generator=g) * 0.02 + 0.01))
        offset = torch.randint(-3, 4, (1,), generator=g, dtype=torch.int8)
        got = torch_npu.npu_rms_norm_quant(x.npu(), gamma.npu(), beta.npu(), scale.to(dtype).npu(), offset.npu(),
                                           1e-6, dst_dtype=dst_dtype)
        expected = ref.rms_norm_quant(x, gamma, beta, scale.to(dtype), offset, 1e-6, dst_dtype or torch.int8)
        assert got.shape == ((2, 5, 8) if int4 else (2, 5, 64))
        assert_quantized_close(got, expected, int4="int32" if int4 else None)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("div_mode", [True, False])
def test_add_rms_norm_quant(dtype, div_mode):
    g = torch.Generator().manual_seed(61)
    x1, x2 = torch.randn(4, 3, 32, generator=g).to(dtype), torch.randn(4, 3, 32, generator=g).to(dtype)
    gamma, beta = torch.randn(32, generator=g).to(dtype), torch.randn(32, generator=g).to(dtype)
    if div_mode:
        scales1, scales2 = torch.rand(32, generator=g) * 0.04 + 0.02, torch.rand(32, generator=g) * 0.04 + 0.02
    else:
        scales1, scales2 = torch.rand(32, generator=g) * 30 + 5, torch.rand(32, generator=g) * 30 + 5
    zero_points1 = torch.randint(-4, 4, (32,), generator=g, dtype=torch.int32)
    zero_points2 = torch.randint(-4, 4, (32,), generator=g, dtype=torch.int32)
    got = torch_npu.npu_add_rms_norm_quant(x1.npu(), x2.npu(), gamma.npu(), scales1.npu(), zero_points1.npu(),
                                           beta.npu(), scales2.npu(), zero_points2.npu(), div_mode=div_mode)
    expected = ref.add_rms_norm_quant(x1, x2, gamma, scales1, zero_points1, beta, scales2, zero_points2, 1e-6,
                                      div_mode)
    assert_quantized_close(got[0], expected[0])
    assert_quantized_close(got[1], expected[1])
    assert got[2].dtype == dtype and torch.equal(got[2].cpu(), expected[2])
    # Without the optional inputs: no beta, no zero points, y2 is zeros.
    got = torch_npu.npu_add_rms_norm_quant(x1.npu(), x2.npu(), gamma.npu(), scales1.npu(), None, div_mode=div_mode)
    expected = ref.add_rms_norm_quant(x1, x2, gamma, scales1, div_mode=div_mode)
    assert_quantized_close(got[0], expected[0])
    assert torch.equal(got[1].cpu(), torch.zeros_like(expected[1]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("y_dtype", [None, torch.quint4x2])
@pytest.mark.parametrize("variant", ["plain", "one_smooth", "two_smooth", "mask_second", "mask_both"])
def test_add_rms_norm_dynamic_quant(dtype, y_dtype, variant):
    g = torch.Generator().manual_seed(62)
    x1, x2 = torch.randn(3, 4, 32, generator=g).to(dtype), torch.randn(3, 4, 32, generator=g).to(dtype)
    gamma, beta = torch.randn(32, generator=g).to(dtype), torch.randn(32, generator=g).to(dtype)
    smooth1 = (torch.rand(32, generator=g) + 0.5).to(dtype) if variant in ("one_smooth", "two_smooth") else None
    smooth2 = (torch.rand(32, generator=g) + 0.5).to(dtype) if variant in ("two_smooth", "mask_second") else None
    mask = {"mask_second": [False, True], "mask_both": [True, True]}.get(variant)
    got = torch_npu.npu_add_rms_norm_dynamic_quant(
        x1.npu(), x2.npu(), gamma.npu(), smooth_scale1=smooth1.npu() if smooth1 is not None else None,
        smooth_scale2=smooth2.npu() if smooth2 is not None else None, beta=beta.npu(), output_mask=mask,
        y_dtype=y_dtype)
    expected = ref.add_rms_norm_dynamic_quant(x1, x2, gamma, smooth1, smooth2, beta, 1e-6, mask,
                                              y_dtype or torch.int8)
    int4 = "int32" if y_dtype == torch.quint4x2 else None
    for i in (0, 1):  # y1, y2 (0-d when their branch is off)
        assert_quantized_close(got[i], expected[i], int4=int4)
        assert got[i + 3].shape == expected[i + 3].shape
        if expected[i + 3].dim():
            torch.testing.assert_close(got[i + 3].cpu(), expected[i + 3], rtol=1e-6, atol=0)
    assert torch.equal(got[2].cpu(), expected[2])


def test_rms_norm_quant_family_meta_device_ops_and_errors():
    meta = torch.empty(2, 16, dtype=torch.float16, device="meta")
    one, vec = torch.empty(1, dtype=torch.float16, device="meta"), torch.empty(16, dtype=torch.float16, device="meta")
    y = torch.ops.npu.npu_rms_norm_quant(meta, vec, vec, one, torch.empty(1, dtype=torch.int8, device="meta"),
                                         dst_dtype=torch.quint4x2)
    assert y.shape == (2, 2) and y.dtype == torch.int32
    y1, y2, x = torch.ops.npu.npu_add_rms_norm_quant(meta, meta, vec, torch.empty(16, device="meta"), None)
    assert y1.dtype == y2.dtype == torch.int8 and y1.shape == (2, 16) and x.dtype == torch.float16
    outs = torch.ops.npu.npu_add_rms_norm_dynamic_quant(meta, meta, vec, output_mask=[False, True])
    assert [tuple(t.shape) for t in outs] == [(), (2, 16), (2, 16), (), (2,)]

    x, gamma = torch.randn(2, 16).half().npu(), torch.ones(16).half().npu()
    before = [device_op_count(n) for n in ("aclnnRmsNormQuant", "aclnnAddRmsNormQuantV2",
                                            "aclnnAddRmsNormDynamicQuantV2")]
    torch_npu.npu_rms_norm_quant(x, gamma, gamma, torch.ones(1).half().npu(), torch.zeros(1, dtype=torch.int8).npu())
    torch_npu.npu_add_rms_norm_quant(x, x, gamma, torch.ones(16).npu(), None)
    torch_npu.npu_add_rms_norm_dynamic_quant(x, x, gamma)
    after = [device_op_count(n) for n in ("aclnnRmsNormQuant", "aclnnAddRmsNormQuantV2",
                                           "aclnnAddRmsNormDynamicQuantV2")]
    assert after == [b + 1 for b in before]

    with pytest.raises(ValueError, match="dst_dtype selects float4_e2m1"):  # hifloat8 / float8: test_hifloat8.py
        torch_npu.npu_rms_norm_quant(x, gamma, gamma, torch.ones(1).half().npu(),
                                     torch.zeros(1, dtype=torch.int8).npu(), dst_dtype=256 + 40)
    with pytest.raises(RuntimeError, match="scale and offset must hold one value each"):
        torch_npu.npu_rms_norm_quant(x, gamma, gamma, torch.ones(2).half().npu(),
                                     torch.zeros(2, dtype=torch.int8).npu())
    with pytest.raises(ValueError, match="axis must be -1"):
        torch_npu.npu_add_rms_norm_quant(x, x, gamma, torch.ones(16).npu(), None, axis=0)
    with pytest.raises(ValueError, match="x1 and x2 must have one shape"):
        torch_npu.npu_add_rms_norm_quant(x, x[:1], gamma, torch.ones(16).npu(), None)
    with pytest.raises(ValueError, match="at least one of y1 and y2"):
        torch_npu.npu_add_rms_norm_dynamic_quant(x, x, gamma, output_mask=[False, False])
    with pytest.raises(ValueError, match="need their output"):
        torch_npu.npu_add_rms_norm_dynamic_quant(x, x, gamma, smooth_scale1=gamma, output_mask=[False, True])
    with pytest.raises(ValueError, match="y_dtype selects float8_e5m2"):
        torch_npu.npu_add_rms_norm_dynamic_quant(x, x, gamma, y_dtype=torch.float8_e5m2)
    with pytest.raises(RuntimeError, match="gamma's shape"):
        torch_npu.npu_add_rms_norm_dynamic_quant(x, x, torch.ones(8).half().npu())


# --- npu_group_quant ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dst_dtype", [None, torch.int8, torch.qint8, torch.quint4x2])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_group_quant(dtype, dst_dtype, index_dtype):
    g = torch.Generator().manual_seed(70)
    x = (torch.rand(16, 128, generator=g) * 2 - 1).to(dtype)
    scale = (torch.rand(5, 128, generator=g) * (8 if dst_dtype == torch.quint4x2 else 200) - 4).to(dtype)
    offset = torch.rand(1, generator=g).to(dtype)
    groups = torch.tensor([0, 3, 3, 11, 16], dtype=index_dtype)  # the first and third groups are empty
    for off in (offset, None):
        got = torch_npu.npu_group_quant(x.npu(), scale.npu(), groups.npu(),
                                        offset=off.npu() if off is not None else None, dst_dtype=dst_dtype)
        expected = ref.group_quant(x, scale, groups, off, torch.quint4x2 if dst_dtype == torch.quint4x2
                                   else torch.int8)
        assert_quantized_close(got, expected, int4="int32" if dst_dtype == torch.quint4x2 else None)


def test_group_quant_meta_device_op_and_errors():
    meta = torch.ops.npu.npu_group_quant(torch.empty(6, 16, device="meta"), torch.empty(2, 16, device="meta"),
                                         torch.empty(2, dtype=torch.int32, device="meta"), dst_dtype=torch.quint4x2)
    assert meta.shape == (6, 2) and meta.dtype == torch.int32
    x, s = torch.randn(6, 16).npu(), torch.rand(2, 16).npu()
    groups = torch.tensor([2, 6], dtype=torch.int32).npu()
    before = device_op_count("aclnnGroupQuant")
    torch_npu.npu_group_quant(x, s, groups)
    assert device_op_count("aclnnGroupQuant") == before + 1
    with pytest.raises(ValueError, match="dst_dtype selects float8_e4m3fn"):
        torch_npu.npu_group_quant(x, s, groups, dst_dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="dst_dtype must be torch.int8 or torch.quint4x2"):
        torch_npu.npu_group_quant(x, s, groups, dst_dtype=torch.uint8)
    with pytest.raises(ValueError, match="2-d"):
        torch_npu.npu_group_quant(x.reshape(2, 3, 16), s, groups)
    with pytest.raises(RuntimeError, match="groupIndex must be \\[2\\]"):
        torch_npu.npu_group_quant(x, s, torch.tensor([6], dtype=torch.int32).npu())
    with pytest.raises(RuntimeError, match="last value must be"):  # found when the kernel runs
        torch_npu.npu_group_quant(x, s, torch.tensor([2, 5], dtype=torch.int32).npu()).cpu()


# --- npu_quant_scatter / npu_quant_scatter_ ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_quant_scatter(dtype):
    g = torch.Generator().manual_seed(80)
    self = torch.randint(-100, 100, (4, 6, 32), generator=g, dtype=torch.int8)
    updates = (torch.randn(3, 2, 32, generator=g) * 3).to(dtype)
    scales = (torch.rand(32, generator=g) * 0.05 + 0.02).to(dtype)
    zero_points = torch.randint(-5, 5, (32,), generator=g, dtype=torch.int32)
    indices_1d = torch.tensor([0, 4, 2], dtype=torch.int32)  # row i, from offset indices[i] along axis -2
    indices_2d = torch.tensor([[3, 1], [0, 0], [2, 4]], dtype=torch.int64)  # (row, offset) pairs
    for indices in (indices_1d, indices_2d):
        for zp in (zero_points, zero_points.to(dtype), None):
            got = torch_npu.npu_quant_scatter(self.npu(), indices.npu(), updates.npu(), scales.npu(),
                                              zp.npu() if zp is not None else None, -2, -1, "update")
            assert torch.equal(got.cpu(), ref.quant_scatter(self, indices, updates, scales, zp, -2))
    # A 4-d tensor, scattered along dimension 2; the in-place form updates self and returns it.
    cache = torch.randint(-100, 100, (2, 3, 5, 16), generator=g, dtype=torch.int8)
    updates4 = torch.randn(2, 3, 2, 16, generator=g).to(dtype)
    scales4 = (torch.rand(1, 1, 16, generator=g) * 0.05 + 0.02).to(dtype)
    indices4 = torch.tensor([3, 1], dtype=torch.int32)
    expected = ref.quant_scatter(cache, indices4, updates4, scales4, None, 2)
    target = cache.npu()
    returned = torch_npu.npu_quant_scatter_(target, indices4.npu(), updates4.npu(), scales4.npu(), axis=2)
    assert returned.data_ptr() == target.data_ptr() and torch.equal(target.cpu(), expected)


def test_quant_scatter_leaves_input_meta_device_op_and_errors():
    self = torch.zeros(2, 4, 16, dtype=torch.int8).npu()
    updates, scales = torch.ones(2, 1, 16).half().npu(), torch.full((16,), 0.5).half().npu()
    indices = torch.tensor([1, 3], dtype=torch.int32).npu()
    before = device_op_count("aclnnInplaceQuantScatterV2")
    out = torch_npu.npu_quant_scatter(self, indices, updates, scales)
    assert device_op_count("aclnnInplaceQuantScatterV2") == before + 1
    assert torch.count_nonzero(self.cpu()) == 0 and torch.count_nonzero(out.cpu()) == 32
    meta = torch.ops.npu.npu_quant_scatter(self.to("meta"), indices.to("meta"), updates.to("meta"),
                                           scales.to("meta"))
    assert meta.shape == (2, 4, 16) and meta.dtype == torch.int8

    with pytest.raises(ValueError, match="reduce must be 'update'"):
        torch_npu.npu_quant_scatter(self, indices, updates, scales, reduce="add")
    with pytest.raises(ValueError, match="round_mode must be 'rint'"):
        torch_npu.npu_quant_scatter(self, indices, updates, scales, round_mode="round")
    with pytest.raises(ValueError, match="dst_type selects float8_e5m2"):
        torch_npu.npu_quant_scatter(self, indices, updates, scales, dst_type=torch.float8_e5m2)
    with pytest.raises(TypeError, match="self must be int8"):
        torch_npu.npu_quant_scatter(self.int(), indices, updates, scales)
    with pytest.raises(RuntimeError, match="neither the first nor the last"):
        torch_npu.npu_quant_scatter(self, indices, updates, scales, axis=-1)
    with pytest.raises(RuntimeError, match="quantScales must be"):
        torch_npu.npu_quant_scatter(self, indices, updates, scales[:8])
    with pytest.raises(RuntimeError, match="falls outside selfRef"):  # found when the kernel runs
        torch_npu.npu_quant_scatter(self, torch.tensor([1, 4], dtype=torch.int32).npu(), updates, scales).cpu()


# --- npu_dynamic_block_quant -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, blocks", [((4, 300), (1, 128)), ((2, 5, 130), (2, 64)), ((7, 64), (4, 16))])
def test_dynamic_block_quant(dtype, shape, blocks):
    g = torch.Generator().manual_seed(90)
    x = ((torch.rand(shape, generator=g) * 4 - 2) * torch.rand(shape[:-1] + (1,), generator=g) * 10).to(dtype)
    for min_scale in (0.0, 100.0):
        y, scale = torch_npu.npu_dynamic_block_quant(x.npu(), min_scale=min_scale, row_block_size=blocks[0],
                                                     col_block_size=blocks[1])
        expected_y, expected_scale = ref.dynamic_block_quant(x, min_scale, *blocks)
        assert y.shape == x.shape and scale.shape == expected_scale.shape
        assert_quantized_close(y, expected_y)
        torch.testing.assert_close(scale.cpu(), expected_scale, rtol=1e-6, atol=0)


def test_dynamic_block_quant_zero_block_meta_device_op_and_errors():
    x = torch.randn(2, 256)
    x[1, 128:] = 0
    y, scale = torch_npu.npu_dynamic_block_quant(x.npu())
    assert torch.equal(y.cpu()[1, 128:], torch.zeros(128, dtype=torch.int8)) and scale[1, 1].item() == 0
    y, scale = torch.ops.npu.npu_dynamic_block_quant(torch.empty(3, 5, 200, device="meta"), row_block_size=2)
    assert y.shape == (3, 5, 200) and y.dtype == torch.int8 and scale.shape == (3, 3, 2)
    before = device_op_count("aclnnDynamicBlockQuantV2")
    torch_npu.npu_dynamic_block_quant(x.half().npu())
    assert device_op_count("aclnnDynamicBlockQuantV2") == before + 1
    with pytest.raises(ValueError, match="dst_type selects float8_e5m2"):
        torch_npu.npu_dynamic_block_quant(x.npu(), dst_type=256 + 35)
    with pytest.raises(ValueError, match="dst_type must be 1"):
        torch_npu.npu_dynamic_block_quant(x.npu(), dst_type=3)
    with pytest.raises(ValueError, match="round_mode must be 'rint'"):
        torch_npu.npu_dynamic_block_quant(x.npu(), round_mode="round")
    with pytest.raises(ValueError, match="dst_type_max sets a hifloat8"):
        torch_npu.npu_dynamic_block_quant(x.npu(), dst_type_max=15.0)
    with pytest.raises(ValueError, match="2-d"):
        torch_npu.npu_dynamic_block_quant(torch.randn(8).npu())
