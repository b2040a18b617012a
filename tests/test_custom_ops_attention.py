"""npu_fusion_attention against a CPU reference composed of ATen ops: every layout, sparse modes 0-8, TND
variable lengths, pse, GQA, sinks, dropout, statistics and all gradients; transformers' exact call patterns."""

import math

import pytest
import torch

import torch_npu
from test_custom_ops import close

NPU = "npu"
TRIU_2048 = torch.ones(2048, 2048, dtype=torch.bool).triu(1)  # the compressed mask of the causal modes


def to_layout(t, layout):
    """(B, N, S, D) -> the given layout."""
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.permute(0, 2, 1, 3).contiguous()
    if layout == "BSH":
        return t.permute(0, 2, 1, 3).flatten(2).contiguous()
    return t.permute(2, 0, 1, 3).flatten(2).contiguous()  # SBH


def reference(q, k, v, scale, masked=None, pse=None, sink=None, drop=None, keep_prob=1.0):
    """softmax(scale * (q k^T + pse), masked) v on (B, N, S, D) float tensors; `masked` True = masked out,
    broadcast over (B, N); `sink` [N] joins each row's softmax as an extra logit; `drop` a 0/1 keep mask."""
    n, n_kv = q.shape[1], k.shape[1]
    if n_kv != n:
        k, v = k.repeat_interleave(n // n_kv, 1), v.repeat_interleave(n // n_kv, 1)
    s = q.float() @ k.float().transpose(-2, -1)
    if pse is not None:
        s = s + pse.float()
    s = s * scale
    if masked is not None:
        s = s.masked_fill(masked, float("-inf"))
    if sink is not None:
        col = sink.float().view(1, -1, 1, 1).expand(s.shape[0], -1, s.shape[2], 1)
        p = torch.softmax(torch.cat([s, col], -1), -1)[..., :-1]
    else:
        p = torch.softmax(s, -1)
    p = torch.nan_to_num(p)  # fully masked rows give 0
    if drop is not None:
        p = p * drop / keep_prob
    return p @ v.float()


def band(sq, skv, shift, pre, nxt):
    """True where key j is outside [i + shift - pre, i + shift + next]."""
    i, j = torch.arange(sq).view(-1, 1), torch.arange(skv).view(1, -1)
    return (j > i + shift + nxt) | (j < i + shift - pre)


def run(q, k, v, layout, grad, **kw):
    """npu_fusion_attention on npu copies in `layout`, forward and backward; returns (out, grads, result)."""
    heads = q.shape[1]
    xs = [to_layout(t, layout).to(NPU).requires_grad_(True) for t in (q, k, v)]
    extra = {name: val.to(NPU).requires_grad_(val.is_floating_point() and name in ("pse", "sink"))
             if isinstance(val, torch.Tensor) else val for name, val in kw.items()}
    res = torch_npu.npu_fusion_attention(*xs, heads, layout, **extra)
    res[0].backward(to_layout(grad, layout).to(NPU))
    grads = [x.grad for x in xs] + [extra[n].grad for n in ("pse", "sink") if extra.get(n) is not None]
    return res[0], grads, res


def expect(q, k, v, grad, layout, dtype=torch.float32, **ref_kw):
    """Reference output and gradients (of q, k, v and pse / sink when given) in `layout`."""
    xs = [t.clone().requires_grad_(True) for t in (q, k, v)]
    extra = {n: t.clone().requires_grad_(True) for n, t in ref_kw.items() if isinstance(t, torch.Tensor) and
             t.is_floating_point() and n in ("pse", "sink")}
    out = reference(*xs, **{**ref_kw, **extra})
    out.backward(grad.float())
    grads = [to_layout(x.grad, layout) for x in xs] + [extra[n].grad for n in ("pse", "sink") if n in extra]
    return to_layout(out.detach(), layout), grads


def qkv(b, n, sq, skv, d, n_kv=None, dv=None, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    n_kv = n_kv or n
    return (torch.randn(b, n, sq, d, generator=g).to(dtype), torch.randn(b, n_kv, skv, d, generator=g).to(dtype),
            torch.randn(b, n_kv, skv, dv or d, generator=g).to(dtype), torch.randn(b, n, sq, dv or d, generator=g))


def check(actual, expected, dtype=torch.float32):
    tol = {torch.float32: (2e-4, 2e-4), torch.float16: (1e-2, 1e-2), torch.bfloat16: (4e-2, 4e-2)}[dtype]
    torch.testing.assert_close(actual.detach().float().cpu(), expected.float().cpu(), rtol=tol[0], atol=tol[1])


@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH", "SBH"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_causal_layouts_and_dtypes(layout, dtype):
    # Lengths across the kernel's 64-row and 256-key blocks; Skv > Sq: the right-down diagonal shifts.
    q, k, v, grad = qkv(2, 2, 70, 300, 16, dtype=dtype)
    scale = 16 ** -0.5
    out, grads, _ = run(q, k, v, layout, grad.to(dtype), atten_mask=TRIU_2048, scale=scale, sparse_mode=3)
    ref_out, ref_grads = expect(q.float(), k.float(), v.float(), grad.to(dtype), layout, scale=scale,
                                masked=band(70, 300, 230, 10 ** 9, 0))
    assert out.dtype == dtype and out.shape == to_layout(q, layout).shape
    check(out, ref_out, dtype)
    for a, b in zip(grads, ref_grads):
        assert a.dtype == dtype
        check(a, b, dtype)


def sparse_case(mode, b, sq, skv, pre, nxt, prefix):
    """(atten_mask to pass, reference mask [B, 1, Sq, Skv]) for a sparse mode, as torch_npu documents it."""
    if mode == 0:
        explicit = torch.rand(b, 1, sq, skv, generator=torch.Generator().manual_seed(5)) < 0.2
        return explicit, explicit | band(sq, skv, 0, pre, nxt)
    if mode == 1:
        explicit = torch.rand(sq, skv, generator=torch.Generator().manual_seed(6)) < 0.3
        return explicit, explicit.expand(b, 1, sq, skv)
    if mode == 2:
        return TRIU_2048, band(sq, skv, 0, 10 ** 9, 0).expand(b, 1, sq, skv)
    if mode == 3:
        return TRIU_2048, band(sq, skv, skv - sq, 10 ** 9, 0).expand(b, 1, sq, skv)
    if mode == 4:
        return TRIU_2048, band(sq, skv, skv - sq, pre, nxt).expand(b, 1, sq, skv)
    # Prefix: right-down causal, and the first prefix[b] keys of every row.
    j = torch.arange(skv).view(1, -1)
    masked = torch.stack([band(sq, skv, skv - sq, 10 ** 9, 0) & (j >= p) for p in prefix]).unsqueeze(1)
    if mode == 5:
        return masked, masked
    compressed = torch.ones(3072, 2048, dtype=torch.bool).triu(1)
    return compressed, masked


@pytest.mark.parametrize("mode", range(7))
def test_sparse_modes(mode):
    b, n, sq, skv = 2, 2, 40, 90
    q, k, v, grad = qkv(b, n, sq, skv, 8, seed=mode)
    pre, nxt, prefix = 30, 5, [7, 20]
    atten_mask, masked = sparse_case(mode, b, sq, skv, pre, nxt, prefix)
    out, grads, _ = run(q, k, v, "BNSD", grad, atten_mask=atten_mask, scale=0.3, sparse_mode=mode,
                        pre_tockens=pre, next_tockens=nxt, prefix=prefix)
    ref_out, ref_grads = expect(q, k, v, grad, "BNSD", scale=0.3, masked=masked)
    check(out, ref_out)
    for a, e in zip(grads, ref_grads):
        check(a, e)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", ["odd_tail_band", "gqa_wide_heads", "explicit_mask", "prefix"])
def test_reduced_precision_kernel_paths(dtype, case):
    # bfloat16 / float16 take the packed-operand path where the CPU has matrix units: key blocks with
    # an odd tail (padded to even), head sizes over one 64-column panel and value sizes of their own,
    # grouped-query heads, and each row's visible run of keys cut out of a band; an explicit or
    # prefix mask takes the masked path.
    b, n, n_kv, sq, skv, d, dv = {"odd_tail_band": (1, 2, 2, 150, 301, 64, 64),
                                  "gqa_wide_heads": (2, 4, 2, 130, 260, 128, 72),
                                  "explicit_mask": (1, 2, 1, 64, 257, 64, 64),
                                  "prefix": (2, 2, 2, 40, 300, 32, 32)}[case]
    q, k, v, grad = qkv(b, n, sq, skv, d, n_kv=n_kv, dv=dv, seed=3, dtype=dtype)
    mode, pre, nxt, prefix = {"odd_tail_band": (4, 100, 7, None), "gqa_wide_heads": (3, 0, 0, None),
                              "explicit_mask": (0, 2 ** 31 - 1, 2 ** 31 - 1, None),
                              "prefix": (5, 0, 0, [3, 250])}[case]
    if mode == 0:
        atten_mask = torch.rand(sq, skv, generator=torch.Generator().manual_seed(1)) < 0.3
        masked = atten_mask
    else:
        atten_mask, masked = sparse_case(mode, b, sq, skv, pre, nxt, prefix or [0] * b)
    out, grads, _ = run(q, k, v, "BNSD", grad.to(dtype), atten_mask=atten_mask, scale=d ** -0.5,
                        sparse_mode=mode, pre_tockens=pre, next_tockens=nxt, prefix=prefix)
    ref_out, ref_grads = expect(q.float(), k.float(), v.float(), grad.to(dtype), "BNSD", scale=d ** -0.5,
                                masked=masked)
    check(out, ref_out, dtype)
    for a, e in zip(grads, ref_grads):
        check(a, e, dtype)


def test_without_a_mask_every_mode_computes_in_full():
    q, k, v, grad = qkv(1, 2, 20, 20, 8, seed=9)
    ref_out, _ = expect(q, k, v, grad, "BNSD", scale=0.5)
    for mode in (0, 2, 3, 4):
        out = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 2, "BNSD", scale=0.5, sparse_mode=mode,
                                             pre_tockens=1, next_tockens=0)[0]
        check(out, ref_out)


def tnd(seqs_q, seqs_kv, n, n_kv, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(sum(seqs_q), n, d, generator=g)
    k = torch.randn(sum(seqs_kv), n_kv, d, generator=g)
    v = torch.randn(sum(seqs_kv), n_kv, d, generator=g)
    grad = torch.randn(sum(seqs_q), n, d, generator=g)
    cum = lambda xs: [sum(xs[:i + 1]) for i in range(len(xs))]
    return q, k, v, grad, cum(seqs_q), cum(seqs_kv)


def tnd_reference(q, k, v, grad, seqs_q, seqs_kv, scale, mask_of):
    """Each sequence on its own through the reference, with mask_of(index, sq, skv)."""
    xs = [t.clone().requires_grad_(True) for t in (q, k, v)]
    outs, iq, ikv = [], 0, 0
    for idx, (sq, skv) in enumerate(zip(seqs_q, seqs_kv)):
        bnsd = lambda t, a, l: t[a:a + l].permute(1, 0, 2).unsqueeze(0)
        o = reference(bnsd(xs[0], iq, sq), bnsd(xs[1], ikv, skv), bnsd(xs[2], ikv, skv), scale,
                      masked=mask_of(idx, sq, skv))
        outs.append(o[0].permute(1, 0, 2))
        iq, ikv = iq + sq, ikv + skv
    out = torch.cat(outs)
    out.backward(grad)
    return out.detach(), [x.grad for x in xs]


@pytest.mark.parametrize("mode", [0, 2, 3, 4, 6, 7, 8])
def test_tnd_varlen(mode):
    seqs_q, seqs_kv = [5, 0, 70, 33], [9, 0, 80, 33]
    q, k, v, grad, cum_q, cum_kv = tnd(seqs_q, seqs_kv, 4, 2, 16, seed=mode)
    pre, nxt = 20, 3
    first, last = 0, 3  # the first / last non-empty sequences

    def mask_of(i, sq, skv):
        if mode == 0:
            return None  # no mask given: full attention
        if mode == 2 or (mode == 8 and i != first):
            return band(sq, skv, 0, 10 ** 9, 0)
        if mode == 4 or (mode in (7, 8) and i == (last if mode == 7 else first)):
            return band(sq, skv, skv - sq, pre, nxt)
        if mode == 6:
            j = torch.arange(skv).view(1, -1)
            return band(sq, skv, skv - sq, 10 ** 9, 0) & (j >= [3, 0, 10, 40][i])
        return band(sq, skv, skv - sq, 10 ** 9, 0)

    kw = {} if mode == 0 else {"atten_mask": (TRIU_2048 if mode != 6 else torch.ones(3072, 2048).bool().triu(1)).npu()}
    if mode == 6:
        kw["prefix"] = [3, 0, 10, 40]
    xs = [t.npu().requires_grad_(True) for t in (q, k, v)]
    res = torch_npu.npu_fusion_attention(*xs, 4, "TND", scale=0.25, sparse_mode=mode, pre_tockens=pre,
                                         next_tockens=nxt, actual_seq_qlen=cum_q, actual_seq_kvlen=cum_kv, **kw)
    res[0].backward(grad.npu())
    ref_out, ref_grads = tnd_reference(q, k, v, grad, seqs_q, seqs_kv, 0.25, mask_of)
    check(res[0], ref_out)
    for a, e in zip(xs, ref_grads):
        check(a.grad, e)
    assert res[1].shape == (sum(seqs_q), 4, 8) and res[6] == 4 * sum(a * b for a, b in zip(seqs_q, seqs_kv))


def test_statistics_and_softmax_layout():
    q, k, v, _ = qkv(2, 3, 10, 12, 8, seed=4)
    res = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 3, "BNSD", scale=0.5)
    s = (q @ k.transpose(-2, -1)) * 0.5
    row_max = s.amax(-1, keepdim=True)
    row_sum = (s - row_max).exp().sum(-1, keepdim=True)
    assert res[1].shape == (2, 3, 10, 8) and res[1].dtype == torch.float32
    check(res[1], row_max.expand(-1, -1, -1, 8))
    check(res[2], row_sum.expand(-1, -1, -1, 8))
    assert res[3].numel() == 0 and res[4:] == (0, 0, 2 * 3 * 10 * 12)
    # TND: N-major in memory by default, token-major with softmax_layout="TND".
    tq, tk, tv, _, cq, ckv = tnd([4, 6], [4, 6], 2, 2, 8, seed=5)
    args = (tq.npu(), tk.npu(), tv.npu(), 2, "TND")
    kw = dict(scale=0.5, actual_seq_qlen=cq, actual_seq_kvlen=ckv)
    ntd = torch_npu.npu_fusion_attention(*args, **kw)
    tnd_stats = torch_npu.npu_fusion_attention(*args, softmax_layout="TND", **kw)
    check(ntd[0], tnd_stats[0])
    assert torch.equal(ntd[1].cpu().reshape(-1), tnd_stats[1].cpu().permute(1, 0, 2).reshape(-1))
    # The grads read the statistics in the layout they were made in.
    for layout, r in (("", ntd), ("TND", tnd_stats)):
        g = torch_npu.npu_fusion_attention_grad(*args[:3], torch.ones_like(r[0]), 2, "TND", softmax_max=r[1],
                                                softmax_sum=r[2], attention_in=r[0], scale_value=0.5,
                                                actual_seq_qlen=cq, actual_seq_kvlen=ckv, softmax_layout=layout)
        base = torch_npu.npu_fusion_attention_grad(*args[:3], torch.ones_like(r[0]), 2, "TND", scale_value=0.5,
                                                   actual_seq_qlen=cq, actual_seq_kvlen=ckv)
        for a, e in zip(g[:3], base[:3]):
            check(a, e)


@pytest.mark.parametrize("pse_shape", [(2, 4, 30, 50), (1, 4, 30, 50), (2, 1, 30, 50), (1, 1, 1, 50)])
def test_pse_gqa_and_its_gradient(pse_shape):
    q, k, v, grad = qkv(2, 4, 30, 50, 8, n_kv=2, seed=1)
    pse = torch.randn(*pse_shape)
    out, grads, _ = run(q, k, v, "BSND", grad, pse=pse, scale=0.3)
    ref_out, ref_grads = expect(q, k, v, grad, "BSND", pse=pse, scale=0.3)
    check(out, ref_out)
    assert grads[3].shape == pse.shape
    for a, e in zip(grads, ref_grads):
        check(a, e)


def test_compressed_alibi_pse():
    # Sq > 1024 with only the last 1024 rows of an alibi bias, under a causal mask.
    sq = 1100
    q, k, v, grad = qkv(1, 2, sq, sq, 8, seed=11)
    slopes = torch.tensor([0.5, 0.25]).view(1, 2, 1, 1)
    i, j = torch.arange(sq).view(-1, 1), torch.arange(sq).view(1, -1)
    full = -(slopes * (i - j).abs()).float()
    out = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 2, "BNSD", pse=full[:, :, -1024:].npu(),
                                         atten_mask=TRIU_2048.npu(), scale=0.2, sparse_mode=3)[0]
    check(out, reference(q, k, v, 0.2, masked=band(sq, sq, 0, 10 ** 9, 0), pse=full))


def test_sink():
    q, k, v, grad = qkv(2, 4, 20, 20, 8, n_kv=2, seed=12)
    sink = torch.linspace(-1, 1, 4)
    out, grads, res = run(q, k, v, "BSND", grad, sink=sink, scale=0.4, atten_mask=TRIU_2048, sparse_mode=2)
    ref_out, ref_grads = expect(q, k, v, grad, "BSND", sink=sink, scale=0.4, masked=band(20, 20, 0, 10 ** 9, 0))
    check(out, ref_out)
    assert grads[3].dtype == torch.float32 and grads[3].shape == (4,)
    for a, e in zip(grads, ref_grads):
        check(a, e)
    # TND with sinks.
    tq, tk, tv, tg, cq, ckv = tnd([6, 9], [6, 9], 4, 4, 8, seed=13)
    res = torch_npu.npu_fusion_attention(tq.npu(), tk.npu(), tv.npu(), 4, "TND", scale=0.4, sink=sink.npu(),
                                         actual_seq_qlen=cq, actual_seq_kvlen=ckv)
    second = reference(tq[6:].permute(1, 0, 2)[None], tk[6:].permute(1, 0, 2)[None], tv[6:].permute(1, 0, 2)[None],
                       0.4, sink=sink)
    check(res[0][6:], second[0].permute(1, 0, 2))


def test_value_head_size_smaller_than_query_head_size():
    q, k, v, grad = qkv(1, 2, 12, 12, 16, dv=8, seed=14)
    for layout in ("BNSD", "BSH"):
        out, grads, _ = run(q, k, v, layout, grad, scale=0.25)
        ref_out, ref_grads = expect(q, k, v, grad, layout, scale=0.25)
        check(out, ref_out)
        for a, e in zip(grads, ref_grads):
            check(a, e)


def test_dropout_statistics_seed_and_regenerated_mask():
    q, k = torch.zeros(1, 1, 64, 8), torch.zeros(1, 1, 256, 8)
    v = torch.ones(1, 1, 256, 8)  # uniform attention: each output is the kept fraction / keep_prob
    torch.npu.manual_seed(7)
    out, _, _, _, seed, offset, numels = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 1, "BNSD",
                                                                        keep_prob=0.8)
    assert numels == 64 * 256
    assert abs(out.cpu().mean().item() - 1.0) < 0.03  # E[mask / keep_prob] = 1 over 16384 draws
    kept = out.cpu()[0, 0, :, 0] * 0.8 * 256
    assert torch.allclose(kept, kept.round(), atol=1e-3) and kept.std() > 0
    torch.npu.manual_seed(7)
    again = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 1, "BNSD", keep_prob=0.8)
    assert again[4:6] == (seed, offset) and torch.equal(again[0].cpu(), out.cpu())
    other = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 1, "BNSD", keep_prob=0.8)
    assert other[4:6] != (seed, offset) and not torch.equal(other[0].cpu(), out.cpu())
    # A given seed / offset reproduces the mask.
    given = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 1, "BNSD", keep_prob=0.8, seed=seed,
                                           offset=offset)
    assert torch.equal(given[0].cpu(), out.cpu())


def test_dropout_gradients_match_the_forward_mask():
    q, k, v, grad = qkv(1, 2, 30, 40, 8, seed=3)
    xs = [t.npu().requires_grad_(True) for t in (q, k, v)]
    out, _, _, _, seed, offset, _ = torch_npu.npu_fusion_attention(*xs, 2, "BNSD", scale=0.4, keep_prob=0.7)
    out.backward(grad.npu())
    # Recover the keep mask from the forward with v = identity columns: out = (p * m / keep) @ I.
    eye = torch.eye(40).expand(1, 2, 40, 40).contiguous()
    probs = torch_npu.npu_fusion_attention(q.npu(), k.npu(), eye.npu(), 2, "BNSD", scale=0.4, keep_prob=0.7,
                                           seed=seed, offset=offset)[0].cpu()
    plain = torch.softmax(q @ k.transpose(-2, -1) * 0.4, -1)
    drop = (probs > 0).float()
    assert 0.6 < drop.mean().item() < 0.8
    check(probs, plain * drop / 0.7)
    ref_out, ref_grads = expect(q, k, v, grad, "BNSD", scale=0.4, drop=drop, keep_prob=0.7)
    check(out, ref_out)
    for a, e in zip(xs, ref_grads):
        check(a.grad, e)
    # The grad op called directly regenerates the same mask from (seed, offset).
    dq, dk, dv, dpse, dsink = torch_npu.npu_fusion_attention_grad(
        *[x.detach() for x in xs], grad.npu(), 2, "BNSD", scale_value=0.4, keep_prob=0.7, seed=seed, offset=offset)
    assert dpse is None and dsink.numel() == 0
    for a, x in zip((dq, dk, dv), xs):
        check(a, x.grad)


def test_transformers_flash_attention_2_call_patterns():
    """The exact calls of transformers' npu flash-attention integration, against eager attention on CPU."""
    b, s, n, n_kv, d = 2, 37, 8, 2, 32  # GQA: repeat_kv is skipped, the op groups heads itself
    g = torch.Generator().manual_seed(21)
    q, k, v = (torch.randn(b, s, h, d, generator=g) for h in (n, n_kv, n_kv))
    grad = torch.randn(b, s, n, d, generator=g)
    scale = 1.0 / math.sqrt(d)
    # Causal, BSND, the 2048 x 2048 upper-triangular bool mask, sparse_mode 3.
    xs = [t.npu().requires_grad_(True) for t in (q, k, v)]
    attn_mask_npu = torch.triu(torch.ones([2048, 2048], device=NPU), diagonal=1).bool()
    out = torch_npu.npu_fusion_attention(xs[0], xs[1], xs[2], xs[0].shape[2], "BSND", keep_prob=1.0, scale=scale,
                                         atten_mask=attn_mask_npu, sparse_mode=3)[0]
    out.backward(grad.npu())
    cpu = [t.clone().requires_grad_(True) for t in (q, k, v)]
    eager = torch.nn.functional.scaled_dot_product_attention(
        cpu[0].transpose(1, 2), cpu[1].transpose(1, 2), cpu[2].transpose(1, 2), is_causal=True,
        enable_gqa=True).transpose(1, 2)
    eager.backward(grad)
    check(out, eager)
    for a, e in zip(xs, cpu):
        check(a.grad, e.grad)
    # Padded batch: varlen TND with cumulative lengths (as tuples), sparse_mode 3.
    lens = [37, 20]
    cu = torch.tensor([0, 37, 57])
    tq, tk, tv, tg = (torch.cat([t[i, :lens[i]] for i in range(b)]) for t in (q, k, v, grad))
    xs = [t.npu().requires_grad_(True) for t in (tq, tk, tv)]
    out = torch_npu.npu_fusion_attention(xs[0], xs[1], xs[2], n, pse=None, padding_mask=None,
                                         atten_mask=attn_mask_npu, scale=scale, keep_prob=1.0, input_layout="TND",
                                         actual_seq_qlen=tuple(cu[1:].cpu().numpy().tolist()),
                                         actual_seq_kvlen=tuple(cu[1:].cpu().numpy().tolist()), sparse_mode=3)[0]
    out.backward(tg.npu())
    cpu = [t.clone().requires_grad_(True) for t in (q, k, v)]
    outs = []
    for i in range(b):
        o = torch.nn.functional.scaled_dot_product_attention(
            *(t[i:i + 1, :lens[i]].transpose(1, 2) for t in cpu), is_causal=True, enable_gqa=True)
        outs.append(o.transpose(1, 2)[0])
    torch.cat(outs).backward(tg)
    check(out, torch.cat(outs))
    for a, e in zip(xs, cpu):
        check(a.grad, torch.cat([e.grad[i, :lens[i]] for i in range(b)]))


def test_deepspeed_bsh_call_pattern():
    """DeepSpeed's npu inference call: BSH, explicit mask, 65536 token bands."""
    q, k, v, grad = qkv(2, 4, 9, 9, 8, seed=22)
    mask = band(9, 9, 0, 10 ** 9, 0)
    out, grads, _ = run(q, k, v, "BSH", grad, pse=None, padding_mask=None, atten_mask=mask, scale=0.35,
                        pre_tockens=65536, next_tockens=65536, inner_precise=0)
    ref_out, ref_grads = expect(q, k, v, grad, "BSH", scale=0.35, masked=mask)
    check(out, ref_out)
    for a, e in zip(grads, ref_grads):
        check(a, e)


def test_long_sequence_memory_grows_with_s_not_s_squared():
    s, d = 4096, 32
    q, k, v, grad = (t.npu() for t in qkv(1, 1, s, s, d, seed=23))
    q.requires_grad_(True)
    torch.npu.synchronize()
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    out = torch_npu.npu_fusion_attention(q, k, v, 1, "BNSD", atten_mask=TRIU_2048.npu(), scale=0.1, sparse_mode=3)[0]
    out.backward(grad)
    torch.npu.synchronize()
    peak = torch.npu.max_memory_allocated() - base
    assert peak < s * s * 4 / 8, f"peak {peak} bytes; one S x S float32 score matrix is {s * s * 4}"


def test_compiles_with_fullgraph():
    q, k, v, grad = qkv(1, 2, 16, 16, 8, seed=24)
    fn = torch.compile(lambda a, b, c: torch_npu.npu_fusion_attention(a, b, c, 2, "BSND", scale=0.5,
                                                                      atten_mask=TRIU_2048.npu(), sparse_mode=3)[0],
                       backend="aot_eager", fullgraph=True)
    xs = [to_layout(t, "BSND").npu().requires_grad_(True) for t in (q, k, v)]
    out = fn(*xs)
    out.backward(to_layout(grad, "BSND").npu())
    ref_out, ref_grads = expect(q, k, v, grad, "BSND", scale=0.5, masked=band(16, 16, 0, 10 ** 9, 0))
    check(out, ref_out)
    for a, e in zip(xs, ref_grads):
        check(a.grad, e)


def test_meta_shapes():
    q = torch.empty(2, 5, 16, device="meta")
    kv = torch.empty(2, 7, 8, device="meta")
    out = torch.ops.npu.npu_fusion_attention(q, kv, kv, 4, "BSH")
    assert out[0].shape == (2, 5, 16) and out[1].shape == (2, 4, 5, 8) and out[6] == 2 * 4 * 5 * 7
    t = torch.empty(12, 4, 8, device="meta")
    res = torch.ops.npu.npu_fusion_attention(t, t, t, 4, "TND", actual_seq_qlen=[5, 12], actual_seq_kvlen=[5, 12])
    assert res[1].shape == (12, 4, 8)
    grads = torch.ops.npu.npu_fusion_attention_grad(q, kv, kv, q, 4, "BSH", sink=torch.empty(4, device="meta"))
    assert [g.shape for g in grads[:3]] == [q.shape, kv.shape, kv.shape] and grads[4].shape == (4,)


def test_device_ops_are_named():
    q, k, v, _ = (t.npu() for t in qkv(1, 1, 8, 8, 8, seed=25))
    count = lambda name: torch.npu.op_stats().get(name, {}).get("device_op", 0)
    names = ("aclnnFlashAttentionScore", "aclnnDropoutGenMaskV2", "aclnnFlashAttentionScoreGrad")
    before = [count(n) for n in names]
    x = q.clone().requires_grad_(True)
    torch_npu.npu_fusion_attention(x, k, v, 1, "BNSD", keep_prob=0.9)[0].sum().backward()
    torch.npu.synchronize()
    # The dropout mask is made once in forward and regenerated once in backward.
    assert [count(n) - b for n, b in zip(names, before)] == [1, 2, 1]


def test_bad_arguments():
    q, k, v, _ = (t.npu() for t in qkv(2, 4, 5, 5, 8))
    cases = [
        (dict(input_layout="NSBD"), "input_layout"),
        (dict(head_num=5), "head_num"),
        (dict(sparse_mode=7), "sparse_mode"),
        (dict(sparse_mode=9), "sparse_mode"),
        (dict(keep_prob=0.0), "keep_prob"),
        (dict(padding_mask=torch.zeros(5, 5, device=NPU)), "padding_mask"),
        (dict(softmax_layout="TND"), "softmax_layout"),
        (dict(actual_seq_qlen=[5, 10], actual_seq_kvlen=[5, 10]), "actual_seq_qlen"),
        (dict(atten_mask=torch.zeros(3, 3, dtype=torch.bool, device=NPU)), "atten_mask"),
        (dict(sink=torch.zeros(3, device=NPU)), "sink"),
    ]
    for kw, what in cases:
        args = dict(head_num=4, input_layout="BNSD")
        args.update(kw)
        with pytest.raises((ValueError, RuntimeError), match=what):
            out = torch_npu.npu_fusion_attention(q, k, v, args.pop("head_num"), args.pop("input_layout"), **args)
            out[0].cpu()
    t = torch.randn(12, 4, 8, device=NPU)
    with pytest.raises(ValueError, match="actual_seq_qlen"):
        torch_npu.npu_fusion_attention(t, t, t, 4, "TND")
    with pytest.raises(RuntimeError, match="cumulative"):
        torch_npu.npu_fusion_attention(t, t, t, 4, "TND", actual_seq_qlen=[8, 4], actual_seq_kvlen=[8, 4])[0].cpu()


def test_operands_made_just_before_are_read_when_the_kernel_runs():
    # A float mask, a float16 bias and sinks produced by ops queued right before the attention: the
    # attention converts them when it runs, after they are written.
    q, k, v, _ = qkv(1, 2, 64, 64, 16, seed=26)
    big = torch.randn(4096, 4096, device=NPU)
    for _ in range(3):
        big = big @ big / 64  # queued work ahead of the operands
    mask_npu = torch.ones(64, 64, device=NPU).triu(1) * 1.0
    pse_npu = (torch.arange(64.0, device=NPU).view(1, 1, 1, 64) / 64).expand(1, 2, 64, 64).half()
    sink_npu = torch.linspace(-1, 1, 2, device=NPU) * 2
    out = torch_npu.npu_fusion_attention(q.npu(), k.npu(), v.npu(), 2, "BNSD", atten_mask=mask_npu, pse=pse_npu,
                                         sink=sink_npu, scale=0.3)[0]
    expected = reference(q, k, v, 0.3, masked=band(64, 64, 0, 10 ** 9, 0), pse=pse_npu.cpu(), sink=torch.tensor([-2.0, 2.0]))
    check(out, expected)


def test_v2_rope_pse_type_and_v3_tensor_forms():
    # v2: rope parts of query / key add to the scores; pse_type 0 adds pse after the scaling.
    q, k, v, grad = qkv(1, 2, 12, 12, 8, seed=27)
    qr, kr = torch.randn(1, 2, 12, 4), torch.randn(1, 2, 12, 4)
    pse = torch.randn(1, 2, 12, 12)
    xs = [t.npu().requires_grad_(True) for t in (q, k, v, qr, kr)]
    out = torch_npu.npu_fusion_attention_v2(xs[0], xs[1], xs[2], 2, "BNSD", query_rope=xs[3], key_rope=xs[4],
                                            pse=pse.npu(), pse_type=0, scale=0.3)[0]
    out.backward(grad.npu())
    cpu = [t.clone().requires_grad_(True) for t in (q, k, v, qr, kr)]
    s = torch.cat([cpu[0], cpu[3]], -1) @ torch.cat([cpu[1], cpu[4]], -1).transpose(-2, -1) * 0.3 + pse
    expected = torch.softmax(s, -1) @ cpu[2]
    expected.backward(grad)
    check(out, expected)
    for a, e in zip(xs, cpu):
        check(a.grad, e.grad)
    with pytest.raises(ValueError, match="pse_type"):
        torch_npu.npu_fusion_attention_v2(xs[0], xs[1], xs[2], 2, "BNSD", pse_type=2)
    # v3: lengths as host tensors, seed / offset returned as tensors and taken back by the grad.
    tq, tk, tv, tg, cq, ckv = tnd([3, 5], [3, 5], 2, 2, 8, seed=28)
    res = torch_npu.npu_fusion_attention_v3(tq.npu(), tk.npu(), tv.npu(), 2, "TND", scale=0.5, keep_prob=0.8,
                                            actual_seq_qlen=torch.tensor(cq), actual_seq_kvlen=torch.tensor(ckv))
    assert len(res) == 6 and res[4].dtype == torch.int64
    v1 = torch_npu.npu_fusion_attention(tq.npu(), tk.npu(), tv.npu(), 2, "TND", scale=0.5, keep_prob=0.8,
                                        actual_seq_qlen=cq, actual_seq_kvlen=ckv, seed=int(res[4]), offset=int(res[5]))
    check(res[0], v1[0])
    g3 = torch_npu.npu_fusion_attention_grad_v3(tq.npu(), tk.npu(), tv.npu(), tg.npu(), 2, "TND", scale_value=0.5,
                                                keep_prob=0.8, seed=res[4], offset=res[5],
                                                actual_seq_qlen=torch.tensor(cq), actual_seq_kvlen=torch.tensor(ckv))
    g1 = torch_npu.npu_fusion_attention_grad(tq.npu(), tk.npu(), tv.npu(), tg.npu(), 2, "TND", scale_value=0.5,
                                             keep_prob=0.8, seed=int(res[4]), offset=int(res[5]),
                                             actual_seq_qlen=cq, actual_seq_kvlen=ckv)
    for a, e in zip(g3[:3], g1[:3]):
        check(a, e)


def test_dropout_masks_follow_the_generator_and_can_be_given():
    # After manual_seed(s) the first attention's dropout uses (seed s, offset 0), as on NPUs; the offset
    # then advances by 10 per call. A mask made by _npu_dropout_gen_mask with those numbers is the same one.
    q, k, v, _ = (t.npu() for t in qkv(1, 2, 16, 16, 8, seed=29))
    torch.npu.manual_seed(5)
    first = torch_npu.npu_fusion_attention(q, k, v, 2, "BNSD", keep_prob=0.7)
    second = torch_npu.npu_fusion_attention(q, k, v, 2, "BNSD", keep_prob=0.7)
    assert first[4:6] == (5, 0) and second[4:6] == (5, 10)
    mask = torch_npu._npu_dropout_gen_mask(q, [1, 2, 16, 16], p=0.3, seed=5, offset=0)
    given = torch_npu.npu_fusion_attention(q, k, v, 2, "BNSD", keep_prob=0.7, dropout_mask=mask)
    check(given[0], first[0])
    assert mask.dtype == torch.uint8 and mask.numel() == 64  # 512 bits, padded to 128-bit groups


def test_grad_v2_called_directly_splits_the_rope_gradients():
    q, k, v, grad = qkv(1, 2, 10, 10, 8, seed=30)
    qr, kr = torch.randn(1, 2, 10, 4), torch.randn(1, 2, 10, 4)
    cpu = [t.clone().requires_grad_(True) for t in (q, k, v, qr, kr)]
    s = torch.cat([cpu[0], cpu[3]], -1) @ torch.cat([cpu[1], cpu[4]], -1).transpose(-2, -1) * 0.3
    (torch.softmax(s, -1) @ cpu[2]).backward(grad)
    dq, dk, dv, dpse, dq_rope, dk_rope, dsink = torch_npu.npu_fusion_attention_grad_v2(
        q.npu(), k.npu(), v.npu(), grad.npu(), 2, "BNSD", query_rope=qr.npu(), key_rope=kr.npu(), scale_value=0.3)
    assert dpse is None and dsink.numel() == 0
    for a, e in zip((dq, dk, dv, dq_rope, dk_rope), cpu):
        check(a, e.grad)
