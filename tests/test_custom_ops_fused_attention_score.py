"""Classic fused attention ops (npu_multi_head_attention, npu_fused_attention_score and _fwd / _backward / _grad)
against CPU references written from their documented definitions: outputs, dropout masks, gradients vs CPU
autograd of the reference, Meta kernels, device-op counters and argument errors."""

import pytest
import torch

import torch_npu
from op_refs import fused_attention_score as ref


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=2e-2, atol=2e-2),
       torch.bfloat16: dict(rtol=5e-2, atol=5e-2)}


def check(got, expected, dtype=torch.float32):
    got = got.detach().cpu()
    assert got.shape == expected.shape, (got.shape, expected.shape)
    torch.testing.assert_close(got.float(), expected.detach().float(), **TOL[dtype])


# ---- npu_multi_head_attention ----

H, D, SRC, TGT, B = 16, 16, 32, 16, 2
C = H * D


def mha_inputs(dtype=torch.float32, seed=0, bias=True):
    g = torch.Generator().manual_seed(seed)
    query = torch.randn(B * TGT, C, generator=g) * 0.5
    key = torch.randn(B * SRC, C, generator=g) * 0.5
    value = torch.randn(B * SRC, C, generator=g) * 0.5
    weights = [torch.randn(C, C, generator=g) * 0.06 for _ in range(4)]
    biases = [torch.randn(C, generator=g) * 0.1 if bias else None for _ in range(4)]
    attn_mask = torch.randn(B, H, TGT, SRC, generator=g) * 0.5
    cast = lambda t: None if t is None else t.to(dtype)
    return ([cast(query), cast(key), cast(value)], [cast(w) for w in weights], [cast(b) for b in biases],
            cast(attn_mask))


def run_mha(inputs, weights, biases, attn_mask, dropout_mask=None, dropout_prob=0.0, softmax_use_float=True,
            device="npu"):
    dev = lambda t: None if t is None else t.to(device)
    q, k, v = inputs
    wq, wk, wv, wo = weights
    bq, bk, bv, bo = biases
    return torch_npu.npu_multi_head_attention(dev(q), dev(k), dev(v), dev(wq), dev(wk), dev(wv), dev(attn_mask),
                                              dev(wo), dev(bq), dev(bk), dev(bv), dev(bo), dev(dropout_mask), H, D,
                                              SRC, TGT, dropout_prob, softmax_use_float)


def ref_mha(inputs, weights, biases, attn_mask, keep=None, dropout_prob=0.0, softmax_use_float=True):
    q, k, v = inputs
    wq, wk, wv, wo = weights
    return ref.multi_head_attention(q, k, v, wq, wk, wv, attn_mask, wo, *biases, keep, H, D, SRC, TGT, dropout_prob,
                                    softmax_use_float)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("softmax_use_float", [True, False])
def test_mha_forward_without_dropout(dtype, softmax_use_float):
    args = mha_inputs(dtype)
    outs = run_mha(*args, softmax_use_float=softmax_use_float)
    assert len(outs) == 8
    y, mask, q_res, k_res, v_res, scores, attn_res, context = [o.cpu() for o in outs]
    expected = ref_mha(*args, softmax_use_float=softmax_use_float)
    for got, exp in zip((y, q_res, k_res, v_res, scores, attn_res, context), expected):
        assert got.dtype == exp.dtype
        check(got, exp, dtype)
    assert scores.dtype == (torch.float32 if softmax_use_float else dtype)
    assert mask.dtype == torch.uint8 and mask.shape == (B * H * TGT * SRC // 8,)
    assert bool((mask == 255).all())  # nothing dropped


def test_mha_without_biases():
    args = mha_inputs(bias=False)
    y = run_mha(*args)[0]
    check(y, ref_mha(*args)[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_mha_gradients_match_cpu_autograd(dtype):
    inputs, weights, biases, attn_mask = mha_inputs(dtype, seed=1)
    leaves = inputs + weights + biases
    cpu = [t.clone().requires_grad_(True) for t in leaves]
    npu = [t.npu().requires_grad_(True) for t in leaves]
    grad = torch.randn(B * TGT, C, generator=torch.Generator().manual_seed(9)).to(dtype)
    y_cpu = ref_mha(cpu[:3], cpu[3:7], cpu[7:], attn_mask)[0]
    y_cpu.backward(grad)
    y_npu = run_mha(npu[:3], npu[3:7], npu[7:], attn_mask.npu())[0]
    y_npu.backward(grad.npu())
    for a, e in zip(npu, cpu):
        assert a.grad is not None and a.grad.shape == e.shape
        check(a.grad, e.grad, dtype)


def test_mha_dropout_mask_statistics_and_consistency():
    inputs, weights, biases, attn_mask = mha_inputs(seed=2)
    leaves = inputs + weights + biases
    npu = [t.npu().requires_grad_(True) for t in leaves]
    torch.npu.manual_seed(3)
    outs = run_mha(npu[:3], npu[3:7], npu[7:], attn_mask.npu(), dropout_prob=0.4)
    mask = outs[1].cpu()
    n = B * H * TGT * SRC
    keep = ref.unpack_bit_mask(mask, n).view(B, H, TGT, SRC)
    assert 0.55 < keep.float().mean().item() < 0.65  # keep probability 0.6 over 16384 draws
    cpu = [t.clone().requires_grad_(True) for t in leaves]
    expected = ref_mha(cpu[:3], cpu[3:7], cpu[7:], attn_mask, keep=keep, dropout_prob=0.4)
    check(outs[0], expected[0])
    check(outs[6], expected[5])  # attn_res: the dropped probabilities
    check(outs[5], expected[4])  # attn_scores: before dropout
    # Gradients use the same mask.
    grad = torch.randn(B * TGT, C, generator=torch.Generator().manual_seed(5))
    outs[0].backward(grad.npu())
    expected[0].backward(grad)
    for a, e in zip(npu, cpu):
        check(a.grad, e.grad)
    # The npu generator reproduces the mask; the next draw differs.
    torch.npu.manual_seed(3)
    again = run_mha(*mha_inputs(seed=2), dropout_prob=0.4)
    assert torch.equal(again[1].cpu(), mask) and torch.equal(again[0].cpu(), outs[0].detach().cpu())
    other = run_mha(*mha_inputs(seed=2), dropout_prob=0.4)
    assert not torch.equal(other[1].cpu(), mask)


def test_mha_uses_the_given_dropout_mask():
    args = mha_inputs(seed=4)
    keep = torch.rand(B, H, TGT, SRC, generator=torch.Generator().manual_seed(6)) < 0.8
    given = ref.pack_bit_mask(keep)
    outs = run_mha(*args, dropout_mask=given, dropout_prob=0.2)
    assert torch.equal(outs[1].cpu(), given)
    expected = ref_mha(*args, keep=keep, dropout_prob=0.2)
    check(outs[0], expected[0])


def test_mha_backward_op_directly():
    inputs, weights, biases, attn_mask = mha_inputs(seed=7)
    outs = run_mha(inputs, weights, biases, attn_mask)
    grad = torch.randn(B * TGT, C, generator=torch.Generator().manual_seed(8))
    dev = [t.npu() for t in inputs + weights]
    before = device_op_count("aclnnMultiHeadAttentionGrad")
    grads = torch_npu.npu_multi_head_attention_backward(
        *dev, *[b.npu() for b in biases], outs[2], outs[3], outs[4], outs[5], outs[6], outs[7], grad.npu(), outs[1],
        H, D, SRC, TGT, 0.0, True)
    torch.npu.synchronize()
    assert device_op_count("aclnnMultiHeadAttentionGrad") == before + 1
    assert len(grads) == 11
    assert [tuple(g.shape) for g in grads[:4]] == [(C, C)] * 4
    assert tuple(grads[4].shape) == (B * TGT, C) and tuple(grads[5].shape) == (B * SRC, C)
    assert [tuple(g.shape) for g in grads[7:]] == [(1, C)] * 4
    cpu = [t.clone().requires_grad_(True) for t in inputs + weights + biases]
    ref_mha(cpu[:3], cpu[3:7], cpu[7:], attn_mask)[0].backward(grad)
    order = [3, 4, 5, 6, 0, 1, 2, 7, 8, 9, 10]  # torch_npu's output order
    for got, i in zip(grads, order):
        check(got.reshape(cpu[i].shape), cpu[i].grad)


def test_mha_meta_and_device_op():
    args = mha_inputs(torch.float16)
    meta = run_mha(*args, softmax_use_float=True, device="meta")
    real = run_mha(*args, softmax_use_float=True)
    for m, r in zip(meta, real):
        assert m.device.type == "meta" and m.shape == r.shape and m.dtype == r.dtype
    before = device_op_count("aclnnMultiHeadAttention")
    run_mha(*args)
    torch.npu.synchronize()
    assert device_op_count("aclnnMultiHeadAttention") == before + 1


def test_mha_errors():
    inputs, weights, biases, attn_mask = mha_inputs()
    q, k, v = [t.npu() for t in inputs]
    ws = [w.npu() for w in weights]
    bs = [b.npu() for b in biases]
    m = attn_mask.npu()
    call = lambda *a, **kw: torch_npu.npu_multi_head_attention(*a, **kw)
    with pytest.raises(ValueError, match="multiples of 16"):
        call(q, k, v, *ws[:3], m, ws[3], *bs, None, H, D, SRC, 8, 0.0, True)
    with pytest.raises(ValueError, match="dropout_prob"):
        call(q, k, v, *ws[:3], m, ws[3], *bs, None, H, D, SRC, TGT, 1.0, True)
    with pytest.raises(ValueError, match="key must be"):
        call(q, k[:16], v, *ws[:3], m, ws[3], *bs, None, H, D, SRC, TGT, 0.0, True)
    with pytest.raises(TypeError, match="dtype"):
        call(q, k.half(), v, *ws[:3], m, ws[3], *bs, None, H, D, SRC, TGT, 0.0, True)
    with pytest.raises(TypeError, match="uint8 bit mask"):
        call(q, k, v, *ws[:3], m, ws[3], *bs, torch.ones(C).npu(), H, D, SRC, TGT, 0.5, True)
    with pytest.raises(ValueError, match="attn_mask must broadcast"):
        call(q, k, v, *ws[:3], m[..., :5], ws[3], *bs, None, H, D, SRC, TGT, 0.0, True)


# ---- npu_fused_attention_score / _fwd / _backward / _grad ----

def score_inputs(dtype=torch.float32, b=2, n=3, sq=5, sk=7, d=8, dv=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, n, sq, d, generator=g).to(dtype)
    k = torch.randn(b, n, sk, d, generator=g).to(dtype)
    v = torch.randn(b, n, sk, dv, generator=g).to(dtype)
    mask = (torch.rand(b, 1, 1, sk, generator=g) < 0.3).float().mul(-10000.0).to(dtype)  # BERT's padding mask
    return q, k, v, mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fused_attention_score_fwd_keep_all(dtype):
    q, k, v, mask = score_inputs(dtype)
    out, softmax, drop = torch_npu.npu_fused_attention_score_fwd(q.npu(), k.npu(), v.npu(), mask.npu(), 0.35, 1.0)
    exp_out, exp_softmax = ref.fused_attention_score(q, k, v, mask, 0.35, 1.0)
    assert out.dtype == dtype and softmax.dtype == dtype
    check(out, exp_out, dtype)
    check(softmax, exp_softmax, dtype)
    assert out.shape == (2 * 5, 3 * 6) and softmax.shape == (2, 3, 5, 7)
    assert drop.dtype == torch.uint8 and drop.shape == (2 * 3 * 5 * 7,) and bool((drop.cpu() == 1).all())
    plain = torch_npu.npu_fused_attention_score(q.npu(), k.npu(), v.npu(), mask.npu(), 0.35, 1.0)
    check(plain, exp_out, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("exposed", [False, True])
def test_fused_attention_score_gradients_match_cpu_autograd(dtype, exposed):
    q, k, v, mask = score_inputs(dtype, seed=1)
    cpu = [t.clone().requires_grad_(True) for t in (q, k, v)]
    npu = [t.npu().requires_grad_(True) for t in (q, k, v)]
    grad = torch.randn(2 * 5, 3 * 6, generator=torch.Generator().manual_seed(2)).to(dtype)
    ref.fused_attention_score(*cpu, mask, 0.3, 1.0)[0].backward(grad)
    if exposed:
        out = torch_npu.npu_fused_attention_score(*npu, mask.npu(), 0.3, 1.0)
    else:
        out = torch_npu.npu_fused_attention_score_fwd(*npu, mask.npu(), 0.3, 1.0)[0]
    out.backward(grad.npu())
    for a, e in zip(npu, cpu):
        check(a.grad, e.grad, dtype)


def test_fused_attention_score_dropout_mask():
    q, k, v, mask = score_inputs(b=2, n=4, sq=16, sk=16, d=8, dv=8, seed=3)
    npu = [t.npu().requires_grad_(True) for t in (q, k, v)]
    torch.npu.manual_seed(11)
    out, softmax, drop = torch_npu.npu_fused_attention_score_fwd(*npu, mask.npu(), 0.3, 0.7)
    drop = drop.cpu()
    assert set(drop.unique().tolist()) <= {0, 1}
    assert 0.62 < drop.float().mean().item() < 0.78  # keep probability 0.7 over 2048 draws
    keep = drop.bool().view(2, 4, 16, 16)
    cpu = [t.clone().requires_grad_(True) for t in (q, k, v)]
    exp_out, exp_softmax = ref.fused_attention_score(*cpu, mask, 0.3, 0.7, keep=keep)
    check(out, exp_out)
    check(softmax, exp_softmax)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(4))
    out.backward(grad.npu())
    exp_out.backward(grad)
    for a, e in zip(npu, cpu):
        check(a.grad, e.grad)
    torch.npu.manual_seed(11)
    again = torch_npu.npu_fused_attention_score_fwd(q.npu(), k.npu(), v.npu(), mask.npu(), 0.3, 0.7)
    assert torch.equal(again[2].cpu(), drop)


def test_fused_attention_score_backward_and_grad_ops():
    q, k, v, mask = score_inputs(seed=5)
    out, softmax, drop = torch_npu.npu_fused_attention_score_fwd(q.npu(), k.npu(), v.npu(), mask.npu(), 0.5, 1.0)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(6))
    before = device_op_count("aclnnAttentionScoreGrad")
    dq, dk, dv = torch_npu.npu_fused_attention_score_backward(grad.npu(), softmax, q.npu(), k.npu(), v.npu(), drop,
                                                              0.5, 1.0)
    torch.npu.synchronize()
    assert device_op_count("aclnnAttentionScoreGrad") == before + 1
    cpu = [t.clone().requires_grad_(True) for t in (q, k, v)]
    ref.fused_attention_score(*cpu, mask, 0.5, 1.0)[0].backward(grad)
    for got, e in zip((dq, dk, dv), cpu):
        assert got.shape == e.shape
        check(got, e.grad)
    # _grad: the same gradients in the forward result's [B * S, N * D] layout.
    gq, gk, gv = torch_npu.npu_fused_attention_score_grad(grad.npu(), softmax, q.npu(), k.npu(), v.npu(), drop,
                                                          0.5, 1.0)
    for got, e in zip((gq, gk, gv), cpu):
        b, n, s, d = e.shape
        check(got, e.grad.permute(0, 2, 1, 3).reshape(b * s, n * d))


def test_fused_attention_score_meta_and_device_op():
    q, k, v, mask = score_inputs(torch.float16)
    meta = torch_npu.npu_fused_attention_score_fwd(q.to("meta"), k.to("meta"), v.to("meta"), mask.to("meta"), 0.5, 1.0)
    assert [tuple(t.shape) for t in meta] == [(10, 18), (2, 3, 5, 7), (210,)]
    assert [t.dtype for t in meta] == [torch.float16, torch.float16, torch.uint8]
    plain = torch_npu.npu_fused_attention_score(q.to("meta"), k.to("meta"), v.to("meta"), mask.to("meta"), 0.5, 1.0)
    assert plain.shape == (10, 18) and plain.device.type == "meta"
    grads = torch_npu.npu_fused_attention_score_backward(torch.empty(10, 18, device="meta"), meta[1], q.to("meta"),
                                                         k.to("meta"), v.to("meta"), meta[2], 0.5, 1.0)
    assert [tuple(t.shape) for t in grads] == [(2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 6)]
    before = device_op_count("aclnnAttentionScore")
    torch_npu.npu_fused_attention_score(q.npu(), k.npu(), v.npu(), mask.npu(), 0.5, 1.0)
    torch.npu.synchronize()
    assert device_op_count("aclnnAttentionScore") == before + 1


def test_fused_attention_score_errors():
    q, k, v, mask = [t.npu() for t in score_inputs()]
    with pytest.raises(ValueError, match="query_transpose=True is not supported"):
        torch_npu.npu_fused_attention_score(q, k, v, mask, 0.5, 1.0, query_transpose=True)
    with pytest.raises(ValueError, match="keep_prob"):
        torch_npu.npu_fused_attention_score_fwd(q, k, v, mask, 0.5, 0.0)
    with pytest.raises(ValueError, match="4-D"):
        torch_npu.npu_fused_attention_score(q[0], k, v, mask, 0.5, 1.0)
    with pytest.raises(ValueError, match="key_layer"):
        torch_npu.npu_fused_attention_score(q, k[..., :4], v, mask, 0.5, 1.0)
    with pytest.raises(TypeError, match="dtype"):
        torch_npu.npu_fused_attention_score(q, k.half(), v, mask, 0.5, 1.0)
    with pytest.raises(ValueError, match="attention_mask must broadcast"):
        torch_npu.npu_fused_attention_score(q, k, v, mask[..., :3], 0.5, 1.0)
    out, softmax, drop = torch_npu.npu_fused_attention_score_fwd(q, k, v, mask, 0.5, 1.0)
    with pytest.raises(TypeError, match="uint8"):
        torch_npu.npu_fused_attention_score_backward(out, softmax, q, k, v, drop.float(), 0.5, 1.0)
