"""npu_fused_infer_attention_score_v2 against CPU attention written from its documented definition: layouts
(BSH / BSND / BNSD / TND / NTD and the layout-converting outputs), GQA, causal sparse modes, paged KV via a block
table, softmax_lse, learnable sinks; Meta kernel, device-op counter and argument errors."""

import pytest
import torch

import torch_npu
from op_refs import attention_infer_more as ref

OP = "aclnnFusedInferAttentionScoreV4"
TRIU_2048 = torch.ones(2048, 2048, dtype=torch.bool).triu(1)
TOL = {torch.float32: 2e-4, torch.float16: 4e-3, torch.bfloat16: 2.5e-2}


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def check(actual, expected, dtype=torch.float32):
    tol = TOL[dtype]
    torch.testing.assert_close(actual.float().cpu(), expected.float().cpu(), rtol=tol, atol=tol)


def randn(*shape, g, dtype=torch.float32):
    return torch.randn(*shape, generator=g).to(dtype)


fia2 = torch_npu.npu_fused_infer_attention_score_v2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_bnsd_with_lse(dtype):
    b, n, sq, skv, d = 2, 2, 5, 7, 8
    g = torch.Generator().manual_seed(0)
    q, k, v = randn(b, n, sq, d, g=g, dtype=dtype), randn(b, n, skv, d, g=g, dtype=dtype), randn(b, n, skv, d, g=g, dtype=dtype)
    before = device_op_count(OP)
    out, lse = fia2(q.npu(), k.npu(), v.npu(), num_query_heads=n, softmax_scale=0.3, input_layout="BNSD",
                    return_softmax_lse=True)
    torch.npu.synchronize()
    assert device_op_count(OP) == before + 1
    assert out.shape == q.shape and out.dtype == dtype
    assert lse.shape == (b, n, sq, 1) and lse.dtype == torch.float32
    for i in range(b):
        r, r_lse = ref.attend(q[i], k[i], v[i], 0.3)
        check(out[i], r, dtype)
        check(lse[i], r_lse, dtype)
    _, no_lse = fia2(q.npu(), k.npu(), v.npu(), num_query_heads=n, input_layout="BNSD")
    assert no_lse.numel() == 0 and no_lse.dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bsh_gqa_causal_to_bnsd(dtype):
    b, s, n, nkv, d = 2, 6, 4, 2, 8
    g = torch.Generator().manual_seed(1)
    q, k, v = (randn(b, s, h * d, g=g, dtype=dtype) for h in (n, nkv, nkv))
    out, lse = fia2(q.npu(), k.npu(), v.npu(), atten_mask=TRIU_2048.npu(), num_query_heads=n, num_key_value_heads=nkv,
                    softmax_scale=0.4, input_layout="BSH_BNSD", sparse_mode=3, return_softmax_lse=True)
    assert out.shape == (b, n, s, d) and lse.shape == (b, n, s, 1)
    heads = lambda t, i, h: t[i].view(s, h, d).transpose(0, 1)  # noqa: E731
    for i in range(b):
        r, r_lse = ref.attend(heads(q, i, n), heads(k, i, nkv), heads(v, i, nkv), 0.4, ref.causal(s, s))
        check(out[i], r, dtype)
        check(lse[i], r_lse, dtype)


@pytest.mark.parametrize("layout", ["TND", "NTD_TND"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_tnd_learnable_sink(layout, dtype):
    n, d = 2, 8
    lens = [3, 5]
    t = sum(lens)
    g = torch.Generator().manual_seed(2)
    q, k, v = (randn(t, n, d, g=g, dtype=dtype) for _ in range(3))
    sink = randn(n, g=g, dtype=torch.bfloat16)
    to_in = (lambda x: x.transpose(0, 1).contiguous()) if layout == "NTD_TND" else (lambda x: x)  # noqa: E731
    out, lse = fia2(to_in(q).npu(), to_in(k).npu(), to_in(v).npu(), atten_mask=TRIU_2048.npu(),
                    actual_seq_qlen=[3, 8], actual_seq_kvlen=[3, 8], learnable_sink=sink.npu(), num_query_heads=n,
                    softmax_scale=0.5, input_layout=layout, sparse_mode=3, return_softmax_lse=True)
    assert out.shape == (t, n, d) and lse.shape == (t, n, 1)
    start = 0
    for ln in lens:
        part = lambda x: x[start:start + ln].transpose(0, 1)  # noqa: E731
        r, r_lse = ref.attend(part(q), part(k), part(v), 0.5, ref.causal(ln, ln), sink=sink)
        check(part(out), r, dtype)
        check(part(lse), r_lse, dtype)
        start += ln


@pytest.mark.parametrize("layout", ["BSH", "BSND_NBSD"])
def test_sink_in_batch_layouts_without_lse(layout):
    b, s, n, d = 1, 4, 2, 8
    g = torch.Generator().manual_seed(3)
    q4, k4, v4 = (randn(b, s, n, d, g=g) for _ in range(3))
    sink = randn(n, g=g)
    args = (q4.flatten(2), k4.flatten(2), v4.flatten(2)) if layout == "BSH" else (q4, k4, v4)
    out, lse = fia2(*(a.npu() for a in args), learnable_sink=sink.npu(), num_query_heads=n, softmax_scale=0.35,
                    input_layout=layout)
    assert lse.numel() == 0
    r, _ = ref.attend(q4[0].transpose(0, 1), k4[0].transpose(0, 1), v4[0].transpose(0, 1), 0.35, sink=sink)
    if layout == "BSH":
        check(out[0].view(s, n, d).transpose(0, 1), r)
    else:
        assert out.shape == (n, b, s, d)
        check(out[:, 0], r)


def test_paged_decode_bnsd_cache():
    b, n, d, bs = 2, 2, 8, 4
    lens = [6, 3]
    g = torch.Generator().manual_seed(4)
    table = torch.tensor([[2, 0], [1, 3]], dtype=torch.int32)
    k_cache, v_cache = randn(4, n, bs, d, g=g), randn(4, n, bs, d, g=g)
    q = randn(b, n, 1, d, g=g)
    out, lse = fia2(q.npu(), k_cache.npu(), v_cache.npu(), block_table=table.npu(), block_size=bs,
                    actual_seq_kvlen=lens, num_query_heads=n, softmax_scale=0.4, input_layout="BNSD",
                    return_softmax_lse=True)
    assert out.shape == q.shape and lse.shape == (b, n, 1, 1)
    for i, ln in enumerate(lens):
        rows = lambda cache: torch.cat([cache[blk] for blk in table[i].tolist()], 1)[:, :ln]  # noqa: E731
        r, r_lse = ref.attend(q[i], rows(k_cache), rows(v_cache), 0.4)
        check(out[i], r)
        check(lse[i], r_lse)


def test_mla_rope_parts():
    b, n, s, d, dr = 1, 2, 3, 8, 4
    g = torch.Generator().manual_seed(5)
    q, k = randn(b, n, s, d, g=g), randn(b, 1, 5, d, g=g)
    qr, kr = randn(b, n, s, dr, g=g), randn(b, 1, 5, dr, g=g)
    v = randn(b, 1, 5, 6, g=g)
    out, _ = fia2(q.npu(), k.npu(), v.npu(), query_rope=qr.npu(), key_rope=kr.npu(), num_query_heads=n,
                  num_key_value_heads=1, softmax_scale=0.3, input_layout="BNSD")
    assert out.shape == (b, n, s, 6)
    r, _ = ref.attend(torch.cat([q, qr], -1)[0], torch.cat([k, kr], -1)[0], v[0], 0.3)
    check(out[0], r)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_meta(dtype):
    m = lambda *s: torch.empty(*s, device="meta", dtype=dtype)  # noqa: E731
    out, lse = torch.ops.npu.npu_fused_infer_attention_score_v2(m(2, 5, 16), m(2, 7, 8), m(2, 7, 8), num_query_heads=2,
                                                               num_key_value_heads=1, input_layout="BSH_NBSD",
                                                               return_softmax_lse=True)
    assert out.shape == (2, 2, 5, 8) and out.dtype == dtype and out.device.type == "meta"
    assert lse.shape == (2, 2, 5, 1) and lse.dtype == torch.float32
    out, lse = torch.ops.npu.npu_fused_infer_attention_score_v2(m(6, 2, 8), m(6, 2, 8), m(6, 2, 4), num_query_heads=2,
                                                               input_layout="TND")
    assert out.shape == (6, 2, 4) and lse.shape == (0,)
    # Paged [blocks, block_size, H] value: its head size is H / num_key_value_heads.
    out, _ = torch.ops.npu.npu_fused_infer_attention_score_v2(
        m(2, 1, 32), m(4, 16, 16), m(4, 16, 16), block_table=torch.empty(2, 2, dtype=torch.int32, device="meta"),
        num_query_heads=4, num_key_value_heads=2, block_size=16)
    assert out.shape == (2, 1, 32)


def test_bad_inputs():
    q = torch.randn(1, 4, 16).npu()
    with pytest.raises(ValueError, match="input_layout"):
        fia2(q, q, q, num_query_heads=2, input_layout="SBH")
    with pytest.raises(ValueError, match="NSD is not supported"):
        fia2(q, q, q, num_query_heads=2, input_layout="NSD")
    with pytest.raises(ValueError, match="quantized forms"):
        fia2(q, q, q, num_query_heads=2, dequant_scale_query=torch.ones(1).npu())
    with pytest.raises(ValueError, match="quant_scale_out"):
        fia2(q, q, q, num_query_heads=2, quant_scale_out=torch.ones(1).npu())
    with pytest.raises(ValueError, match="query_quant_mode"):
        fia2(q, q, q, num_query_heads=2, query_quant_mode=1)
    qi = torch.zeros(1, 4, 16, dtype=torch.int8).npu()
    with pytest.raises(TypeError, match="chip number formats"):
        fia2(qi, qi, qi, num_query_heads=2)
    with pytest.raises(ValueError, match="learnable_sink must be"):
        fia2(q, q, q, num_query_heads=2, learnable_sink=torch.zeros(3).npu())
    with pytest.raises(ValueError, match="num_query_heads must be positive"):
        fia2(q, q, q, num_query_heads=0)
    with pytest.raises(ValueError, match="query must be 4-D"):
        fia2(q, q, q, num_query_heads=2, input_layout="BNSD")
    with pytest.raises((ValueError, RuntimeError), match="num_key_value_heads"):
        fia2(q, q, q, num_query_heads=4, num_key_value_heads=3)[0].cpu()
