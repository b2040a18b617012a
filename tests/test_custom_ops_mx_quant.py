"""MX (microscaling) quantisation against CPU references built on ml_dtypes / en_dtypes (op_refs/mx_quant.py):
npu_dynamic_mx_quant, npu_grouped_dynamic_mx_quant, npu_dynamic_block_mx_quant and npu_anti_mx_quant over every
element format (float8 e4m3fn / e5m2, float4 e2m1 / e1m2), round mode and block-scale algorithm; Meta shapes,
device-op counters and errors."""

import numpy as np
import pytest
import torch

import torch_npu
from op_refs import mx_quant as ref

FORMATS = sorted(ref.FORMATS)
HALVES = [torch.bfloat16, torch.float16, torch.float32]


def device_op_count(name):
    torch.npu.synchronize()
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def wide_values(shape, seed, dtype=torch.float32):
    """Normal values spread over many binades, a few exact zeros, in dtype."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-12, 12, shape, generator=g).float())
    x[..., :3] = 0
    return x.to(dtype)


def code(name):
    return ref.FORMATS[name][3]


def check_mx(y, scales, x, name, **kw):
    expected_codes, expected_scales = ref.dynamic_mx_quant(x, name, **kw)
    assert torch.equal(ref.element_codes(y, name), expected_codes)
    assert scales.dtype == torch.uint8 and torch.equal(scales.cpu(), expected_scales)


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("dtype", HALVES)
def test_dynamic_mx_quant_last_axis(name, dtype):
    x = wide_values((4, 96), seed=1, dtype=dtype)  # three blocks: the second scale pair is padded
    before = device_op_count("aclnnDynamicMxQuantV2")
    y, scales = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=code(name))
    assert device_op_count("aclnnDynamicMxQuantV2") == before + 1
    assert scales.shape == (4, 2, 2)
    if name.startswith("float8"):
        assert y.dtype == getattr(torch, name) and y.shape == x.shape
    else:
        assert y.dtype == torch.uint8 and y.shape == (4, 48)
    check_mx(y, scales, x, name)
    assert (scales.cpu()[:, 1, 1] == 0).all()  # the pad


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float4_e2m1"])
@pytest.mark.parametrize("axis", [0, 1, -3])
def test_dynamic_mx_quant_other_axes_and_block_sizes(name, axis):
    x = wide_values((70, 6, 8), seed=2, dtype=torch.bfloat16)
    y, scales = torch_npu.npu_dynamic_mx_quant(x.npu(), axis=axis, dst_type=code(name), block_size=64)
    check_mx(y, scales, x, name, axis=axis, block=64)


@pytest.mark.parametrize("mode", ["rint", "round", "floor"])
@pytest.mark.parametrize("name", FORMATS)
def test_dynamic_mx_quant_round_modes(mode, name):
    x = wide_values((3, 64), seed=3)
    y, scales = torch_npu.npu_dynamic_mx_quant(x.npu(), round_mode=mode, dst_type=code(name))
    check_mx(y, scales, x, name, mode=mode)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("dst_type_max", [0.0, 224.0])
def test_dynamic_mx_quant_scale_alg_1(name, dst_type_max):
    x = wide_values((5, 64), seed=4, dtype=torch.float16)
    y, scales = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=code(name), scale_alg=1, dst_type_max=dst_type_max)
    check_mx(y, scales, x, name, scale_alg=1, dst_type_max=dst_type_max)


@pytest.mark.parametrize("dst_type_max", [0.0, 6.0, 7.0])
def test_dynamic_mx_quant_scale_alg_2(dst_type_max):
    x = wide_values((5, 64), seed=5, dtype=torch.bfloat16)
    y, scales = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=torch_npu.float4_e2m1fn_x2, scale_alg=2,
                                               dst_type_max=dst_type_max)
    check_mx(y, scales, x, "float4_e2m1", scale_alg=2, dst_type_max=dst_type_max)


def test_dynamic_mx_quant_zero_and_nan_blocks():
    x = torch.zeros(2, 64)
    x[1, 40] = float("nan")
    y, scales = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=torch_npu.float8_e4m3fn)
    s = scales.cpu()
    assert s[0].tolist() == [[0, 0]] and s[1, 0, 0] == 0 and s[1, 0, 1] == 255
    assert (y.cpu()[0].float() == 0).all()


def test_dynamic_mx_quant_torch_dtypes_meta_and_errors():
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    y, scales = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=torch.float8_e5m2)
    assert y.dtype == torch.float8_e5m2
    y, scales = torch.ops.npu.npu_dynamic_mx_quant(x.to("meta"), axis=0, block_size=32)
    assert y.shape == (4, 32) and y.dtype == torch.uint8 and scales.shape == (1, 64, 2)
    with pytest.raises(ValueError, match="dst_type must be torch_npu.float8_e5m2"):
        torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=torch.int8)
    with pytest.raises(ValueError, match="block_size must be a multiple of 32"):
        torch_npu.npu_dynamic_mx_quant(x.npu(), block_size=48)
    with pytest.raises(ValueError, match="scale_alg 1 is for float8"):
        torch_npu.npu_dynamic_mx_quant(x.npu(), scale_alg=1)
    with pytest.raises(ValueError, match="scale_alg 2 is for float4_e2m1"):
        torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=torch_npu.float8_e4m3fn, scale_alg=2)
    with pytest.raises(ValueError, match="last dimension must be even"):
        torch_npu.npu_dynamic_mx_quant(torch.randn(2, 33).npu())
    with pytest.raises(ValueError, match="max_low_bound is not provided"):
        torch_npu.npu_dynamic_mx_quant(x.npu(), max_low_bound=1.0)
    with pytest.raises(TypeError, match="float16, bfloat16 or float32"):
        torch_npu.npu_dynamic_mx_quant(torch.ones(2, 64, dtype=torch.int32).npu())


# --- npu_anti_mx_quant ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("dst", [torch.bfloat16, torch.float16, torch.float32])
def test_anti_mx_quant_dequantises_blocks(name, dst):
    x = wide_values((3, 96), seed=6)
    y, scales = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=code(name))
    before = device_op_count("aclnnAntiMxQuant")
    out = torch_npu.npu_anti_mx_quant(y, scales, dst_type=dst, src_type=code(name))
    assert device_op_count("aclnnAntiMxQuant") == before + 1
    assert out.dtype == dst and out.shape == x.shape
    expected = ref.anti_mx_quant(ref.element_codes(y, name), scales.cpu(), name)
    assert torch.equal(out.cpu(), expected.to(dst))
    # Quantisation then dequantisation is close to x, within the format's precision per block.
    rel = {"float8_e4m3fn": 2 ** -3, "float8_e5m2": 2 ** -2, "float4_e2m1": 0.5, "float4_e1m2": 0.5}[name]
    blocks = x.reshape(3, 3, 32).abs().amax(-1, keepdim=True).expand(3, 3, 32).reshape(3, 96)
    assert ((out.float().cpu() - x).abs() <= blocks * rel + 1e-30).all()


def test_anti_mx_quant_axis_torch_packed_dtypes_meta_and_errors():
    x = wide_values((64, 6), seed=7)
    y, scales = torch_npu.npu_dynamic_mx_quant(x.npu(), axis=0, dst_type=torch_npu.float4_e2m1fn_x2)
    out = torch_npu.npu_anti_mx_quant(y.view(torch.float4_e2m1fn_x2), scales.view(torch.float8_e8m0fnu), axis=0,
                                      dst_type=torch.float32, src_type=torch_npu.float4_e2m1fn_x2)
    expected = ref.anti_mx_quant(ref.element_codes(y, "float4_e2m1"), scales.cpu(), "float4_e2m1", axis=0)
    assert torch.equal(out.cpu(), expected)
    meta = torch.ops.npu.npu_anti_mx_quant(y.to("meta"), scales.to("meta"), axis=0, src_type=torch_npu.float4_e2m1fn_x2)
    assert meta.shape == (64, 6) and meta.dtype == torch.bfloat16
    with pytest.raises(TypeError, match="src_type says x holds"):
        torch_npu.npu_anti_mx_quant(y, scales, axis=0)  # default src_type: float8_e4m3fn
    with pytest.raises(ValueError, match="mxscale must be"):
        torch_npu.npu_anti_mx_quant(y, scales, axis=1, src_type=torch_npu.float4_e2m1fn_x2)
    with pytest.raises(ValueError, match="dst_type must be float16, bfloat16 or float32"):
        torch_npu.npu_anti_mx_quant(y, scales, axis=0, dst_type=torch.int8, src_type=torch_npu.float4_e2m1fn_x2)


# --- npu_grouped_dynamic_mx_quant -------------------------------------------------------------------------------

def grouped_reference(x, ends, name, **kw):
    rows, cols = x.shape
    codes = torch.zeros(x.shape, dtype=torch.uint8)
    scales = torch.zeros(rows // 64 + len(ends), cols, 2, dtype=torch.uint8)
    start = 0
    for g, end in enumerate(ends):
        if end > start:
            c, s = ref.dynamic_mx_quant(x[start:end], name, axis=0, **kw)
            codes[start:end] = c
            first = start // 64 + g
            scales[first:first + s.shape[0]] = s
        start = end
    return codes, scales


@pytest.mark.parametrize("name", FORMATS)
def test_grouped_dynamic_mx_quant(name):
    x = wide_values((150, 40), seed=8, dtype=torch.bfloat16)
    ends = [30, 30, 101, 150]  # an empty group, groups that do not start on a block boundary
    before = device_op_count("aclnnGroupedDynamicMxQuantV2")
    y, scales = torch_npu.npu_grouped_dynamic_mx_quant(x.npu(), torch.tensor(ends, dtype=torch.int32).npu(),
                                                       dst_type=code(name))
    assert device_op_count("aclnnGroupedDynamicMxQuantV2") == before + 1
    assert scales.shape == (150 // 64 + 4, 40, 2)
    expected_codes, expected_scales = grouped_reference(x, ends, name)
    assert torch.equal(ref.element_codes(y, name), expected_codes)
    assert torch.equal(scales.cpu(), expected_scales)


def test_grouped_dynamic_mx_quant_default_target_meta_and_errors():
    x = torch.randn(64, 8, dtype=torch.float16)
    groups = torch.tensor([64]).npu()
    y, scales = torch_npu.npu_grouped_dynamic_mx_quant(x.npu(), groups, scale_alg=1)
    assert y.dtype == torch.float8_e5m2  # upstream's default dst_type 23 is torch.float8_e5m2
    expected_codes, expected_scales = grouped_reference(x, [64], "float8_e5m2", scale_alg=1)
    assert torch.equal(ref.element_codes(y, "float8_e5m2"), expected_codes)
    assert torch.equal(scales.cpu(), expected_scales)
    y, scales = torch.ops.npu.npu_grouped_dynamic_mx_quant(x.to("meta"), torch.empty(3, dtype=torch.int64,
                                                                                     device="meta"))
    assert scales.shape == (4, 8, 2)
    with pytest.raises(ValueError, match="blocksize must be 32"):
        torch_npu.npu_grouped_dynamic_mx_quant(x.npu(), groups, blocksize=64)
    with pytest.raises(ValueError, match="x must be 2-d"):
        torch_npu.npu_grouped_dynamic_mx_quant(x.reshape(4, 16, 8).npu(), groups)
    with pytest.raises(RuntimeError, match="last value must be the number of rows"):
        torch_npu.npu_grouped_dynamic_mx_quant(x.npu(), torch.tensor([10]).npu())[0].cpu()


# --- npu_dynamic_block_mx_quant ---------------------------------------------------------------------------------

def block_reference(x, name, **kw):
    """Per 32 x 32 block of the last two dims: codes, and the scale per row (scale1) and per column (scale2)."""
    xf = x.float()
    *lead, rows, cols = xf.shape
    codes = torch.zeros(xf.shape, dtype=torch.uint8)
    pr, pc = (-(-rows // 32) + 1) // 2, (-(-cols // 32) + 1) // 2
    s1 = torch.zeros(*lead, rows, pc, 2, dtype=torch.uint8)
    s2 = torch.zeros(*lead, pr, cols, 2, dtype=torch.uint8)
    for idx in np.ndindex(*lead):
        for rb in range(-(-rows // 32)):
            for cb in range(-(-cols // 32)):
                r, c = slice(rb * 32, rb * 32 + 32), slice(cb * 32, cb * 32 + 32)
                block = xf[idx][r, c].numpy()
                blk_codes, sc = ref.quantise_block(block, name, **kw)
                codes[idx][r, c] = torch.from_numpy(blk_codes)
                s1[idx][r, cb // 2, cb % 2] = sc
                s2[idx][rb // 2, c, rb % 2] = sc
    return codes, s1, s2


@pytest.mark.parametrize("name", FORMATS)
def test_dynamic_block_mx_quant(name):
    x = wide_values((2, 70, 40), seed=9, dtype=torch.bfloat16)
    before = device_op_count("aclnnDynamicBlockMxQuant")
    y, s1, s2 = torch_npu.npu_dynamic_block_mx_quant(x.npu(), round_mode="rint", dst_type=code(name))
    assert device_op_count("aclnnDynamicBlockMxQuant") == before + 1
    assert s1.shape == (2, 70, 1, 2) and s2.shape == (2, 2, 40, 2)
    codes, e1, e2 = block_reference(x, name, mode="rint")
    assert torch.equal(ref.element_codes(y, name), codes)
    assert torch.equal(s1.cpu(), e1) and torch.equal(s2.cpu(), e2)


def test_dynamic_block_mx_quant_scale_alg_2_floor_meta_and_errors():
    x = wide_values((40, 64), seed=10, dtype=torch.float16)
    y, s1, s2 = torch_npu.npu_dynamic_block_mx_quant(x.npu(), round_mode="floor", scale_alg=2, dst_type_max=6.0)
    codes, e1, e2 = block_reference(x, "float4_e2m1", mode="floor", scale_alg=2, dst_type_max=6.0)
    assert torch.equal(ref.element_codes(y, "float4_e2m1"), codes)
    assert torch.equal(s1.cpu(), e1) and torch.equal(s2.cpu(), e2)
    y, s1, s2 = torch.ops.npu.npu_dynamic_block_mx_quant(x.to("meta"), dst_type=torch_npu.float8_e4m3fn)
    assert y.shape == (40, 64) and y.dtype == torch.float8_e4m3fn and s1.shape == (40, 1, 2) and s2.shape == (1, 64, 2)
    with pytest.raises(ValueError, match="2 to 7 dimensions"):
        torch_npu.npu_dynamic_block_mx_quant(torch.randn(64).npu())
    with pytest.raises(ValueError, match="round_mode must be"):
        torch_npu.npu_dynamic_block_mx_quant(x.npu(), round_mode="ceil")


# --- npu_rms_norm_dynamic_mx_quant / npu_add_rms_norm_dynamic_mx_quant --------------------------------------------

def rms_normed(x, gamma, beta, eps=1e-6):
    xf = x.float()
    rstd = torch.reciprocal(torch.sqrt((xf * xf).mean(-1, keepdim=True) + eps))
    v = xf * rstd * gamma.float()
    return (v + beta.float() if beta is not None else v), rstd


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("with_beta", [False, True])
def test_rms_norm_dynamic_mx_quant(name, with_beta):
    x = wide_values((3, 5, 64), seed=11, dtype=torch.bfloat16)
    g = torch.Generator().manual_seed(12)
    gamma = torch.randn(64, generator=g)
    beta = torch.randn(64, generator=g) if with_beta else None
    v, rstd_ref = rms_normed(x, gamma, beta)
    before = device_op_count("aclnnRmsNormDynamicMxQuant")
    y, scales, rstd = torch_npu.npu_rms_norm_dynamic_mx_quant(
        x.npu().requires_grad_(), gamma.npu(), beta=None if beta is None else beta.npu(), dst_type=code(name))
    assert device_op_count("aclnnRmsNormDynamicMxQuant") == before + 1
    assert scales.shape == (3, 5, 1, 2) and rstd.shape == (3, 5, 1)
    torch.testing.assert_close(rstd.detach().cpu(), rstd_ref, rtol=1e-5, atol=1e-6)
    expected_codes, expected_scales = ref.dynamic_mx_quant(v, name)
    # float32 reassociation may move a value across a rounding boundary: a few codes may differ by one step.
    assert (ref.element_codes(y, name) != expected_codes).float().mean().item() <= 0.01
    assert (scales.cpu() != expected_scales).float().mean().item() <= 0.02


def test_add_rms_norm_dynamic_mx_quant_and_rstd_only_with_grad():
    g = torch.Generator().manual_seed(13)
    x1 = torch.randn(4, 96, generator=g).to(torch.float16)
    x2 = torch.randn(4, 96, generator=g).to(torch.float16)
    gamma = torch.randn(96, generator=g, dtype=torch.float16)
    y, x, scales, rstd = torch_npu.npu_add_rms_norm_dynamic_mx_quant(x1.npu(), x2.npu(), gamma.npu(),
                                                                     dst_type=torch_npu.float8_e4m3fn)
    total = (x1.float() + x2.float()).to(torch.float16)
    assert torch.equal(x.cpu(), total) and rstd.shape == (0,)
    v, _ = rms_normed(total, gamma, None)
    expected_codes, expected_scales = ref.dynamic_mx_quant(v, "float8_e4m3fn")
    assert (ref.element_codes(y, "float8_e4m3fn") != expected_codes).float().mean().item() <= 0.01
    assert scales.shape == (4, 2, 2) and (scales.cpu() != expected_scales).float().mean().item() <= 0.02
    _, _, _, rstd = torch_npu.npu_add_rms_norm_dynamic_mx_quant(x1.npu().requires_grad_(), x2.npu().requires_grad_(),
                                                                gamma.npu())
    assert rstd.shape == (4, 1)
    y, x, scales, rstd = torch.ops.npu.npu_add_rms_norm_dynamic_mx_quant(x1.to("meta"), x2.to("meta"),
                                                                         gamma.to("meta"))
    assert y.shape == (4, 48) and y.dtype == torch.uint8 and x.shape == (4, 96) and scales.shape == (4, 2, 2)
    with pytest.raises(ValueError, match="must agree on requires_grad"):
        torch_npu.npu_add_rms_norm_dynamic_mx_quant(x1.npu().requires_grad_(), x2.npu(), gamma.npu())
    with pytest.raises(ValueError, match="gamma must hold"):
        torch_npu.npu_rms_norm_dynamic_mx_quant(x1.npu(), torch.ones(8).npu())


# --- npu_dynamic_mx_quant_with_dual_axis / npu_dynamic_dual_level_mx_quant ------------------------------------------

@pytest.mark.parametrize("name", ["float8_e5m2", "float4_e2m1"])
def test_dynamic_mx_quant_with_dual_axis(name):
    x = wide_values((2, 40, 64), seed=14, dtype=torch.float16)
    before = device_op_count("aclnnDynamicMxQuantWithDualAxisV2")
    y1, s1, y2, s2 = torch_npu.npu_dynamic_mx_quant_with_dual_axis(x.npu(), dst_type=code(name))
    assert device_op_count("aclnnDynamicMxQuantWithDualAxisV2") == before + 1
    assert s1.shape == (2, 40, 1, 2) and s2.shape == (2, 1, 64, 2)
    check_mx(y1, s1, x, name, axis=-1)
    check_mx(y2, s2, x, name, axis=-2)
    meta = torch.ops.npu.npu_dynamic_mx_quant_with_dual_axis(x.to("meta"), dst_type=torch_npu.float8_e4m3fn,
                                                             scale_alg=1, dst_type_max=None)
    assert [t.shape for t in meta] == [(2, 40, 64), (2, 40, 1, 2), (2, 40, 64), (2, 1, 64, 2)]


def dual_level_reference(x, mode):
    xf = x.float()
    n = xf.shape[-1]
    blocks = -(-n // 512)
    padded = torch.nn.functional.pad(xf, (0, blocks * 512 - n)).reshape(*xf.shape[:-1], blocks, 512)
    level0 = padded.abs().amax(-1, keepdim=True) / 6.0
    t = torch.where(level0 == 0, torch.zeros_like(padded), padded / level0)
    held = t.reshape(*xf.shape[:-1], blocks * 512)[..., :n].to(x.dtype)
    codes, level1 = ref.dynamic_mx_quant(held, "float4_e2m1", mode=mode)
    return codes, level0.squeeze(-1), level1


@pytest.mark.parametrize("mode", ["rint", "round", "floor"])
def test_dynamic_dual_level_mx_quant(mode):
    x = wide_values((3, 1100), seed=15, dtype=torch.bfloat16)
    x[1, 512:1024] = 0  # a zero level-0 block
    before = device_op_count("aclnnDynamicDualLevelMxQuant")
    y, level0, level1 = torch_npu.npu_dynamic_dual_level_mx_quant(x.npu(), round_mode=mode)
    assert device_op_count("aclnnDynamicDualLevelMxQuant") == before + 1
    assert y.shape == (3, 550) and level0.shape == (3, 3) and level1.shape == (3, 18, 2)
    codes, e0, e1 = dual_level_reference(x, mode)
    torch.testing.assert_close(level0.cpu(), e0, rtol=0, atol=0)
    assert torch.equal(ref.element_codes(y, "float4_e2m1"), codes)
    assert torch.equal(level1.cpu(), e1)


def test_dynamic_dual_level_mx_quant_upstream_example_meta_and_errors():
    y, level0, level1 = torch_npu.npu_dynamic_dual_level_mx_quant(torch.full((1, 512), 8.0, dtype=torch.bfloat16).npu())
    # 8 / (8 / 6) = 6 in bfloat16: float4_e2m1's largest value (code 7) at scale 2^0 (e8m0 code 127).
    assert (y.cpu() == 0x77).all() and level0.cpu().item() == pytest.approx(8.0 / 6.0)
    assert (level1.cpu() == 127).all()
    y, level0, level1 = torch.ops.npu.npu_dynamic_dual_level_mx_quant(torch.empty(2, 64, dtype=torch.float16,
                                                                                  device="meta"))
    assert y.shape == (2, 32) and level0.shape == (2, 1) and level1.shape == (2, 1, 2)
    with pytest.raises(ValueError, match="smooth_scale is not supported"):
        torch_npu.npu_dynamic_dual_level_mx_quant(torch.ones(2, 64, dtype=torch.float16).npu(),
                                                  smooth_scale=torch.ones(64, dtype=torch.float16).npu())
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        torch_npu.npu_dynamic_dual_level_mx_quant(torch.ones(2, 64).npu())
