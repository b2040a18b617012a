"""torch_npu.hifloat8 (codes held in uint8 tensors) against en_dtypes, the reference implementation upstream's tests
use: npu_dtype_cast to and from hifloat8 for every code and for values at and beside every rounding boundary, on npu
and meta; and the float8 / hifloat8 targets of npu_quant_max, npu_rms_norm_quant(_v2) and npu_add_rms_norm_quant
against CPU references."""

import en_dtypes
import numpy as np
import pytest
import torch

import torch_npu
from op_refs import quant_more as ref

HIF8 = en_dtypes.hifloat8
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def hif8_codes(values):
    """The reference codes (uint8) of a CPU float tensor."""
    return torch.from_numpy(values.float().numpy().astype(HIF8).view(np.uint8).copy())


def hif8_values(codes):
    """The reference float32 values of uint8 codes."""
    return torch.from_numpy(codes.numpy().view(HIF8).astype(np.float32))


def boundary_values():
    """Every finite magnitude, the midpoints between neighbours (ties), the floats just either side of them, the
    overflow boundary, zeros, infinities and NaN, with both signs."""
    magnitudes = hif8_values(torch.arange(128, dtype=torch.uint8))
    finite = torch.unique(magnitudes[torch.isfinite(magnitudes)])
    mids = (finite[1:] + finite[:-1]) / 2
    edge = torch.tensor([finite.max() * 1.25, float("inf"), float("nan"), 1e30, 1e-30])
    pos = torch.cat([finite, mids, torch.nextafter(mids, torch.zeros(())), torch.nextafter(mids, torch.tensor(1e38)),
                     edge])
    return torch.cat([pos, -pos])


def test_decode_every_code():
    codes = torch.arange(256, dtype=torch.uint8)
    got = torch_npu.npu_dtype_cast(codes.npu(), torch.float32, torch_npu.hifloat8)
    assert got.dtype == torch.float32 and got.device.type == "npu"
    torch.testing.assert_close(got.cpu(), hif8_values(codes), equal_nan=True, rtol=0, atol=0)


def test_encode_rounding_boundaries_ties_and_overflow():
    values = boundary_values()
    got = torch_npu.npu_dtype_cast(values.npu(), torch_npu.hifloat8)
    assert got.dtype == torch.uint8 and got.shape == values.shape
    assert torch.equal(got.cpu(), hif8_codes(values))


@pytest.mark.parametrize("dtype", FLOATS)
def test_encode_random_values_of_every_float_dtype(dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(6, 333, generator=g) * torch.logspace(-8, 5, 333)).to(dtype)
    got = torch_npu.npu_dtype_cast(x.npu(), torch_npu.hifloat8)
    assert torch.equal(got.cpu(), hif8_codes(x))


@pytest.mark.parametrize("dtype", FLOATS)
def test_round_trip_and_decode_to_other_dtypes(dtype):
    x = torch.linspace(-300, 300, 1001)
    codes = torch_npu.npu_dtype_cast(x.npu(), torch_npu.hifloat8)
    back = torch_npu.npu_dtype_cast(codes, dtype, torch_npu.hifloat8)
    assert back.dtype == dtype
    assert torch.equal(back.cpu(), hif8_values(hif8_codes(x)).to(dtype))
    # The codes of decoded values are the codes themselves.
    assert torch.equal(torch_npu.npu_dtype_cast(back, torch_npu.hifloat8).cpu(), codes.cpu())


def test_meta_and_errors():
    got = torch.ops.npu.npu_dtype_cast(torch.empty(3, 4, device="meta"), torch_npu.hifloat8)
    assert got.shape == (3, 4) and got.dtype == torch.uint8
    got = torch.ops.npu.npu_dtype_cast(torch.empty(5, dtype=torch.uint8, device="meta"), torch.float16,
                                       torch_npu.hifloat8)
    assert got.shape == (5,) and got.dtype == torch.float16
    with pytest.raises(TypeError, match="hifloat8 takes a floating tensor"):
        torch_npu.npu_dtype_cast(torch.arange(4).npu(), torch_npu.hifloat8)
    with pytest.raises(TypeError, match="reads hifloat8 codes from a uint8 tensor"):
        torch_npu.npu_dtype_cast(torch.ones(4).npu(), torch.float32, torch_npu.hifloat8)


def test_encoded_tensor_has_no_gradient():
    x = torch.randn(4, requires_grad=True)
    codes = torch_npu.npu_dtype_cast(x.npu(), torch_npu.hifloat8)
    assert not codes.requires_grad


# --- npu_quant_max's float targets ------------------------------------------------------------------------------

TARGETS = {
    "float8_e5m2": (torch_npu.float8_e5m2, "rint", torch.float8_e5m2, lambda v: v.to(torch.float8_e5m2)),
    "float8_e4m3fn": (torch_npu.float8_e4m3fn, "rint", torch.float8_e4m3fn, lambda v: v.to(torch.float8_e4m3fn)),
    "hifloat8": (torch_npu.hifloat8, "round", torch.uint8, hif8_codes),
}


def as_bits(t):
    return t.cpu().view(torch.uint8)


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("dtype", FLOATS)
def test_quant_max_float_targets(target, dtype):
    code, mode, y_dtype, convert = TARGETS[target]
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(4, 16, 32, generator=g) * 20).to(dtype)
    scale = torch.tensor([0.75])
    expected, expected_amax = ref.quant_max(x, scale, convert=convert)
    y, amax = torch_npu.npu_quant_max(x.npu(), scale.npu(), round_mode=mode, dst_dtype=code)
    assert y.dtype == y_dtype and y.shape == x.shape
    assert torch.equal(as_bits(y), as_bits(expected))
    assert amax.dtype == dtype and torch.equal(amax.cpu(), expected_amax)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_quant_max_grouped_float_targets(target):
    code, mode, y_dtype, convert = TARGETS[target]
    g = torch.Generator().manual_seed(6)
    x = torch.randn(8, 64, generator=g, dtype=torch.float16) * 4
    group_list = torch.tensor([2, 2, 5, 8])  # one empty group
    scale = torch.tensor([0.5, 1.0, 2.0, 4.0])
    expected, expected_amax = ref.quant_max(x, scale, group_list=group_list, convert=convert)
    y, amax = torch_npu.npu_quant_max(x.npu(), scale.npu(), round_mode=mode, dst_dtype=code,
                                      group_list=group_list.npu())
    assert y.dtype == y_dtype and torch.equal(as_bits(y), as_bits(expected))
    assert torch.equal(amax.cpu(), expected_amax)


def test_quant_max_default_target_is_float8_e5m2_and_meta():
    x = torch.randn(3, 8)
    y, _ = torch_npu.npu_quant_max(x.npu(), torch.tensor([1.0]).npu())
    assert y.dtype == torch.float8_e5m2 and torch.equal(as_bits(y), as_bits(x.to(torch.float8_e5m2)))
    y, amax = torch.ops.npu.npu_quant_max(x.to("meta"), torch.empty(1, device="meta"), round_mode="round",
                                          dst_dtype=torch_npu.hifloat8)
    assert y.dtype == torch.uint8 and y.shape == (3, 8) and amax.shape == (1,)


# --- npu_rms_norm_quant_v2's float targets ----------------------------------------------------------------------

@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("div_mode", [True, False])
def test_rms_norm_quant_v2_float_targets(target, div_mode):
    code, _, y_dtype, convert = TARGETS[target]
    g = torch.Generator().manual_seed(7)
    x = torch.randn(3, 4, 32, generator=g, dtype=torch.float16)
    gamma = torch.randn(32, generator=g, dtype=torch.float16)
    scale = torch.rand(32, generator=g, dtype=torch.float16) * 0.8 + 0.2
    offset = torch.tensor([2.0], dtype=torch.float16)
    beta = torch.randn(32, generator=g, dtype=torch.float16)
    _, rstd_ref = ref.rms_norm_quant_v2(x, gamma, scale, offset, beta, 1e-6, div_mode)
    # The unrounded quantiser input, converted by the target.
    xf = x.float()
    v = xf * rstd_ref * gamma.float() + beta.float()
    v = (v / scale.float() if div_mode else v * scale.float()) + offset.float()
    y, rstd = torch_npu.npu_rms_norm_quant_v2(x.npu().requires_grad_(), gamma.npu(), scale.npu(), offset=offset.npu(),
                                              beta=beta.npu(), div_mode=div_mode, dst_dtype=code)
    assert y.dtype == y_dtype and y.shape == x.shape
    got = as_bits(y)
    expected = as_bits(convert(v))
    # float32 reassociation may move a value across a rounding boundary: allow one code of a few elements.
    mismatch = (got != expected).float().mean().item()
    assert mismatch <= 0.01, mismatch
    torch.testing.assert_close(rstd.detach().cpu(), rstd_ref, rtol=1e-5, atol=1e-6)


# --- npu_rms_norm_quant / npu_add_rms_norm_quant's float targets ------------------------------------------------

MAXIMA = {"float8_e5m2": 57344.0, "float8_e4m3fn": 448.0, "hifloat8": 32768.0}


def rms_norm_values(x, gamma, beta, eps=1e-6):
    xf = x.float()
    rstd = torch.reciprocal(torch.sqrt((xf * xf).mean(-1, keepdim=True) + eps))
    v = xf * rstd * gamma.float()
    return v + beta.float() if beta is not None else v


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_rms_norm_quant_float_targets_saturate(target):
    code, _, y_dtype, convert = TARGETS[target]
    g = torch.Generator().manual_seed(8)
    x = torch.randn(4, 32, generator=g, dtype=torch.float16)
    gamma = torch.randn(32, generator=g, dtype=torch.float16)
    beta = torch.randn(32, generator=g, dtype=torch.float16)
    scale = torch.tensor([0.002], dtype=torch.float16)  # pushes the largest values past float8_e4m3fn's range
    offset = torch.tensor([3], dtype=torch.int8)
    y = torch_npu.npu_rms_norm_quant(x.npu(), gamma.npu(), beta.npu(), scale.npu(), offset.npu(), dst_dtype=code)
    assert y.dtype == y_dtype and y.shape == x.shape
    top = MAXIMA[target]
    v = (rms_norm_values(x, gamma, beta) / scale.float() + 3.0).clamp(-top, top)
    mismatch = (as_bits(y) != as_bits(convert(v))).float().mean().item()
    assert mismatch <= 0.01, mismatch
    if target == "float8_e4m3fn":
        assert (y.cpu().float().abs() == 448).any()  # saturated, not NaN
    if target != "hifloat8":  # (hifloat8's codes are uint8)
        assert not y.cpu().float().isnan().any()


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_add_rms_norm_quant_float_targets(target):
    code, _, y_dtype, convert = TARGETS[target]
    g = torch.Generator().manual_seed(9)
    x1 = torch.randn(3, 64, generator=g, dtype=torch.bfloat16)
    x2 = torch.randn(3, 64, generator=g, dtype=torch.bfloat16)
    gamma = torch.randn(64, generator=g, dtype=torch.bfloat16)
    s1 = torch.rand(64, generator=g, dtype=torch.bfloat16) + 0.1
    s2 = torch.rand(64, generator=g, dtype=torch.bfloat16) + 0.1
    y1, y2, x = torch_npu.npu_add_rms_norm_quant(x1.npu(), x2.npu(), gamma.npu(), s1.npu(), None, scales2=s2.npu(),
                                                 dst_type=code)
    assert y1.dtype == y_dtype and y2.dtype == y_dtype
    total = (x1.float() + x2.float()).to(torch.bfloat16)
    assert torch.equal(x.cpu(), total)
    v = rms_norm_values(total, gamma, None)
    for y, s in ((y1, s1), (y2, s2)):
        expected = convert((v / s.float()).clamp(-MAXIMA[target], MAXIMA[target]))
        assert (as_bits(y) != as_bits(expected)).float().mean().item() <= 0.01
    y1, _, _ = torch.ops.npu.npu_add_rms_norm_quant(x1.to("meta"), x2.to("meta"), gamma.to("meta"), s1.to("meta"),
                                                    None, dst_type=code)
    assert y1.dtype == y_dtype


# --- npu_grouped_dynamic_block_quant's float targets ------------------------------------------------------------

@pytest.mark.parametrize("target", sorted(TARGETS))
def test_grouped_dynamic_block_quant_float_targets(target):
    code, mode, y_dtype, convert = TARGETS[target]
    g = torch.Generator().manual_seed(10)
    x = torch.randn(2, 10, 200, generator=g, dtype=torch.bfloat16) * 5
    x[:, 3:5] = 0  # zero blocks give zeros, not NaN
    groups = torch.tensor([5, 10], dtype=torch.int32)
    top = {"float8_e5m2": 57344.0, "float8_e4m3fn": 448.0, "hifloat8": 32768.0}[target]
    expected, expected_scale = ref.grouped_dynamic_block_quant(x, groups, 0.0, 2, 128, target_max=top,
                                                               convert=convert)
    y, scale = torch_npu.npu_grouped_dynamic_block_quant(x.npu(), groups.npu(), round_mode=mode, dst_type=code,
                                                         row_block_size=2)
    assert y.dtype == y_dtype and y.shape == x.shape
    torch.testing.assert_close(scale.cpu(), expected_scale, rtol=1e-6, atol=0)
    assert (as_bits(y) != as_bits(expected)).float().mean().item() <= 0.01
    assert (as_bits(y)[:, 3:5] == 0).all()


def test_grouped_dynamic_block_quant_hifloat8_range():
    x = torch.randn(4, 128) * 3
    groups = torch.tensor([4], dtype=torch.int32)
    y, scale = torch_npu.npu_grouped_dynamic_block_quant(x.npu(), groups.npu(), round_mode="round",
                                                         dst_type=torch_npu.hifloat8, dst_type_max=15.0)
    expected, expected_scale = ref.grouped_dynamic_block_quant(x, groups, target_max=15.0, convert=hif8_codes)
    torch.testing.assert_close(scale.cpu(), expected_scale, rtol=1e-6, atol=0)
    assert (y.cpu() != expected).float().mean().item() <= 0.01


# --- npu_dequant_swiglu_quant's float8 targets ------------------------------------------------------------------

@pytest.mark.parametrize("target", ["float8_e5m2", "float8_e4m3fn"])
@pytest.mark.parametrize("quant_mode", [0, 1])
def test_dequant_swiglu_quant_float8_targets(target, quant_mode):
    from op_refs import quantize as qref
    code, _, y_dtype, convert = TARGETS[target]
    g = torch.Generator().manual_seed(11)
    x = torch.randint(-10, 10, (12, 64), generator=g, dtype=torch.int32)
    weight_scale = torch.randn(64, generator=g)
    bias = torch.randn(64, generator=g)
    quant_scale = torch.rand(32, generator=g) * 0.1 + 0.01
    top = MAXIMA[target]
    y, scale = torch_npu.npu_dequant_swiglu_quant(x.npu(), weight_scale=weight_scale.npu(), bias=bias.npu(),
                                                  quant_scale=quant_scale.npu(), quant_mode=quant_mode, dst_type=code)
    expected, expected_scale = qref.dequant_swiglu_quant(x, weight_scale, None, bias, quant_scale, None, None,
                                                         quant_mode=quant_mode, target_max=top, convert=convert)
    assert y.dtype == y_dtype and y.shape == (12, 32)
    assert (as_bits(y) != as_bits(expected)).float().mean().item() <= 0.01
    torch.testing.assert_close(scale.cpu(), expected_scale, rtol=1e-6, atol=0)
