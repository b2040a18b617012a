"""The inference attention ops (npu_prompt_flash_attention, npu_incre_flash_attention,
npu_fused_infer_attention_score) against attention composed of ATen ops on CPU: padded batches with valid
lengths, GQA, sparse modes, paged KV caches with block tables, TND, MLA rope parts, softmax_lse."""

import pytest
import torch

import torch_npu

NPU = "npu"
TRIU_2048 = torch.ones(2048, 2048, dtype=torch.bool).triu(1)


def attend(q, k, v, scale, masked=None, pse=None):
    """softmax(scale * q k^T + pse, masked) v for one batch: q [N, Sq, D], k / v [Nkv, Skv, D]; also the lse."""
    group = q.shape[0] // k.shape[0]
    k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)
    s = q.float() @ k.float().transpose(-2, -1) * scale
    if pse is not None:
        s = s + pse.float()
    if masked is not None:
        s = s.masked_fill(masked, float("-inf"))
    return torch.softmax(s, -1) @ v.float(), torch.logsumexp(s, -1, keepdim=True)


def check(actual, expected, tol=2e-4):
    torch.testing.assert_close(actual.float().cpu(), expected.float().cpu(), rtol=tol, atol=tol)


def causal(sq, skv, shift=0):
    i, j = torch.arange(sq).view(-1, 1), torch.arange(skv).view(1, -1)
    return j > i + shift


def test_prompt_flash_attention_bsh_padded_gqa():
    b, s, n, nkv, d = 2, 20, 4, 2, 8
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, s, h * d, generator=g) for h in (n, nkv, nkv))
    lens = [20, 13]
    out = torch_npu.npu_prompt_flash_attention(
        q.npu(), k.npu(), v.npu(), atten_mask=causal(s, s).npu(), actual_seq_lengths=lens, actual_seq_lengths_kv=lens,
        num_heads=n, num_key_value_heads=nkv, scale_value=0.3, input_layout="BSH")
    assert out.shape == q.shape
    for i, ln in enumerate(lens):
        heads = lambda t, h: t[i, :ln].view(ln, h, d).transpose(0, 1)  # noqa: E731
        ref, _ = attend(heads(q, n), heads(k, nkv), heads(v, nkv), 0.3, causal(ln, ln))
        check(out[i, :ln].cpu(), ref.transpose(0, 1).reshape(ln, n * d))
        assert out[i, ln:].abs().sum().item() == 0  # rows past the valid length


def test_prompt_flash_attention_bnsd_bsnd_right_down_causal():
    b, n, sq, skv, d = 1, 2, 6, 10, 8
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(b, n, sq, d, generator=g), torch.randn(b, n, skv, d, generator=g), torch.randn(b, n, skv, d, generator=g)
    out = torch_npu.npu_prompt_flash_attention(q.npu(), k.npu(), v.npu(), atten_mask=TRIU_2048.npu(), num_heads=n,
                                               scale_value=0.5, input_layout="BNSD_BSND", sparse_mode=3)
    assert out.shape == (b, sq, n, d)
    ref, _ = attend(q[0], k[0], v[0], 0.5, causal(sq, skv, skv - sq))
    check(out[0].transpose(0, 1), ref)


@pytest.mark.parametrize("paged", [False, True])
def test_incre_flash_attention_decode(paged):
    b, n, nkv, d, bs = 3, 4, 2, 16, 16
    lens = [5, 40, 17]
    g = torch.Generator().manual_seed(2)
    q = torch.randn(b, 1, n * d, generator=g)
    k_full, v_full = torch.randn(b, 48, nkv * d, generator=g), torch.randn(b, 48, nkv * d, generator=g)
    kw = dict(actual_seq_lengths=lens, num_heads=n, num_key_value_heads=nkv, scale_value=0.25, input_layout="BSH")
    if paged:
        # Each sequence's blocks scattered through a cache of 12 blocks.
        per_seq = 3
        table = torch.tensor([[7, 2, 0], [3, 9, 5], [1, 11, 4]], dtype=torch.int32)
        k_cache, v_cache = torch.zeros(12, bs, nkv * d), torch.zeros(12, bs, nkv * d)
        for i in range(b):
            for j in range(per_seq):
                k_cache[table[i, j]] = k_full[i, j * bs:(j + 1) * bs]
                v_cache[table[i, j]] = v_full[i, j * bs:(j + 1) * bs]
        out = torch_npu.npu_incre_flash_attention(q.npu(), k_cache.npu(), v_cache.npu(), block_table=table.npu(),
                                                  block_size=bs, **kw)
    else:
        out = torch_npu.npu_incre_flash_attention(q.npu(), k_full.npu(), v_full.npu(), **kw)
    assert out.shape == q.shape
    for i, ln in enumerate(lens):
        heads = lambda t, h, rows: t[i, :rows].view(rows, h, d).transpose(0, 1)  # noqa: E731
        ref, _ = attend(heads(q, n, 1), heads(k_full, nkv, ln), heads(v_full, nkv, ln), 0.25)
        check(out[i].cpu(), ref.transpose(0, 1).reshape(1, n * d))


def test_fused_infer_attention_score_prefill_lse_and_decode_paged_bnsd_cache():
    b, n, s, d = 2, 2, 9, 8
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(b, s, n, d, generator=g) for _ in range(3))
    out, lse = torch_npu.npu_fused_infer_attention_score(
        q.npu(), k.npu(), v.npu(), atten_mask=TRIU_2048.npu(), num_heads=n, scale=0.4, input_layout="BSND",
        sparse_mode=3, softmax_lse_flag=True)
    assert out.shape == q.shape and lse.shape == (b, n, s, 1) and lse.dtype == torch.float32
    for i in range(b):
        ref, ref_lse = attend(q[i].transpose(0, 1), k[i].transpose(0, 1), v[i].transpose(0, 1), 0.4, causal(s, s))
        check(out[i].transpose(0, 1), ref)
        check(lse[i], ref_lse)
    _, no_lse = torch_npu.npu_fused_infer_attention_score(q.npu(), k.npu(), v.npu(), num_heads=n, input_layout="BSND")
    assert no_lse.numel() == 0
    # Decode from a [blocks, N, block_size, D] cache.
    bs, lens = 4, [6, 3]
    table = torch.tensor([[2, 0], [1, 3]], dtype=torch.int32)
    k_cache, v_cache = torch.randn(4, n, bs, d, generator=g), torch.randn(4, n, bs, d, generator=g)
    qd = torch.randn(b, n, 1, d, generator=g)
    out, _ = torch_npu.npu_fused_infer_attention_score(
        qd.npu(), k_cache.npu(), v_cache.npu(), block_table=table.npu(), block_size=bs, actual_seq_lengths_kv=lens,
        num_heads=n, scale=0.4, input_layout="BNSD")
    for i, ln in enumerate(lens):
        rows = lambda cache: torch.cat([cache[blk] for blk in table[i].tolist()], 1)[:, :ln]  # noqa: E731
        ref, _ = attend(qd[i], rows(k_cache), rows(v_cache), 0.4)
        check(out[i], ref)


def test_fused_infer_attention_score_tnd_and_mla_rope():
    n, d, dr = 2, 8, 4
    g = torch.Generator().manual_seed(4)
    lens = [3, 7]
    t = sum(lens)
    q, k, v = (torch.randn(t, n, d, generator=g) for _ in range(3))
    out, lse = torch_npu.npu_fused_infer_attention_score(
        q.npu(), k.npu(), v.npu(), atten_mask=TRIU_2048.npu(), actual_seq_lengths=[3, 10], actual_seq_lengths_kv=[3, 10],
        num_heads=n, scale=0.5, input_layout="TND", sparse_mode=3, softmax_lse_flag=True)
    assert lse.shape == (t, n, 1)
    start = 0
    for ln in lens:
        part = lambda x: x[start:start + ln].transpose(0, 1)  # noqa: E731
        ref, ref_lse = attend(part(q), part(k), part(v), 0.5, causal(ln, ln))
        check(out[start:start + ln].transpose(0, 1), ref)
        check(lse[start:start + ln].transpose(0, 1), ref_lse)
        start += ln
    # MLA: rope parts of query / key add to the scores; the value keeps its own head size.
    b, s = 1, 5
    qb, kb = torch.randn(b, n, s, d, generator=g), torch.randn(b, 1, 6, d, generator=g)
    qr, kr = torch.randn(b, n, s, dr, generator=g), torch.randn(b, 1, 6, dr, generator=g)
    vb = torch.randn(b, 1, 6, 6, generator=g)
    out, _ = torch_npu.npu_fused_infer_attention_score(
        qb.npu(), kb.npu(), vb.npu(), query_rope=qr.npu(), key_rope=kr.npu(), num_heads=n, num_key_value_heads=1,
        scale=0.3, input_layout="BNSD")
    assert out.shape == (b, n, s, 6)
    ref, _ = attend(torch.cat([qb, qr], -1)[0], torch.cat([kb, kr], -1)[0], vb[0], 0.3)
    check(out[0], ref)


def test_meta_compile_and_errors():
    m = lambda *s: torch.empty(*s, device="meta")  # noqa: E731
    assert torch.ops.npu.npu_prompt_flash_attention(m(2, 5, 16), m(2, 5, 16), m(2, 5, 16), num_heads=2).shape == (2, 5, 16)
    out, lse = torch.ops.npu.npu_fused_infer_attention_score(m(1, 2, 5, 8), m(1, 2, 5, 8), m(1, 2, 5, 8), num_heads=2,
                                                             input_layout="BNSD_NBSD", softmax_lse_flag=True)
    assert out.shape == (2, 1, 5, 8) and lse.shape == (1, 2, 5, 1)
    q = torch.randn(1, 4, 16).npu()
    fn = torch.compile(lambda a: torch_npu.npu_fused_infer_attention_score(a, a, a, num_heads=2, scale=0.25)[0],
                       backend="aot_eager", fullgraph=True)
    check(fn(q), torch_npu.npu_fused_infer_attention_score(q, q, q, num_heads=2, scale=0.25)[0])
    with pytest.raises(ValueError, match="input_layout"):
        torch_npu.npu_fused_infer_attention_score(q, q, q, num_heads=2, input_layout="SBH")
    with pytest.raises(RuntimeError, match="quant_scale2"):
        torch_npu.npu_fused_infer_attention_score(q, q, q, num_heads=2, quant_scale2=torch.ones(1).npu())[0].cpu()
    with pytest.raises((ValueError, RuntimeError), match="num_key_value_heads"):
        torch_npu.npu_prompt_flash_attention(q, q, q, num_heads=4, num_key_value_heads=3)[0].cpu()


def test_device_ops_are_named():
    count = lambda name: torch.npu.op_stats().get(name, {}).get("device_op", 0)  # noqa: E731
    names = ["aclnnPromptFlashAttentionV3", "aclnnIncreFlashAttentionV4", "aclnnFusedInferAttentionScoreV3"]
    before = [count(x) for x in names]
    q = torch.randn(1, 1, 16).npu()
    torch_npu.npu_prompt_flash_attention(q, q, q, num_heads=2)
    torch_npu.npu_incre_flash_attention(q, q, q, num_heads=2)
    torch_npu.npu_fused_infer_attention_score(q, q, q, num_heads=2)
    torch.npu.synchronize()
    assert [count(x) - c for x, c in zip(names, before)] == [1, 1, 1]
