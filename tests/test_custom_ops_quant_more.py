"""More quantization ops against CPU references written from their documented definitions (op_refs/quant_more.py):
npu_rms_norm_quant_v2, npu_kronecker_quant, npu_quant_max, npu_grouped_dynamic_block_quant and
npu_moe_init_routing_quant; int8 outputs and int4 packed eight to an int32; Meta shapes, device-op counters and clear
errors (float4 is refused). The float8 / hifloat8 targets of npu_quant_max and npu_rms_norm_quant_v2 are tested
against en_dtypes and torch's float8 in test_hifloat8.py."""

import pytest
import torch

import torch_npu
from op_refs import quant_more as ref

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
HIFLOAT8, FLOAT8_E5M2, FLOAT8_E4M3FN, FLOAT4_E2M1 = 290, 291, 292, 296  # torch_npu's dtype codes


def device_op_count(name):
    torch.npu.synchronize()
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def assert_quantized_close(got, expected, int4=False):
    """Integer outputs: same dtype and shape, at most one step apart (a value at a rounding boundary), nearly all
    equal. int4 data (eight to an int32) is compared unpacked."""
    got = got.cpu()
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, got.shape, expected.shape)
    if int4:
        got, expected = ref.int4_unpack32(got), ref.int4_unpack32(expected)
    diff = (got.to(torch.int64) - expected.to(torch.int64)).abs()
    if diff.numel():
        assert diff.max().item() <= 1, diff.max()
        assert (diff > 0).float().mean().item() <= 0.02, (diff > 0).float().mean()


def meta(t):
    return t.to("meta")


# --- npu_rms_norm_quant_v2 --------------------------------------------------------------------------------------

def rms_inputs(dtype, shape=(3, 5, 32), seed=0, per_channel=False):
    g = torch.Generator().manual_seed(seed)
    h = shape[-1]
    x = torch.randn(shape, generator=g).to(dtype)
    gamma = torch.randn(h, generator=g).to(dtype)
    n = h if per_channel else 1
    scale = (torch.rand(n, generator=g) * 0.05 + 0.01).to(dtype)
    offset = torch.randint(-5, 6, (n,), generator=g).to(dtype)
    beta = torch.randn(h, generator=g).to(dtype)
    return x, gamma, scale, offset, beta


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("div_mode", [True, False])
@pytest.mark.parametrize("optional", ["none", "offset_beta"])
def test_rms_norm_quant_v2_int8(dtype, div_mode, optional):
    x, gamma, scale, offset, beta = rms_inputs(dtype)
    if not div_mode:
        scale = (1.0 / scale.float()).to(dtype)
    if optional == "none":
        offset = beta = None
    expected, _ = ref.rms_norm_quant_v2(x, gamma, scale, offset, beta, 1e-6, div_mode)
    y, rstd = torch_npu.npu_rms_norm_quant_v2(x.npu(), gamma.npu(), scale.npu(),
                                              offset=None if offset is None else offset.npu(),
                                              beta=None if beta is None else beta.npu(), div_mode=div_mode)
    assert_quantized_close(y, expected)
    assert rstd.shape == (0,) and rstd.dtype == torch.float32  # x does not require grad: no rstd, as upstream
    assert expected.abs().sum() > 0


def test_rms_norm_quant_v2_per_channel_gamma_row_and_rstd():
    x, gamma, scale, offset, beta = rms_inputs(torch.float16, shape=(4, 32), per_channel=True, seed=1)
    gamma = gamma.reshape(1, 32)
    expected, expected_rstd = ref.rms_norm_quant_v2(x, gamma, scale, offset, beta)
    y, rstd = torch_npu.npu_rms_norm_quant_v2(x.npu().requires_grad_(), gamma.npu(), scale.npu(), offset=offset.npu(),
                                              beta=beta.npu())
    assert_quantized_close(y, expected)
    assert rstd.shape == (4, 1) and rstd.dtype == torch.float32
    torch.testing.assert_close(rstd.detach().cpu(), expected_rstd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rms_norm_quant_v2_int4(dtype):
    x, gamma, scale, offset, _ = rms_inputs(dtype, shape=(2, 3, 16), seed=2)
    scale = (scale.float() * 12).to(dtype)  # values mostly inside int4's range
    expected, _ = ref.rms_norm_quant_v2(x, gamma, scale, offset, None, int4=True)
    y, _ = torch_npu.npu_rms_norm_quant_v2(x.npu(), gamma.npu(), scale.npu(), offset=offset.npu(),
                                           dst_dtype=torch.quint4x2)
    assert y.shape == (2, 3, 2) and y.dtype == torch.int32
    assert_quantized_close(y, expected, int4=True)


def test_rms_norm_quant_v2_rounds_half_to_even():
    # x = +-1 everywhere: rstd = 1, so y = x * gamma / scale exactly; 0.5 and 2.5 round to 0 and 2.
    x = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    gamma = torch.tensor([0.5, 2.5, -0.5, 3.5])
    y, _ = torch_npu.npu_rms_norm_quant_v2(x.npu(), gamma.npu(), torch.tensor([1.0]).npu(), epsilon=0.0)
    assert y.cpu().tolist() == [[0, 2, 0, 4]]


def test_rms_norm_quant_v2_meta_device_op_and_errors():
    x, gamma, scale, offset, beta = rms_inputs(torch.float16, shape=(2, 16))
    y, rstd = torch.ops.npu.npu_rms_norm_quant_v2(meta(x), meta(gamma), meta(scale), dst_dtype=torch.quint4x2)
    assert y.shape == (2, 2) and y.dtype == torch.int32 and rstd.shape == (0,)
    y, rstd = torch.ops.npu.npu_rms_norm_quant_v2(meta(x).requires_grad_(), meta(gamma), meta(scale))
    assert y.shape == (2, 16) and y.dtype == torch.int8 and rstd.shape == (2, 1) and rstd.dtype == torch.float32
    before = device_op_count("aclnnRmsNormQuantV3")
    torch_npu.npu_rms_norm_quant_v2(x.npu(), gamma.npu(), scale.npu())
    assert device_op_count("aclnnRmsNormQuantV3") == before + 1
    for code, holder in [(HIFLOAT8, torch.uint8), (FLOAT8_E5M2, torch.float8_e5m2), (FLOAT8_E4M3FN, torch.float8_e4m3fn)]:
        y, _ = torch.ops.npu.npu_rms_norm_quant_v2(meta(x), meta(gamma), meta(scale), dst_dtype=code)
        assert y.shape == (2, 16) and y.dtype == holder
    with pytest.raises(ValueError, match="float4_e2m1, a chip number format"):
        torch_npu.npu_rms_norm_quant_v2(x.npu(), gamma.npu(), scale.npu(), dst_dtype=FLOAT4_E2M1)
    with pytest.raises(ValueError, match="gamma must be"):
        torch_npu.npu_rms_norm_quant_v2(x.npu(), gamma[:8].npu(), scale.npu())
    with pytest.raises(ValueError, match="scale must hold 1 or 16"):
        torch_npu.npu_rms_norm_quant_v2(x.npu(), gamma.npu(), torch.ones(3).npu())
    with pytest.raises(ValueError, match="multiple of 8"):
        torch_npu.npu_rms_norm_quant_v2(torch.randn(2, 12).npu(), torch.ones(12).npu(), scale.npu(),
                                        dst_dtype=torch.quint4x2)
    with pytest.raises(TypeError, match="float16, bfloat16 or float32"):
        torch_npu.npu_rms_norm_quant_v2(x.to(torch.int32).npu(), gamma.npu(), scale.npu())


# --- npu_kronecker_quant ----------------------------------------------------------------------------------------

def kronecker_inputs(dtype, k=3, m=5, n=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(k, m, n, generator=g).to(dtype)
    p1 = torch.randn(m, m, generator=g).to(dtype)
    p2 = torch.randn(n, n, generator=g).to(dtype)
    return x, p1, p2


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("clip_ratio", [None, 0.7848])
def test_kronecker_quant(dtype, clip_ratio):
    x, p1, p2 = kronecker_inputs(dtype)
    expected, expected_scale = ref.kronecker_quant(x, p1, p2, 1.0 if clip_ratio is None else clip_ratio)
    out, scale = torch_npu.npu_kronecker_quant(x.npu(), p1.npu(), p2.npu(), clip_ratio)
    assert out.shape == (3, 5, 2) and out.dtype == torch.int32
    assert scale.shape == (3,) and scale.dtype == torch.float32
    assert_quantized_close(out, expected, int4=True)
    torch.testing.assert_close(scale.cpu(), expected_scale, rtol=1e-5, atol=1e-7)
    # the largest magnitude of each slice lands on the (clipped) int4 maximum
    top = ref.int4_unpack32(out.cpu()).abs().amax(dim=(1, 2))
    assert (top >= 5).all()


def test_kronecker_quant_explicit_int32_and_zero_slice():
    x, p1, p2 = kronecker_inputs(torch.float16, k=2, m=3, n=8, seed=1)
    x[1] = 0
    out, scale = torch_npu.npu_kronecker_quant(x.npu(), p1.npu(), p2.npu(), 1.0, torch.int32, 0.0)
    assert (ref.int4_unpack32(out.cpu())[1] == 0).all() and scale.cpu()[1] == 0
    expected, _ = ref.kronecker_quant(x, p1, p2)
    assert_quantized_close(out, expected, int4=True)


def test_kronecker_quant_meta_device_op_and_errors():
    x, p1, p2 = kronecker_inputs(torch.bfloat16, k=4, m=3, n=64)
    out, scale = torch.ops.npu.npu_kronecker_quant(meta(x), meta(p1), meta(p2))
    assert out.shape == (4, 3, 8) and out.dtype == torch.int32 and scale.shape == (4,) and scale.dtype == torch.float32
    before = device_op_count("aclnnFlatQuantV2")
    torch_npu.npu_kronecker_quant(x.npu(), p1.npu(), p2.npu())
    assert device_op_count("aclnnFlatQuantV2") == before + 1
    with pytest.raises(ValueError, match="float4_e2m1, a chip number format"):
        torch_npu.npu_kronecker_quant(x.npu(), p1.npu(), p2.npu(), dst_dtype=FLOAT4_E2M1)
    with pytest.raises(ValueError, match="dst_dtype must be torch.int32"):
        torch_npu.npu_kronecker_quant(x.npu(), p1.npu(), p2.npu(), dst_dtype=torch.int8)
    with pytest.raises(ValueError, match="dst_type_max"):
        torch_npu.npu_kronecker_quant(x.npu(), p1.npu(), p2.npu(), dst_type_max=6.0)
    with pytest.raises(ValueError, match="clip_ratio must be in"):
        torch_npu.npu_kronecker_quant(x.npu(), p1.npu(), p2.npu(), 1.5)
    with pytest.raises(ValueError, match="kronecker_p1 must be"):
        torch_npu.npu_kronecker_quant(x.npu(), p2.npu(), p2.npu())
    with pytest.raises(ValueError, match="multiple of 8"):
        y, q1, q2 = kronecker_inputs(torch.float16, n=12)
        torch_npu.npu_kronecker_quant(y.npu(), q1.npu(), q2.npu())
    with pytest.raises(TypeError, match="x's dtype"):
        torch_npu.npu_kronecker_quant(x.npu(), p1.half().npu(), p2.npu())


# --- npu_quant_max ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("round_mode", ["rint", "round", "floor", "ceil", "trunc"])
def test_quant_max(dtype, round_mode):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(4, 6, 32, generator=g) * 3).to(dtype)
    scale = torch.tensor([50.0])
    expected, expected_amax = ref.quant_max(x, scale, round_mode)
    y, amax = torch_npu.npu_quant_max(x.npu(), scale.npu(), round_mode=round_mode, dst_dtype=torch.int8)
    assert_quantized_close(y, expected)
    assert amax.shape == (1,) and amax.dtype == dtype
    assert torch.equal(amax.cpu(), expected_amax)
    assert (y.cpu() == 127).any() or (y.cpu() == -128).any()  # saturates


def test_quant_max_rounds_half_to_even_and_npu_int8_code():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 300.0])
    y, amax = torch_npu.npu_quant_max(x.npu(), torch.tensor([1.0]).npu(), dst_dtype=256 + 2)
    assert y.cpu().tolist() == [0, 2, 2, 0, -2, 127] and amax.cpu().tolist() == [300.0]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(8, 16), (5, 3, 8)])
def test_quant_max_grouped(dtype, shape):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(shape, generator=g).to(dtype)
    rows = shape[0]
    group_list = torch.tensor([2, 2, rows - 1, rows], dtype=torch.int64)  # one empty group
    scale = torch.tensor([10.0, 20.0, 40.0, 80.0])
    expected, expected_amax = ref.quant_max(x, scale, group_list=group_list)
    before = device_op_count("aclnnGroupedQuantMax")
    y, amax = torch_npu.npu_quant_max(x.npu(), scale.npu(), dst_dtype=torch.int8, group_list=group_list.npu())
    assert device_op_count("aclnnGroupedQuantMax") == before + 1
    assert_quantized_close(y, expected)
    assert amax.shape == (4,) and amax.dtype == dtype and amax.cpu()[1] == 0
    assert torch.equal(amax.cpu(), expected_amax)


def test_quant_max_meta_device_op_and_errors():
    x = torch.randn(4, 8, dtype=torch.float16)
    scale = torch.tensor([2.0])
    y, amax = torch.ops.npu.npu_quant_max(meta(x), meta(scale), dst_dtype=torch.int8)
    assert y.shape == (4, 8) and y.dtype == torch.int8 and amax.shape == (1,) and amax.dtype == torch.float16
    y, amax = torch.ops.npu.npu_quant_max(meta(x), torch.empty(2, device="meta"), dst_dtype=torch.int8,
                                          group_list=torch.empty(2, dtype=torch.int64, device="meta"))
    assert amax.shape == (2,)
    before = device_op_count("aclnnQuantMax")
    torch_npu.npu_quant_max(x.npu(), scale.npu(), dst_dtype=torch.int8, group_list=torch.tensor([4]).npu())
    assert device_op_count("aclnnQuantMax") == before + 1  # one group: the plain op, as upstream
    with pytest.raises(ValueError, match="hifloat8 rounds half away from zero: round_mode must be 'round'"):
        torch_npu.npu_quant_max(x.npu(), scale.npu(), round_mode="rint", dst_dtype=HIFLOAT8)
    with pytest.raises(ValueError, match="float8 rounds to nearest even: round_mode must be 'rint'"):
        torch_npu.npu_quant_max(x.npu(), scale.npu(), round_mode="floor", dst_dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="'hybrid' .* is not provided"):
        torch_npu.npu_quant_max(x.npu(), scale.npu(), round_mode="hybrid", dst_dtype=HIFLOAT8)
    with pytest.raises(ValueError, match="dst_dtype must be torch_npu.float8_e5m2"):
        torch_npu.npu_quant_max(x.npu(), scale.npu(), dst_dtype=torch.int32)
    with pytest.raises(ValueError, match="scale must be \\[2\\]"):
        torch_npu.npu_quant_max(x.npu(), scale.npu(), dst_dtype=torch.int8, group_list=torch.tensor([2, 4]).npu())
    with pytest.raises(RuntimeError, match="groupList"):
        torch_npu.npu_quant_max(x.npu(), torch.ones(2).npu(), dst_dtype=torch.int8,
                                group_list=torch.tensor([3, 2]).npu())[0].cpu()  # found when the kernel runs


# --- npu_grouped_dynamic_block_quant ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,group_list,row_block,col_block", [
    ((10, 200), [3, 3, 10], 1, 128),
    ((10, 200), [3, 7, 10], 2, 64),
    ((2, 9, 128), [4, 9], 4, 128),
])
def test_grouped_dynamic_block_quant(dtype, shape, group_list, row_block, col_block):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(shape, generator=g).to(dtype)
    groups = torch.tensor(group_list, dtype=torch.int32)
    expected, expected_scale = ref.grouped_dynamic_block_quant(x, groups, 0.0, row_block, col_block)
    y, scale = torch_npu.npu_grouped_dynamic_block_quant(x.npu(), groups.npu(), dst_type=torch.int8,
                                                         row_block_size=row_block, col_block_size=col_block)
    assert_quantized_close(y, expected)
    assert scale.dtype == torch.float32 and scale.shape == expected_scale.shape
    torch.testing.assert_close(scale.cpu(), expected_scale, rtol=1e-6, atol=0)
    assert (y.cpu().abs() == 127).any()


def test_grouped_dynamic_block_quant_min_scale_and_zeros():
    x = torch.zeros(1, 2, dtype=torch.float16)
    y, scale = torch_npu.npu_grouped_dynamic_block_quant(x.npu(), torch.tensor([1], dtype=torch.int32).npu(),
                                                         dst_type=torch.int8)
    assert y.cpu().tolist() == [[0, 0]] and scale.shape == (2, 1) and scale.cpu().abs().sum() == 0
    g = torch.Generator().manual_seed(6)
    x = torch.randn(6, 64, generator=g) * 10  # m = 127 / amax falls below min_scale: raised to it, y saturates
    groups = torch.tensor([2, 6], dtype=torch.int32)
    expected, expected_scale = ref.grouped_dynamic_block_quant(x, groups, 50.0, 1, 64)
    y, scale = torch_npu.npu_grouped_dynamic_block_quant(x.npu(), groups.npu(), min_scale=50.0, dst_type=torch.int8,
                                                         col_block_size=64)
    assert_quantized_close(y, expected)
    torch.testing.assert_close(scale.cpu(), expected_scale)


def test_grouped_dynamic_block_quant_meta_device_op_and_errors():
    x = torch.randn(2, 8, 300, dtype=torch.bfloat16)
    groups = torch.tensor([3, 8], dtype=torch.int32)
    y, scale = torch.ops.npu.npu_grouped_dynamic_block_quant(meta(x), meta(groups), dst_type=torch.int8,
                                                             row_block_size=4)
    assert y.shape == (2, 8, 300) and y.dtype == torch.int8 and scale.shape == (2, 4, 3)
    assert scale.dtype == torch.float32
    before = device_op_count("aclnnGroupedDynamicBlockQuantV2")
    torch_npu.npu_grouped_dynamic_block_quant(x.npu(), groups.npu(), dst_type=torch.int8)
    assert device_op_count("aclnnGroupedDynamicBlockQuantV2") == before + 1
    y, _ = torch.ops.npu.npu_grouped_dynamic_block_quant(meta(x), meta(groups), round_mode="round",
                                                         dst_type=HIFLOAT8)
    assert y.dtype == torch.uint8  # float targets: test_hifloat8.py
    with pytest.raises(ValueError, match="round_mode must be 'round' for this dst_type"):
        torch_npu.npu_grouped_dynamic_block_quant(x.npu(), groups.npu(), dst_type=HIFLOAT8)
    with pytest.raises(ValueError, match="round_mode must be 'rint'"):
        torch_npu.npu_grouped_dynamic_block_quant(x.npu(), groups.npu(), round_mode="round", dst_type=torch.int8)
    with pytest.raises(ValueError, match="group_list_type must be 0"):
        torch_npu.npu_grouped_dynamic_block_quant(x.npu(), groups.npu(), dst_type=torch.int8, group_list_type=1)
    with pytest.raises(ValueError, match="row_block_size and col_block_size must be positive"):
        torch_npu.npu_grouped_dynamic_block_quant(x.npu(), groups.npu(), dst_type=torch.int8, row_block_size=0)
    with pytest.raises(ValueError, match="dst_type_max"):
        torch_npu.npu_grouped_dynamic_block_quant(x.npu(), groups.npu(), dst_type=torch.int8, dst_type_max=15.0)
    with pytest.raises(ValueError, match="2-d \\[M, N\\] or 3-d"):
        torch_npu.npu_grouped_dynamic_block_quant(x[0, 0].npu(), groups.npu(), dst_type=torch.int8)
    with pytest.raises(RuntimeError, match="groupList's last value"):  # found when the kernel runs
        torch_npu.npu_grouped_dynamic_block_quant(x.npu(), torch.tensor([3, 7], dtype=torch.int32).npu(),
                                                  dst_type=torch.int8)[0].cpu()


# --- npu_moe_init_routing_quant ---------------------------------------------------------------------------------

def routing_inputs(dtype, tokens=6, h=32, k=3, experts=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, h, generator=g).to(dtype)
    expert_idx = torch.randint(0, experts, (tokens, k), generator=g, dtype=torch.int32)
    return x, expert_idx


def run_routing(x, expert_idx, scale=None, offset=None, **kw):
    outs = torch_npu.npu_moe_init_routing_quant(x.npu(), expert_idx.npu(),
                                                scale=None if scale is None else scale.npu(),
                                                offset=None if offset is None else offset.npu(), **kw)
    expected = ref.moe_init_routing_quant(x, expert_idx, scale, offset, **kw)
    return [None if o is None else o.cpu() for o in outs], expected


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("tokens_mode", [0, 1, 2])
def test_moe_init_routing_quant_static(dtype, tokens_mode):
    x, expert_idx = routing_inputs(dtype)
    scale, offset = torch.tensor([30.0]), torch.tensor([0.5])
    got, expected = run_routing(x, expert_idx, scale, offset, active_num=0, expert_num=8,
                                expert_tokens_num_mode=tokens_mode, quant_mode=0)
    assert_quantized_close(got[0], expected[0])
    assert torch.equal(got[1], expected[1]) and got[1].dtype == torch.int32
    if tokens_mode == 0:
        assert got[2] is None
    else:
        assert got[2].dtype == torch.int32 and torch.equal(got[2], expected[2])
    assert got[3] is None and got[4] is None


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("smoothing", [None, "one", "per_expert"])
def test_moe_init_routing_quant_dynamic(dtype, smoothing):
    x, expert_idx = routing_inputs(dtype, seed=1)
    g = torch.Generator().manual_seed(2)
    scale = None if smoothing is None else torch.rand(1 if smoothing == "one" else 8, 32, generator=g) + 0.5
    got, expected = run_routing(x, expert_idx, scale, active_num=10, expert_num=8, expert_tokens_num_mode=2,
                                quant_mode=1)
    assert got[0].shape == (10, 32)
    assert_quantized_close(got[0], expected[0])
    assert torch.equal(got[1], expected[1]) and torch.equal(got[2], expected[2])
    assert got[4].shape == (10,) and got[4].dtype == torch.float32
    torch.testing.assert_close(got[4], expected[4], rtol=1e-6, atol=0)


def test_moe_init_routing_quant_drop_pad():
    x, expert_idx = routing_inputs(torch.float16, tokens=8, k=2, experts=4, seed=3)
    got, expected = run_routing(x, expert_idx, active_num=0, expert_capacity=2, expert_num=4, drop_pad_mode=1,
                                expert_tokens_before_capacity_flag=True, quant_mode=1)
    assert got[0].shape == (4, 2, 32) and got[0].dtype == torch.int8
    assert_quantized_close(got[0], expected[0])
    assert torch.equal(got[1], expected[1]) and (got[1] == -1).any()  # 16 routed positions, 8 slots
    assert got[2] is None and torch.equal(got[3], expected[3]) and got[3].sum() == 16
    torch.testing.assert_close(got[4], expected[4], rtol=1e-6, atol=0)


def test_moe_init_routing_quant_meta_device_op_and_errors():
    x, expert_idx = routing_inputs(torch.bfloat16)
    outs = torch.ops.npu.npu_moe_init_routing_quant(meta(x), meta(expert_idx), expert_num=8,
                                                    expert_tokens_num_mode=1)
    assert outs[0].shape == (18, 32) and outs[0].dtype == torch.int8 and outs[1].shape == (18,)
    assert outs[2].shape == (8,) and outs[2].dtype == torch.int32 and outs[3] is None
    assert outs[4].shape == (18,) and outs[4].dtype == torch.float32
    outs = torch.ops.npu.npu_moe_init_routing_quant(meta(x), meta(expert_idx), scale=torch.empty(1, device="meta"),
                                                    expert_capacity=3, expert_num=8, drop_pad_mode=1, quant_mode=0,
                                                    expert_tokens_before_capacity_flag=True)
    assert outs[0].shape == (8, 3, 32) and outs[3].shape == (8,) and outs[4] is None
    before = device_op_count("aclnnMoeInitRoutingQuantV2")
    torch_npu.npu_moe_init_routing_quant(x.npu(), expert_idx.npu(), expert_num=8)
    assert device_op_count("aclnnMoeInitRoutingQuantV2") == before + 1
    with pytest.raises(ValueError, match="needs scale"):
        torch_npu.npu_moe_init_routing_quant(x.npu(), expert_idx.npu(), expert_num=8, quant_mode=0)
    with pytest.raises(ValueError, match="quant_mode must be 0"):
        torch_npu.npu_moe_init_routing_quant(x.npu(), expert_idx.npu(), expert_num=8, quant_mode=2)
    with pytest.raises(ValueError, match="expert_capacity >= 1"):
        torch_npu.npu_moe_init_routing_quant(x.npu(), expert_idx.npu(), expert_num=8, drop_pad_mode=1)
    with pytest.raises(ValueError, match="smoothing scale must be"):
        torch_npu.npu_moe_init_routing_quant(x.npu(), expert_idx.npu(), scale=torch.ones(3, 32).npu(), expert_num=8)
    with pytest.raises(TypeError, match="expert_idx must be int32"):
        torch_npu.npu_moe_init_routing_quant(x.npu(), expert_idx.long().npu(), expert_num=8)
    with pytest.raises(RuntimeError, match="expertIdx values must be in"):  # found when the kernel runs
        torch_npu.npu_moe_init_routing_quant(x.npu(), expert_idx.npu(), expert_num=4)[0].cpu()
