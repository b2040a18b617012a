"""Matrix-product variants of LLM inference against CPU references written from their definitions
(custom_op_refs.py): npu_transpose_batchmatmul (permuted operands, result split along N, int8 quantisation by
float or npu_trans_quant_param scales, an NZ weight), npu_batch_gather_matmul / npu_batch_gather_matmul_ (LoRA BGMV
with and without weight_a, "no adapter" rows, column windows, the in-place form) and npu_fused_matmul (every
fused_op_type, bias, broadcast batches); float32 / float16 / bfloat16, Meta shapes, device ops and clear errors."""

import pytest
import torch

import custom_op_refs as shared_ref
from op_refs import llm_ops as ref
import torch_npu

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1e-2)}


def count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def close(got, expected):
    rtol, atol = TOL[expected.dtype]
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected, rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------- npu_transpose_batchmatmul

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("perms", [((1, 0, 2), (0, 1, 2)), ((0, 1, 2), (0, 1, 2)), ((1, 0, 2), (0, 2, 1))])
def test_transpose_batchmatmul(dtype, perms):
    g = torch.Generator().manual_seed(0)
    m, k, n, b = 5, 32, 16, 3
    perm_x1, perm_x2 = perms
    x1 = torch.randn((m, b, k) if perm_x1 == (1, 0, 2) else (b, m, k), generator=g).to(dtype)
    x2 = torch.randn((b, k, n) if perm_x2 == (0, 1, 2) else (b, n, k), generator=g).to(dtype)
    got = torch_npu.npu_transpose_batchmatmul(x1.npu(), x2.npu(), perm_x1=list(perm_x1), perm_x2=list(perm_x2),
                                              perm_y=[1, 0, 2])
    assert got.shape == (m, b, n)
    close(got, ref.transpose_batchmatmul(x1, x2, perm_x1=perm_x1, perm_x2=perm_x2))
    # batch_split_factor: the (M, B * N) result cut into slices along N, stacked first.
    got = torch_npu.npu_transpose_batchmatmul(x1.npu(), x2.npu(), perm_x1=list(perm_x1), perm_x2=list(perm_x2),
                                              batch_split_factor=4)
    assert got.shape == (4, m, b * n // 4)
    close(got, ref.transpose_batchmatmul(x1, x2, perm_x1=perm_x1, perm_x2=perm_x2, batch_split_factor=4))


def test_transpose_batchmatmul_quantised_and_nz_weight():
    g = torch.Generator().manual_seed(1)
    m, k, n, b = 4, 32, 16, 2
    x1, x2 = torch.randn(m, b, k, generator=g).half(), torch.randn(b, k, n, generator=g).half()
    scale = torch.rand(b * n, generator=g) * 2 + 0.5
    for s in (scale, shared_ref.trans_quant_param(scale, round_mode=1)):  # float32, or npu_trans_quant_param's int64
        got = torch_npu.npu_transpose_batchmatmul(x1.npu(), x2.npu(), scale=s.npu(), perm_x1=[1, 0, 2])
        assert got.dtype == torch.int8 and got.shape == (m, 1, b * n)
        expected = ref.transpose_batchmatmul(x1, x2, scale=s, perm_x1=(1, 0, 2))
        assert (got.cpu().int() - expected.int()).abs().max() <= 1  # float32 sums may round the other way
        assert expected.abs().max() > 5  # the scales keep values in range: the check compares real numbers
    # An NZ (fractal) weight gives the same product.
    x2_nz = torch_npu.npu_format_cast(x2.npu(), 29)
    got = torch_npu.npu_transpose_batchmatmul(x1.npu(), x2_nz, perm_x1=[1, 0, 2])
    close(got, ref.transpose_batchmatmul(x1, x2, perm_x1=(1, 0, 2)))


def test_transpose_batchmatmul_meta_device_op_and_errors():
    meta = torch.ops.npu.npu_transpose_batchmatmul(torch.empty(7, 3, 32, device="meta", dtype=torch.half),
                                                   torch.empty(3, 32, 16, device="meta", dtype=torch.half),
                                                   perm_x1=[1, 0, 2], batch_split_factor=2)
    assert meta.shape == (2, 7, 24) and meta.dtype == torch.half
    meta = torch.ops.npu.npu_transpose_batchmatmul(torch.empty(7, 3, 32, device="meta"),
                                                   torch.empty(3, 32, 16, device="meta"),
                                                   scale=torch.empty(48, device="meta", dtype=torch.int64),
                                                   perm_x1=[1, 0, 2])
    assert meta.shape == (7, 1, 48) and meta.dtype == torch.int8
    x1, x2 = torch.randn(4, 2, 16).npu(), torch.randn(2, 16, 8).npu()
    before = count("aclnnTransposeBatchMatMul")
    torch_npu.npu_transpose_batchmatmul(x1, x2, perm_x1=[1, 0, 2])
    torch.npu.synchronize()
    assert count("aclnnTransposeBatchMatMul") == before + 1
    with pytest.raises(ValueError, match="perm_x1 should be"):
        torch_npu.npu_transpose_batchmatmul(x1, x2, perm_x1=[1, 1, 2])
    with pytest.raises(ValueError, match="perm_y should be"):
        torch_npu.npu_transpose_batchmatmul(x1, x2, perm_x1=[1, 0, 2], perm_y=[0, 1, 2])
    with pytest.raises(TypeError, match="input's type supported for float16, float32 and bfloat16"):
        torch_npu.npu_transpose_batchmatmul(x1.long(), x2, perm_x1=[1, 0, 2])
    with pytest.raises(ValueError, match="do not multiply"):
        torch_npu.npu_transpose_batchmatmul(x1, torch.randn(2, 8, 8).npu(), perm_x1=[1, 0, 2])
    with pytest.raises(ValueError, match="bias is not supported"):
        torch_npu.npu_transpose_batchmatmul(x1, x2, bias=torch.zeros(8).npu(), perm_x1=[1, 0, 2])


# ------------------------------------------------------------------------------------------ npu_batch_gather_matmul

def _lora(dtype, g, tokens=6, h1=32, rank=16, h2=24, columns=40, adapters=3, layers=2, with_a=True):
    y = torch.randn(tokens, columns, generator=g).to(dtype)
    x = torch.randn(tokens, h1 if with_a else rank, generator=g).to(dtype)
    wb = (torch.randn(adapters, layers, h2, rank, generator=g) * 0.3).to(dtype)
    wa = (torch.randn(adapters, layers, rank, h1, generator=g) * 0.3).to(dtype) if with_a else None
    indices = torch.tensor([0, 2, -1, 1, 3, 0][:tokens], dtype=torch.int32)  # -1 and 3 (= adapters): no adapter
    return y, x, wb, indices, wa


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("with_a", [True, False])
def test_batch_gather_matmul(dtype, with_a):
    g = torch.Generator().manual_seed(2)
    y, x, wb, indices, wa = _lora(dtype, g, with_a=with_a)
    kwargs = dict(layer_idx=1, scale=0.5, y_offset=8, y_slice_size=24)
    expected = ref.batch_gather_matmul(y, x, wb, indices, wa, **kwargs)
    y_npu = y.npu()
    got = torch_npu.npu_batch_gather_matmul(y_npu, x.npu(), wb.npu(), indices.npu(),
                                            wa.npu() if wa is not None else None, **kwargs)
    close(got, expected)
    assert torch.equal(y_npu.cpu(), y)  # the functional form leaves y alone
    assert torch.equal(got.cpu()[2], y[2]) and torch.equal(got.cpu()[4], y[4])  # no adapter: row unchanged
    assert torch.equal(got.cpu()[:, :8], y[:, :8])  # columns outside the window unchanged
    out = torch_npu.npu_batch_gather_matmul_(y_npu, x.npu(), wb.npu(), indices.npu(),
                                             wa.npu() if wa is not None else None, **kwargs)
    assert out.data_ptr() == y_npu.data_ptr()
    close(y_npu, expected)


def test_batch_gather_matmul_whole_row_default_slice():
    g = torch.Generator().manual_seed(3)
    y, x, wb, indices, wa = _lora(torch.float16, g, h2=40)
    got = torch_npu.npu_batch_gather_matmul(y.npu(), x.npu(), wb.npu(), indices.npu(), wa.npu(), scale=2.0)
    close(got, ref.batch_gather_matmul(y, x, wb, indices, wa, scale=2.0))


def test_batch_gather_matmul_meta_device_op_and_errors():
    g = torch.Generator().manual_seed(4)
    y, x, wb, indices, wa = _lora(torch.float16, g)
    meta = torch.ops.npu.npu_batch_gather_matmul(y.to("meta"), x.to("meta"), wb.to("meta"), indices.to("meta"),
                                                 wa.to("meta"), y_offset=8, y_slice_size=24)
    assert meta.shape == y.shape and meta.dtype == y.dtype
    before = count("aclnnAddLora")
    torch_npu.npu_batch_gather_matmul(y.npu(), x.npu(), wb.npu(), indices.npu(), wa.npu(), y_offset=8,
                                      y_slice_size=24)
    torch.npu.synchronize()
    assert count("aclnnAddLora") == before + 1
    with pytest.raises(ValueError, match="must equal the updated slice"):
        torch_npu.npu_batch_gather_matmul(y.npu(), x.npu(), wb.npu(), indices.npu(), wa.npu())
    with pytest.raises(ValueError, match="layer_idx must be in"):
        torch_npu.npu_batch_gather_matmul(y.npu(), x.npu(), wb.npu(), indices.npu(), wa.npu(), layer_idx=2,
                                          y_slice_size=24)
    with pytest.raises(TypeError, match="share one dtype"):
        torch_npu.npu_batch_gather_matmul(y.float().npu(), x.npu(), wb.npu(), indices.npu(), wa.npu(),
                                          y_slice_size=24)


# ----------------------------------------------------------------------------------------------- npu_fused_matmul

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fused_op_type", ["", "add", "mul", "gelu_erf", "gelu_tanh"])
def test_fused_matmul(dtype, fused_op_type):
    g = torch.Generator().manual_seed(5)
    x1, x2 = torch.randn(2, 16, 48, generator=g).to(dtype), torch.randn(48, 16, generator=g).to(dtype)
    x3 = torch.randn(16, 16, generator=g).to(dtype) if fused_op_type in ("add", "mul") else None
    bias = torch.randn(16, generator=g).to(dtype)
    for b in (None, bias):
        got = torch_npu.npu_fused_matmul(x1.npu(), x2.npu(), bias=b.npu() if b is not None else None,
                                         x3=x3.npu() if x3 is not None else None, fused_op_type=fused_op_type)
        close(got, ref.fused_matmul(x1, x2, b, x3, fused_op_type))


def test_fused_matmul_16cast32_and_broadcast():
    g = torch.Generator().manual_seed(6)
    x1, x2 = torch.randn(3, 1, 8, 32, generator=g).half(), torch.randn(2, 32, 8, generator=g).half()
    got = torch_npu.npu_fused_matmul(x1.npu(), x2.npu(), fused_op_type="16cast32")
    assert got.dtype == torch.float32 and got.shape == (3, 2, 8, 8)
    close(got, ref.fused_matmul(x1, x2, fused_op_type="16cast32"))


def test_fused_matmul_meta_device_op_and_errors():
    meta = torch.ops.npu.npu_fused_matmul(torch.empty(4, 1, 8, 32, device="meta", dtype=torch.bfloat16),
                                          torch.empty(3, 32, 8, device="meta", dtype=torch.bfloat16),
                                          x3=torch.empty(8, device="meta", dtype=torch.bfloat16),
                                          fused_op_type="mul")
    assert meta.shape == (4, 3, 8, 8) and meta.dtype == torch.bfloat16
    x1, x2 = torch.randn(4, 8).npu(), torch.randn(8, 4).npu()
    before = count("aclnnFusedMatmul")
    torch_npu.npu_fused_matmul(x1, x2, fused_op_type="gelu_tanh")
    torch.npu.synchronize()
    assert count("aclnnFusedMatmul") == before + 1
    with pytest.raises(ValueError, match="there must be an x3 for add and mul"):
        torch_npu.npu_fused_matmul(x1, x2, fused_op_type="add")
    with pytest.raises(ValueError, match="there is no x3"):
        torch_npu.npu_fused_matmul(x1, x2, x3=torch.randn(4, 4).npu(), fused_op_type="gelu_erf")
    with pytest.raises(ValueError, match="fused_op_type must be"):
        torch_npu.npu_fused_matmul(x1, x2, fused_op_type="relu6")
    with pytest.raises(TypeError, match="share one dtype"):
        torch_npu.npu_fused_matmul(x1, x2.half(), fused_op_type="")
