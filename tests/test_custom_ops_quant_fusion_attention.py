"""npu_quant_fusion_attention (block-quantised float8 flash attention) against a CPU reference written from its
definition: every layout, grouped-query heads, both float8 formats, the softmax statistics, the Meta kernel, the
device-op counter and argument errors."""

import pytest
import torch

import torch_npu
from op_refs import quant_fusion_attention as ref


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def make(b=1, n=2, n_kv=2, s1=40, s2=72, d=16, fp8=torch.float8_e4m3fn, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, sq = ref.block_quantize(torch.randn(b, n, s1, d, generator=g), 16, fp8)
    k, sk = ref.block_quantize(torch.randn(b, n_kv, s2, d, generator=g), 32, fp8)
    v, sv = ref.block_quantize(torch.randn(b, n_kv, s2, d, generator=g), 64, fp8)
    return q, k, v, sq, sk, sv


def layout_of(t, layout):
    return ref.from_bnsd(t, layout).contiguous()


def run_npu(q, k, v, sq, sk, sv, n, layout, scale=0.25, **kw):
    return torch_npu.npu_quant_fusion_attention(
        q.npu(), k.npu(), v.npu(), n, layout, d_scale_q=sq.npu(), d_scale_k=sk.npu(), d_scale_v=sv.npu(),
        scale=scale, **kw)


@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH", "SBH"])
@pytest.mark.parametrize("fp8", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_matches_reference(layout, fp8):
    q, k, v, sq, sk, sv = make(fp8=fp8)
    ql, kl, vl = (layout_of(t, layout) for t in (q, k, v))
    before = device_op_count("aclnnQuantFlashAttentionScore")
    out, smax, ssum, sout, seed, offset, numels = run_npu(ql, kl, vl, sq, sk, sv, 2, layout,
                                                          p_scale=torch.ones(1).npu())
    assert device_op_count("aclnnQuantFlashAttentionScore") == before + 1
    want, want_max, want_sum = ref.quant_fusion_attention(ql, kl, vl, 2, layout, sq, sk, sv, 0.25)
    assert out.dtype == torch.float16 and out.shape == ql.shape
    torch.testing.assert_close(out.cpu().float(), want.float(), rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(smax.cpu(), want_max, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ssum.cpu(), want_sum, rtol=1e-5, atol=1e-5)
    assert sout.numel() == 0 and (seed, offset, numels) == (0, 0, 0)


def test_grouped_query_heads():
    q, k, v, sq, sk, sv = make(n=4, n_kv=2)
    out = run_npu(q, k, v, sq, sk, sv, 4, "BNSD")[0]
    want = ref.quant_fusion_attention(q, k, v, 4, "BNSD", sq, sk, sv, 0.25)[0]
    torch.testing.assert_close(out.cpu().float(), want.float(), rtol=2e-3, atol=2e-3)


def test_close_to_unquantised_attention():
    # The quantisation is the only error: the result stays near float32 attention on the original values.
    g = torch.Generator().manual_seed(3)
    x = [torch.randn(1, 2, 64, 16, generator=g) for _ in range(3)]
    (q, sq), (k, sk), (v, sv) = (ref.block_quantize(t, 32) for t in x)
    out = run_npu(q, k, v, sq, sk, sv, 2, "BNSD")[0].cpu().float()
    exact = torch.softmax(x[0] @ x[1].transpose(-2, -1) * 0.25, -1) @ x[2]
    assert (out - exact).abs().max() < 0.1


def test_meta():
    q, k, v, sq, sk, sv = make()
    meta = lambda t: t.to("meta")
    out, smax, ssum, sout, *_ = torch_npu.npu_quant_fusion_attention(
        meta(q), meta(k), meta(v), 2, "BNSD", d_scale_q=meta(sq), d_scale_k=meta(sk), d_scale_v=meta(sv))
    assert out.device.type == "meta" and out.shape == q.shape and out.dtype == torch.float16
    assert smax.shape == (1, 2, 40, 1) and ssum.dtype == torch.float32 and sout.numel() == 0


def test_errors():
    q, k, v, sq, sk, sv = make()
    with pytest.raises(TypeError, match="float8_e4m3fn or float8_e5m2"):
        run_npu(q.half(), k, v, sq, sk, sv, 2, "BNSD")
    with pytest.raises(ValueError, match="input_layout must be"):
        run_npu(q, k, v, sq, sk, sv, 2, "TND")
    with pytest.raises(ValueError, match="chip number format"):
        run_npu(q, k, v, sq, sk, sv, 2, "BNSD", query_dtype=256 + 34)  # hifloat8
    with pytest.raises(TypeError, match="must be float32"):
        run_npu(q, k, v, sq.half(), sk, sv, 2, "BNSD")
    with pytest.raises(RuntimeError, match="blocks"):
        run_npu(q, k, v, sq[:, :, :1].repeat(1, 1, 4, 1), sk, sv, 2, "BNSD")  # 4 blocks cannot split 40 rows
