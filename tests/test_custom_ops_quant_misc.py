"""npu_grouped_matmul_swiglu_quant and npu_grouped_matmul_swiglu_quant_v2 against CPU references written from their
documented formulas (A8W8, A8W4, A4W4 and float8 operands), with Meta kernels, device-op counters and argument
errors."""

import pytest
import torch

import torch_npu
from op_refs import quant_misc as ref

HIFLOAT8 = 256 + 34  # torch_npu's code for hifloat8 (an aclDataType + 256)
FLOAT8_E8M0 = 256 + 37


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def gmm_inputs(e=2, m=12, k=32, n=16, seed=0, scale_dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-100, 100, (m, k), generator=g, dtype=torch.int8)
    w = torch.randint(-8, 8, (e, k, n), generator=g, dtype=torch.int8)
    ws = (torch.rand(e, n, generator=g) * 0.02 + 0.001).to(scale_dtype)
    xs = torch.rand(m, generator=g) * 0.5 + 0.05
    gl = torch.tensor([5, m - 2], dtype=torch.int64)[:e] if e == 2 else torch.tensor([m], dtype=torch.int64)
    return x, w, ws, xs, gl


def assert_quant_close(got, expected):
    # Outputs are rounded int8: one unit apart at most where float32 ties round differently.
    y, s = got
    ey, es = expected
    assert y.dtype == torch.int8 and s.dtype == torch.float32
    assert (y.int() - ey.int()).abs().max() <= 1
    torch.testing.assert_close(s, es, rtol=1e-5, atol=1e-7)


# ---- npu_grouped_matmul_swiglu_quant ----

@pytest.mark.parametrize("scale_dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_gmm_swiglu_quant_a8w8(scale_dtype):
    x, w, ws, xs, gl = gmm_inputs(scale_dtype=scale_dtype)
    expected = ref.grouped_matmul_swiglu_quant(x, w, gl, ws, xs)
    y, s, off = torch_npu.npu_grouped_matmul_swiglu_quant(x.npu(), w.npu(), gl.npu(), ws.npu(), xs.npu())
    assert y.shape == (12, 8) and s.shape == (12,) and off.shape == () and off.dtype == torch.float32
    assert_quant_close((y.cpu(), s.cpu()), expected)
    assert y.cpu()[:10].abs().amax() == 127  # each row's amax maps to +-127
    assert torch.equal(y.cpu()[10:], torch.zeros(2, 8, dtype=torch.int8))  # rows past the last group


def test_gmm_swiglu_quant_a8w4_with_assist_bias():
    g = torch.Generator().manual_seed(1)
    x, _, _, xs, gl = gmm_inputs(seed=1)
    wq = torch.randint(-8, 8, (2, 32, 16), generator=g)
    w = ref.pack_int4_words(wq)
    ws = torch.rand(2, 16, generator=g) * 0.02 + 0.001
    assist = ref.a8w4_assist_matrix(w, ws)
    expected = ref.grouped_matmul_swiglu_quant(x, w, gl, ws, xs, assist=assist)
    # With the right assist matrix A8W4 equals the plain int8 x int4 product.
    plain = ref.grouped_matmul_swiglu_quant(x, wq.to(torch.int8), gl, ws, xs)
    assert (expected[0].int() - plain[0].int()).abs().max() <= 1
    y, s, _ = torch_npu.npu_grouped_matmul_swiglu_quant(x.npu(), w.npu(), gl.npu(), ref.pack_scale_bits(ws).npu(),
                                                        xs.npu(), bias=assist.npu())
    assert y.shape == (12, 8)
    assert_quant_close((y.cpu(), s.cpu()), expected)


def test_gmm_swiglu_quant_meta_and_device_op():
    x, w, ws, xs, gl = gmm_inputs()
    y, s, off = torch.ops.npu.npu_grouped_matmul_swiglu_quant(x.to("meta"), w.to("meta"), gl.to("meta"),
                                                              ws.to("meta"), xs.to("meta"))
    assert (y.shape, y.dtype) == ((12, 8), torch.int8)
    assert (s.shape, s.dtype, off.shape, off.dtype) == ((12,), torch.float32, (), torch.float32)
    before = device_op_count("aclnnGroupedMatmulSwigluQuantWeightNZ")
    torch_npu.npu_grouped_matmul_swiglu_quant(x.npu(), w.npu(), gl.npu(), ws.npu(), xs.npu())
    torch.npu.synchronize()
    assert device_op_count("aclnnGroupedMatmulSwigluQuantWeightNZ") == before + 1


def test_gmm_swiglu_quant_errors():
    x, w, ws, xs, gl = gmm_inputs()
    op = torch_npu.npu_grouped_matmul_swiglu_quant
    with pytest.raises(TypeError, match="x must be int8"):
        op(x.float().npu(), w.npu(), gl.npu(), ws.npu(), xs.npu())
    with pytest.raises(ValueError, match="do not multiply"):
        op(x[:, :16].npu(), w.npu(), gl.npu(), ws.npu(), xs.npu())
    with pytest.raises(ValueError, match="weight_scale must be"):
        op(x.npu(), w.npu(), gl.npu(), ws[:, :8].npu(), xs.npu())
    with pytest.raises(ValueError, match="5-D FRACTAL_NZ"):
        op(x.npu(), w.reshape(2, 1, 2, 16, 16).npu(), gl.npu(), ws.npu(), xs.npu())
    with pytest.raises(ValueError, match="offset is not supported"):
        op(x.npu(), w.npu(), gl.npu(), ws.npu(), xs.npu(), offset=ws.npu())
    with pytest.raises(ValueError, match="int8 weight takes none"):
        op(x.npu(), w.npu(), gl.npu(), ws.npu(), xs.npu(), bias=ws.npu())
    with pytest.raises(ValueError, match="one entry per expert"):
        op(x.npu(), w.npu(), gl[:1].npu(), ws.npu(), xs.npu())
    with pytest.raises(RuntimeError, match="non-decreasing"):
        op(x.npu(), w.npu(), torch.tensor([8, 4]).npu(), ws.npu(), xs.npu())
        torch.npu.synchronize()


# ---- npu_grouped_matmul_swiglu_quant_v2 ----

@pytest.mark.parametrize("scale_dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("group_list_type", [0, 1])
def test_gmm_swiglu_quant_v2_a8w8(scale_dtype, group_list_type):
    x, w, ws, xs, gl = gmm_inputs(seed=2, scale_dtype=scale_dtype)
    if group_list_type == 1:
        gl = torch.tensor([5, 5], dtype=torch.int64)
    expected = ref.grouped_matmul_swiglu_quant(x, w, gl, ws, xs, group_list_type=group_list_type)
    y, s = torch_npu.npu_grouped_matmul_swiglu_quant_v2(x.npu(), [w.npu()], [ws.npu()], xs.npu(), gl.npu(),
                                                        dequant_dtype=torch.float32,
                                                        group_list_type=group_list_type)
    assert y.shape == (12, 8) and s.shape == (12,)
    assert_quant_close((y.cpu(), s.cpu()), expected)


@pytest.mark.parametrize("dequant_dtype", [torch.float16, torch.bfloat16])
def test_gmm_swiglu_quant_v2_dequant_dtype(dequant_dtype):
    x, w, ws, xs, gl = gmm_inputs(seed=3)
    expected = ref.grouped_matmul_swiglu_quant(x, w, gl, ws, xs, dequant_dtype=dequant_dtype)
    y, s = torch_npu.npu_grouped_matmul_swiglu_quant_v2(x.npu(), [w.npu()], [ws.npu()], xs.npu(), gl.npu(),
                                                        dequant_dtype=dequant_dtype)
    assert_quant_close((y.cpu(), s.cpu()), expected)


def test_gmm_swiglu_quant_v2_a4w4_smooth_scale():
    g = torch.Generator().manual_seed(4)
    m, k, n = 8, 32, 16
    xq = torch.randint(-8, 8, (m, k), generator=g)
    wq = torch.randint(-8, 8, (2, k, n), generator=g)
    x, w = ref.pack_int4_words(xq), ref.pack_int4_words(wq)
    ws = ref.pack_scale_bits(torch.rand(2, n, generator=g) * 0.02 + 0.001)
    xs = torch.rand(m, generator=g) + 0.1
    gl = torch.tensor([3, m], dtype=torch.int64)
    for smooth in (torch.rand(2, n // 2, generator=g) + 0.5, torch.tensor([0.5, 2.0])):
        expected = ref.grouped_matmul_swiglu_quant(x, w, gl, ws, xs, smooth_scale=smooth)
        y, s = torch_npu.npu_grouped_matmul_swiglu_quant_v2(x.npu(), [w.npu()], [ws.npu()], xs.npu(), gl.npu(),
                                                            smooth_scale=smooth.npu())
        assert y.shape == (m, n // 2)
        assert_quant_close((y.cpu(), s.cpu()), expected)


@pytest.mark.parametrize("dequant_mode", [0, 1])
def test_gmm_swiglu_quant_v2_a8w4(dequant_mode):
    g = torch.Generator().manual_seed(5)
    x, _, _, xs, gl = gmm_inputs(seed=5)
    w = ref.pack_int4_words(torch.randint(-8, 8, (2, 32, 16), generator=g))
    shape = (2, 16) if dequant_mode == 0 else (2, 4, 16)
    ws = torch.rand(*shape, generator=g) * 0.02 + 0.001
    assist = ref.a8w4_assist_matrix(w, ws)
    expected = ref.grouped_matmul_swiglu_quant(x, w, gl, ws, xs, assist=assist)
    y, s = torch_npu.npu_grouped_matmul_swiglu_quant_v2(x.npu(), [w.npu()], [ws.npu()], xs.npu(), gl.npu(),
                                                        weight_assist_matrix=[assist.npu()],
                                                        dequant_mode=dequant_mode)
    assert_quant_close((y.cpu(), s.cpu()), expected)


@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_gmm_swiglu_quant_v2_float8_operands(fp8):
    g = torch.Generator().manual_seed(6)
    x = (torch.randn(12, 32, generator=g)).to(fp8)
    w = (torch.randn(2, 32, 16, generator=g) * 0.5).to(fp8)
    ws = torch.rand(2, 16, generator=g) + 0.5
    xs = torch.rand(12, generator=g) + 0.5
    gl = torch.tensor([6, 12], dtype=torch.int64)
    expected = ref.grouped_matmul_swiglu_quant(x, w, gl, ws, xs)
    y, s = torch_npu.npu_grouped_matmul_swiglu_quant_v2(x.npu(), [w.npu()], [ws.npu()], xs.npu(), gl.npu())
    y, s = y.cpu(), s.cpu()
    assert (y.int() - expected[0].int()).abs().max() <= 1
    torch.testing.assert_close(s, expected[1], rtol=1e-4, atol=1e-6)


def test_gmm_swiglu_quant_v2_meta_and_device_op():
    x, w, ws, xs, gl = gmm_inputs()
    y, s = torch.ops.npu.npu_grouped_matmul_swiglu_quant_v2(x.to("meta"), [w.to("meta")], [ws.to("meta")],
                                                            xs.to("meta"), gl.to("meta"))
    assert (y.shape, y.dtype, s.shape, s.dtype) == ((12, 8), torch.int8, (12,), torch.float32)
    before = device_op_count("aclnnGroupedMatmulSwigluQuantV2")
    torch_npu.npu_grouped_matmul_swiglu_quant_v2(x.npu(), [w.npu()], [ws.npu()], xs.npu(), gl.npu(),
                                                 tuning_config=[4])
    torch.npu.synchronize()
    assert device_op_count("aclnnGroupedMatmulSwigluQuantV2") == before + 1


def test_gmm_swiglu_quant_v2_errors():
    x, w, ws, xs, gl = gmm_inputs()
    op = torch_npu.npu_grouped_matmul_swiglu_quant_v2
    nx, nw, nws, nxs, ngl = x.npu(), w.npu(), ws.npu(), xs.npu(), gl.npu()
    chip = "chip number format the software NPU does not have"
    with pytest.raises(ValueError, match=chip):
        op(nx, [nw], [nws], nxs, ngl, x_dtype=HIFLOAT8, weight_dtype=HIFLOAT8)
    with pytest.raises(ValueError, match=chip):
        op(nx, [nw], [nws], nxs, ngl, weight_scale_dtype=FLOAT8_E8M0)
    with pytest.raises(ValueError, match=chip):
        op(nx, [nw], [nws], nxs, ngl, dequant_mode=2)
    with pytest.raises(ValueError, match=chip):
        op(nx, [nw], [nws], nxs, ngl, quant_mode=2)
    with pytest.raises(ValueError, match="float8_e4m3fn, a chip number format"):
        op(nx, [nw], [nws], nxs, ngl, quant_dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="must each hold one tensor"):
        op(nx, [nw, nw], [nws, nws], nxs, ngl)
    with pytest.raises(ValueError, match="bias is not supported"):
        op(nx, [nw], [nws], nxs, ngl, bias=nws)
    with pytest.raises(ValueError, match="applies to A8W4 only"):
        op(nx, [nw], [nws], nxs, ngl, dequant_mode=1)
    with pytest.raises(ValueError, match="needs weight_assist_matrix"):
        op(nx, [ref.pack_int4_words(w.long()[..., :16]).npu()], [nws], nxs, ngl)
    with pytest.raises(ValueError, match="dequant_dtype must be"):
        op(nx, [nw], [nws], nxs, ngl, dequant_dtype=torch.int8)
    with pytest.raises(ValueError, match="group_list_type must be"):
        op(nx, [nw], [nws], nxs, ngl, group_list_type=2)
    with pytest.raises(ValueError, match="smooth_scale must be"):
        op(nx, [nw], [nws], nxs, ngl, smooth_scale=torch.ones(2, 3).npu())
