"""Serving / linear-attention leftovers against CPU references written from their documented definitions:
npu_top_k_top_p_sample, npu_fused_causal_conv1d_v2, npu_mhc_pre (with gradients) and npu_nsa_compress_infer; with
Meta kernels, device-op counters and argument errors."""

import pytest
import torch

import torch_npu
from op_refs import serving_more as ref

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


# ---- npu_top_k_top_p_sample ----

def sample_inputs(dtype, batch=6, vocab=64, seed=0, input_is_logits=True):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.rand(batch, vocab, generator=g) * (10 if input_is_logits else 1)).to(dtype)
    top_k = torch.tensor([5, 2000, 1, 30, 64, 3], dtype=torch.int32)[:batch]  # 2000: top-k skipped
    top_p = torch.tensor([0.6, 0.9, 1.0, 0.0, 1.0, 0.3]).to(dtype)[:batch]  # 1.0: skipped, 0.0: best token
    min_ps = torch.tensor([0.2, 0.0, 0.5, 0.3, 1.0, 0.1]).to(dtype)[:batch]
    q = torch.rand(batch, vocab, generator=g)
    return logits, top_k, top_p, min_ps, q


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("input_is_logits", [True, False])
@pytest.mark.parametrize("post_sample", ["qSample", "None"])
@pytest.mark.parametrize("with_min_p", [False, True])
def test_top_k_top_p_sample_deterministic(dtype, input_is_logits, post_sample, with_min_p):
    logits, top_k, top_p, min_ps, q = sample_inputs(dtype, input_is_logits=input_is_logits)
    min_ps = min_ps if with_min_p else None
    idx, kept = torch_npu.npu_top_k_top_p_sample(
        logits.npu(), top_k.npu(), top_p.npu(), q=q.npu(), is_need_logits=True,
        min_ps=None if min_ps is None else min_ps.npu(), input_is_logits=input_is_logits, post_sample=post_sample)
    exp_idx, exp_kept, _ = ref.top_k_top_p_sample(logits, top_k, top_p, q=q, min_ps=min_ps,
                                                  input_is_logits=input_is_logits, post_sample=post_sample)
    assert idx.dtype == torch.int64 and idx.shape == (6,)
    assert kept.dtype == torch.float32 and kept.shape == (6, 64)
    assert torch.equal(idx.cpu(), exp_idx)
    assert torch.equal(kept.cpu(), exp_kept)


def test_top_k_top_p_sample_plain_argmax_and_missing_q():
    logits, top_k, top_p, _, _ = sample_inputs(torch.float32)
    skip_k = torch.full((6,), 5000, dtype=torch.int32)
    idx, _ = torch_npu.npu_top_k_top_p_sample(logits.npu(), skip_k.npu(), torch.ones(6).npu(), post_sample="None")
    assert torch.equal(idx.cpu(), logits.argmax(-1))
    # qSample without q is the argmax of the kept probabilities, as documented.
    idx_q, _ = torch_npu.npu_top_k_top_p_sample(logits.npu(), top_k.npu(), top_p.npu())
    exp, _, _ = ref.top_k_top_p_sample(logits, top_k, top_p, post_sample="None")
    assert torch.equal(idx_q.cpu(), exp)


@pytest.mark.parametrize("dtype", DTYPES)
def test_top_k_top_p_sample_multinomial(dtype):
    logits, top_k, top_p, min_ps, _ = sample_inputs(dtype)
    _, exp_kept, kept = ref.top_k_top_p_sample(logits, top_k, top_p, min_ps=min_ps, post_sample="multiNomial")
    gen = torch.Generator(device="npu")
    draws = []
    for _ in range(200):
        idx, kept_logits = torch_npu.npu_top_k_top_p_sample(logits.npu(), top_k.npu(), top_p.npu(), min_ps=min_ps.npu(),
                                                            is_need_logits=True, post_sample="multiNomial",
                                                            generator=gen)
        draws.append(idx.cpu())
    assert torch.equal(kept_logits.cpu(), exp_kept)
    draws = torch.stack(draws)  # (200, batch)
    for b, (indices, probs) in enumerate(kept):
        assert torch.isin(draws[:, b], indices).all(), b  # only kept tokens are drawn
        if indices.numel() > 1:  # the most likely kept token is drawn about as often as its weight says
            best = indices[probs.argmax()]
            share = (draws[:, b] == best).float().mean().item()
            expected = (probs.max() / probs.sum()).item()
            assert abs(share - expected) < 0.15, (b, share, expected)
    # The same seed gives the same draws.
    gen1, gen2 = torch.Generator(device="npu"), torch.Generator(device="npu")
    gen1.manual_seed(7)
    gen2.manual_seed(7)
    flat = torch.zeros(4, 32)
    args = (flat.npu(), torch.full((4,), 5000, dtype=torch.int32).npu(), torch.ones(4).npu())
    a = torch_npu.npu_top_k_top_p_sample(*args, post_sample="multiNomial", generator=gen1)[0].cpu()
    b = torch_npu.npu_top_k_top_p_sample(*args, post_sample="multiNomial", generator=gen2)[0].cpu()
    assert torch.equal(a, b)


def test_top_k_top_p_sample_meta_errors_and_device_op():
    idx, kept = torch.ops.npu.npu_top_k_top_p_sample(torch.empty(3, 10, device="meta"),
                                                    torch.empty(3, dtype=torch.int32, device="meta"),
                                                    torch.empty(3, device="meta"))
    assert idx.shape == (3,) and idx.dtype == torch.int64 and kept.shape == (3, 10) and kept.dtype == torch.float32
    logits = torch.rand(2, 8).npu()
    k, p = torch.tensor([2, 3], dtype=torch.int32).npu(), torch.tensor([0.5, 0.5]).npu()
    with pytest.raises(ValueError, match="2-D"):
        torch_npu.npu_top_k_top_p_sample(torch.rand(8).npu(), k, p)
    with pytest.raises(TypeError, match="top_k must be int32"):
        torch_npu.npu_top_k_top_p_sample(logits, k.long(), p)
    with pytest.raises(ValueError, match="post_sample"):
        torch_npu.npu_top_k_top_p_sample(logits, k, p, post_sample="beam")
    with pytest.raises(ValueError, match="q must have logits' shape"):
        torch_npu.npu_top_k_top_p_sample(logits, k, p, q=torch.rand(2, 3).npu())
    before = device_op_count("aclnnTopKTopPSampleV2")
    torch_npu.npu_top_k_top_p_sample(logits, k, p, q=torch.rand(2, 8).npu())
    torch.npu.synchronize()
    assert device_op_count("aclnnTopKTopPSampleV2") == before + 1


# ---- npu_fused_causal_conv1d_v2 ----

@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_causal_conv1d_v2_decode(dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, 16, generator=g).to(dtype)
    w = torch.randn(3, 16, generator=g).to(dtype)
    states = torch.randn(4, 4, 16, generator=g).to(dtype)
    ci = torch.tensor([0, 1, -1, 3], dtype=torch.int32)  # sequence 2 is padding: its rows stay
    na = torch.tensor([1, 2, 1, 3], dtype=torch.int32)
    nc = torch.tensor([5, 3, 7, 4], dtype=torch.int32)
    exp_x, exp_states = ref.fused_causal_conv1d_v2(x, w, states, cache_indices=ci, num_accepted_tokens=na,
                                                   num_computed_tokens=nc, pangu=True, residual=True)
    xn, sn = x.npu(), states.npu()
    before = device_op_count("aclnnInplaceFusedCausalConv1d")
    out = torch_npu.npu_fused_causal_conv1d_v2(xn, w.npu(), sn, cache_indices=ci.npu(), num_accepted_tokens=na.npu(),
                                               residual_connection=1, num_computed_tokens=nc.npu(), conv_mode="pangu")
    assert out is None
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(xn.cpu().float(), exp_x, rtol=tol, atol=tol)
    torch.testing.assert_close(sn.cpu().float(), exp_states.to(dtype).float(), rtol=tol, atol=tol)
    assert torch.equal(xn.cpu()[2], x[2])
    assert device_op_count("aclnnInplaceFusedCausalConv1d") == before + 1


@pytest.mark.parametrize("apc", [False, True])
def test_fused_causal_conv1d_v2_prefill(apc):
    g = torch.Generator().manual_seed(2)
    seq = [5, 3, 7, 4]
    qsl = torch.tensor([0, 5, 8, 15, 19], dtype=torch.int32)
    x = torch.randn(19, 16, generator=g)
    w = torch.randn(3, 16, generator=g)
    kw = dict(query_start_loc=qsl, num_computed_tokens=torch.zeros(4, dtype=torch.int32))
    if apc:
        bs = 4
        states = torch.randn(12, 2, 16, generator=g)
        kw.update(cache_indices=torch.arange(12, dtype=torch.int32).view(4, 3),
                  block_first=torch.zeros(4, dtype=torch.int32),
                  block_last=torch.tensor([(s - 1) // bs for s in seq], dtype=torch.int32),
                  initial_state_idx=torch.zeros(4, dtype=torch.int32))
    else:
        bs = 128
        states = torch.randn(8, 2, 16, generator=g)
        kw.update(cache_indices=torch.tensor([0, 3, 1, 5], dtype=torch.int32))
    exp_x, exp_states = ref.fused_causal_conv1d_v2(x, w, states, block_size=bs, **kw)
    xn, sn = x.npu(), states.npu()
    npu_kw = {"query_start_loc": kw["query_start_loc"], "cache_indices": kw["cache_indices"],
              "num_computed_tokens": kw["num_computed_tokens"]}
    if apc:
        npu_kw.update(block_idx_first_scheduled_token=kw["block_first"],
                      block_idx_last_scheduled_token=kw["block_last"], initial_state_idx=kw["initial_state_idx"])
    torch_npu.npu_fused_causal_conv1d_v2(xn, w.npu(), sn, block_size=bs, **{k: v.npu() for k, v in npu_kw.items()})
    torch.testing.assert_close(xn.cpu(), exp_x, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sn.cpu(), exp_states, rtol=1e-5, atol=1e-5)


def test_fused_causal_conv1d_v2_meta_and_errors():
    x = torch.empty(2, 3, 8, device="meta")
    assert torch.ops.npu.npu_fused_causal_conv1d_v2(x, torch.empty(3, 8, device="meta"),
                                                    torch.empty(2, 2, 8, device="meta")) is None
    with pytest.raises(ValueError, match="conv_mode"):
        torch_npu.npu_fused_causal_conv1d_v2(torch.randn(2, 3, 8).npu(), torch.randn(3, 8).npu(),
                                             torch.randn(2, 2, 8).npu(), conv_mode="other")
    with pytest.raises(ValueError, match="weight must be"):
        torch_npu.npu_fused_causal_conv1d_v2(torch.randn(2, 3, 8).npu(), torch.randn(3, 4).npu(),
                                             torch.randn(2, 2, 8).npu())
    with pytest.raises(ValueError, match="pangu"):
        torch_npu.npu_fused_causal_conv1d_v2(torch.randn(2, 3, 8).npu(), torch.randn(3, 8).npu(),
                                             torch.randn(2, 2, 8).npu(), conv_mode="pangu")


# ---- npu_mhc_pre ----

def mhc_inputs(dtype, lead=(5,), n=4, d=16, res=True, seed=3):
    g = torch.Generator().manual_seed(seed)
    k = n * n + 2 * n if res else 2 * n
    x = torch.randn(*lead, n, d, generator=g).to(dtype)
    phi = torch.randn(k, n * d, generator=g) * 0.1
    alpha = torch.tensor([0.5, 0.7, 0.9][:3 if res else 2])
    bias = torch.randn(k, generator=g) * 0.1
    gamma = torch.rand(n, d, generator=g) + 0.5
    return x, phi, alpha, bias, gamma


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lead", [(5,), (2, 3)])
@pytest.mark.parametrize("res", [True, False])
def test_mhc_pre_forward(dtype, lead, res):
    x, phi, alpha, bias, gamma = mhc_inputs(dtype, lead, res=res)
    expected = ref.mhc_pre(x, phi, alpha, bias, gamma)
    before = device_op_count("aclnnMhcPreV2")
    got = torch_npu.npu_mhc_pre(x.npu(), phi.npu(), alpha.npu(), bias.npu(), gamma=gamma.npu(), out_flag=1)
    assert device_op_count("aclnnMhcPreV2") == before + 1
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    for name, e, a in zip(["h_in", "h_post", "h_res", "inv_rms", "h_mix", "h_pre"], expected, got):
        assert a.dtype == e.dtype and a.shape == e.shape, name
        torch.testing.assert_close(a.cpu().float(), e.float(), rtol=tol, atol=tol, msg=name)
    plain = torch_npu.npu_mhc_pre(x.npu(), phi.npu(), alpha.npu(), bias.npu())
    assert plain[3] is None and plain[4] is None and plain[5] is None
    torch.testing.assert_close(plain[0].cpu().float(), ref.mhc_pre(x, phi, alpha, bias)[0].float(), rtol=tol, atol=tol)


def test_mhc_pre_hf32_is_close_to_fp32():
    x, phi, alpha, bias, gamma = mhc_inputs(torch.bfloat16)
    fp32 = torch_npu.npu_mhc_pre(x.npu(), phi.npu(), alpha.npu(), bias.npu(), out_flag=1)[4].cpu()
    hf32 = torch_npu.npu_mhc_pre(x.npu(), phi.npu(), alpha.npu(), bias.npu(), out_flag=1, inner_precise=1)[4].cpu()
    torch.testing.assert_close(hf32, fp32, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("use_gamma", [True, False])
def test_mhc_pre_backward(dtype, use_gamma):
    x, phi, alpha, bias, gamma = mhc_inputs(dtype)
    gamma = gamma if use_gamma else None
    leaves = [x.float(), phi, alpha, bias] + ([gamma] if use_gamma else [])
    cpu = [t.clone().requires_grad_(True) for t in leaves]
    out = ref.mhc_pre(cpu[0], *cpu[1:4], cpu[4] if use_gamma else None)
    g = torch.Generator().manual_seed(9)
    grads = [torch.randn(out[i].shape, generator=g) for i in range(3)]
    sum(((o.float() * gr).sum() for o, gr in zip(out[:3], grads))).backward()
    npu = [t.npu().requires_grad_(True) for t in [x] + leaves[1:]]
    res = torch_npu.npu_mhc_pre(npu[0], *npu[1:4], gamma=npu[4] if use_gamma else None, out_flag=1)
    sum(((o.float() * gr.npu()).sum() for o, gr in zip(res[:3], grads))).backward()
    tol = 1e-3 if dtype == torch.float32 else 3e-2
    for name, c, n in zip(["x", "phi", "alpha", "bias", "gamma"], cpu, npu):
        torch.testing.assert_close(n.grad.cpu().float(), c.grad.float(), rtol=tol, atol=tol, msg=name)


def test_mhc_pre_backward_op_without_gamma_gives_a_zero_gamma_gradient():
    x, phi, alpha, bias, gamma = mhc_inputs(torch.float32)
    fwd = torch_npu.npu_mhc_pre(x.npu(), phi.npu(), alpha.npu(), bias.npu(), out_flag=1)
    h_in, h_post, h_res, inv_rms, h_mix, h_pre = fwd
    g = torch.Generator().manual_seed(11)
    grads = [torch.randn(t.shape, generator=g).npu() for t in (h_in, h_post, h_res)]
    outs = torch_npu.npu_mhc_pre_backward(x.npu(), phi.npu(), alpha.npu(), *grads, inv_rms, h_mix, h_pre, h_post)
    assert outs[4].shape == gamma.shape and not outs[4].cpu().any()
    # The other gradients are those of autograd through the CPU reference.
    leaves = [t.clone().requires_grad_(True) for t in (x, phi, alpha, bias)]
    out = ref.mhc_pre(*leaves)
    sum(((o.float() * gr.cpu()).sum() for o, gr in zip(out[:3], grads))).backward()
    for name, got, leaf in zip(["x", "phi", "alpha", "bias"], outs[:4], leaves):
        torch.testing.assert_close(got.cpu().float().reshape(leaf.shape), leaf.grad, rtol=1e-3, atol=1e-3, msg=name)


def test_mhc_pre_meta_and_errors():
    x, phi, alpha, bias, gamma = mhc_inputs(torch.bfloat16, lead=(2, 3))
    meta = torch.ops.npu.npu_mhc_pre(x.to("meta"), phi.to("meta"), alpha.to("meta"), bias.to("meta"), out_flag=1)
    shapes = [(2, 3, 16), (2, 3, 4), (2, 3, 4, 4), (2, 3), (2, 3, 24), (2, 3, 4)]
    assert [tuple(t.shape) for t in meta] == shapes
    assert meta[0].dtype == torch.bfloat16 and all(t.dtype == torch.float32 for t in meta[1:])
    with pytest.raises(ValueError, match="alpha must hold 3"):
        torch_npu.npu_mhc_pre(x.npu(), phi.npu(), torch.ones(4).npu(), bias.npu())
    with pytest.raises(ValueError, match="phi must be"):
        torch_npu.npu_mhc_pre(x.npu(), phi[:, :8].npu(), alpha.npu(), bias.npu())
    with pytest.raises(ValueError, match="out_flag"):
        torch_npu.npu_mhc_pre(x.npu(), phi.npu(), alpha.npu(), bias.npu(), out_flag=2)
    with pytest.raises(ValueError, match="out_flag=1"):
        xs = x.npu().float().requires_grad_(True)
        torch_npu.npu_mhc_pre(xs, phi.npu(), alpha.npu(), bias.npu())[0].sum().backward()


# ---- npu_nsa_compress_infer ----

@pytest.mark.parametrize("dtype", DTYPES)
def test_nsa_compress_infer(dtype):
    g = torch.Generator().manual_seed(4)
    blocks, page, heads, dim, cbs, stride = 6, 64, 2, 32, 32, 16
    inp = torch.randn(blocks, page, heads, dim, generator=g).to(dtype)
    weight = torch.randn(cbs, heads, generator=g).to(dtype)
    block_table = torch.tensor([[2, 0], [5, 1], [3, 4]], dtype=torch.int32)
    lens = [48, 80, 47]  # windows end at 48 and 80 (crossing a page); 47 completes none
    slots = torch.tensor([3, 0, 1], dtype=torch.int32)
    cache = torch.randn(4, heads, dim, generator=g).to(dtype)
    expected = ref.nsa_compress_infer(inp, weight, slots, cbs, stride, page, block_table, lens, cache)
    cache_npu = cache.npu()
    before = device_op_count("aclnnNsaCompressWithCache")
    out = torch_npu.npu_nsa_compress_infer(inp.npu(), weight.npu(), slots.npu(), cbs, stride, page,
                                           block_table=block_table.npu(), actual_seq_len=lens, cache=cache_npu)
    assert device_op_count("aclnnNsaCompressWithCache") == before + 1
    assert out.data_ptr() == cache_npu.data_ptr() and out.dtype == dtype
    tol = 1e-4 if dtype == torch.float32 else 5e-2
    torch.testing.assert_close(cache_npu.cpu().float(), expected.float(), rtol=tol, atol=tol)
    assert torch.equal(cache_npu.cpu()[1], cache[1]) and torch.equal(cache_npu.cpu()[2], cache[2])


def test_nsa_compress_infer_meta_and_errors():
    meta = torch.ops.npu.npu_nsa_compress_infer(torch.empty(2, 64, 2, 16, device="meta"),
                                                torch.empty(32, 2, device="meta"),
                                                torch.empty(1, dtype=torch.int32, device="meta"), 32, 16, 64,
                                                block_table=torch.empty(1, 2, dtype=torch.int32, device="meta"),
                                                actual_seq_len=[40], cache=torch.empty(3, 2, 16, device="meta"))
    assert meta.shape == (3, 2, 16)
    args = (torch.randn(2, 64, 2, 16).npu(), torch.randn(32, 2).npu(), torch.tensor([0], dtype=torch.int32).npu())
    cache = torch.zeros(3, 2, 16).npu()
    with pytest.raises(ValueError, match="block_table is needed"):
        torch_npu.npu_nsa_compress_infer(*args, 32, 16, 64, actual_seq_len=[40], cache=cache)
    with pytest.raises(ValueError, match="weight must be"):
        torch_npu.npu_nsa_compress_infer(args[0], torch.randn(16, 2).npu(), args[2], 32, 16, 64,
                                         block_table=torch.zeros(1, 2, dtype=torch.int32).npu(), actual_seq_len=[40],
                                         cache=cache)
    with pytest.raises(ValueError, match="page_block_size"):
        torch_npu.npu_nsa_compress_infer(*args, 32, 16, 128, block_table=torch.zeros(1, 2, dtype=torch.int32).npu(),
                                         actual_seq_len=[40], cache=cache)
