"""Attention helpers of LLM serving / context parallelism against CPU references written from their definitions
(custom_op_refs.py): npu_ring_attention_update (SBH, TND with token-major and per-sequence statistics),
npu_attention_update (SP merge by log-sum-exp), npu_advance_step_flashattn (plain and speculative, in place),
npu_attn_softmax_ / npu_attn_softmax_backward_ (in place) and npu_scatter_list / npu_scatter_list_ (window writes
into a tensor list); float32 / float16 / bfloat16 (and integer caches), Meta shapes, device ops and clear errors."""

import pytest
import torch

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


def lanes8(t):
    """FlashAttention's softmax statistics: each value in 8 equal lanes."""
    return t.unsqueeze(-1).repeat_interleave(8, dim=-1).contiguous()


# ---------------------------------------------------------------------------------------- npu_ring_attention_update

@pytest.mark.parametrize("dtype", FLOATS)
def test_ring_attention_update_sbh(dtype):
    g = torch.Generator().manual_seed(0)
    s, b, n, d = 4, 2, 2, 16
    o1, o2 = torch.randn(s, b, n * d, generator=g).to(dtype), torch.randn(s, b, n * d, generator=g).to(dtype)
    stats = [lanes8(torch.rand(b, n, s, generator=g) * 3 + 0.2) for _ in range(4)]
    got = torch_npu.npu_ring_attention_update(o1.npu(), stats[0].npu(), stats[1].npu(), o2.npu(), stats[2].npu(),
                                              stats[3].npu())
    expected = ref.ring_attention_update(o1, stats[0], stats[1], o2, stats[2], stats[3])
    close(got[0], expected[0])
    for a, e in zip(got[1:], expected[1:]):
        torch.testing.assert_close(a.cpu(), e, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
def test_ring_attention_update_tnd_layouts(dtype):
    g = torch.Generator().manual_seed(1)
    t, n, d = 5, 2, 64
    bounds = [0, 2, 5]
    o1, o2 = torch.randn(t, n, d, generator=g).to(dtype), torch.randn(t, n, d, generator=g).to(dtype)
    token_major = [lanes8(torch.rand(t, n, generator=g) * 3 + 0.2) for _ in range(4)]
    qlen = torch.tensor(bounds[1:], dtype=torch.int64)  # cumulative ends; the leading 0 is optional
    got = torch_npu.npu_ring_attention_update(o1.npu(), *(x.npu() for x in token_major[:2]), o2.npu(),
                                              *(x.npu() for x in token_major[2:]), actual_seq_qlen=qlen.npu(),
                                              input_layout="TND", input_softmax_layout="TND")
    expected = ref.ring_attention_update(o1, *token_major[:2], o2, *token_major[2:], qlen, "TND", "TND")
    close(got[0], expected[0])
    torch.testing.assert_close(got[2].cpu(), expected[2], rtol=1e-6, atol=1e-6)

    # The same statistics stored sequence by sequence as (N, S_b, 8) blocks (input_softmax_layout ''): the merged
    # outputs are the same, the statistics come back in the caller's layout.
    def per_sequence(stat):
        blocks = [stat[s:e].transpose(0, 1).reshape(-1) for s, e in zip(bounds[:-1], bounds[1:])]
        return torch.cat(blocks).view(t, n, 8)

    blocked = [per_sequence(x) for x in token_major]
    got_blocked = torch_npu.npu_ring_attention_update(o1.npu(), *(x.npu() for x in blocked[:2]), o2.npu(),
                                                      *(x.npu() for x in blocked[2:]),
                                                      actual_seq_qlen=torch.tensor(bounds).npu(), input_layout="TND")
    assert torch.equal(got_blocked[0].cpu(), got[0].cpu())
    torch.testing.assert_close(got_blocked[1].cpu(), per_sequence(expected[1]), rtol=1e-6, atol=1e-6)
    close(got_blocked[0], ref.ring_attention_update(o1, *blocked[:2], o2, *blocked[2:], torch.tensor(bounds), "TND")[0])


def test_ring_attention_update_meta_device_op_and_errors():
    o = torch.empty(4, 2, 32, device="meta", dtype=torch.half)
    st = torch.empty(2, 2, 4, 8, device="meta")
    a, m, s = torch.ops.npu.npu_ring_attention_update(o, st, st, o, st, st)
    assert a.shape == o.shape and a.dtype == torch.half and m.shape == st.shape and s.dtype == torch.float32
    o, st = torch.randn(4, 2, 32).npu(), lanes8(torch.rand(2, 2, 4) + 0.5).npu()
    before = count("aclnnRingAttentionUpdateV2")
    torch_npu.npu_ring_attention_update(o, st, st, o, st, st)
    torch.npu.synchronize()
    assert count("aclnnRingAttentionUpdateV2") == before + 1
    with pytest.raises(ValueError, match="input_layout only supports"):
        torch_npu.npu_ring_attention_update(o, st, st, o, st, st, input_layout="BSH")
    with pytest.raises(ValueError, match="actual_seq_qlen is required"):
        torch_npu.npu_ring_attention_update(o, st[0], st[0], o, st[0], st[0], input_layout="TND")
    with pytest.raises(ValueError, match="last dimension to be 8"):
        torch_npu.npu_ring_attention_update(o, st[..., :4], st[..., :4], o, st[..., :4], st[..., :4])
    with pytest.raises(TypeError, match="softmax tensors must use float32"):
        torch_npu.npu_ring_attention_update(o, st.half(), st, o, st, st)


# --------------------------------------------------------------------------------------------- npu_attention_update

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("update_type", [0, 1])
def test_attention_update(dtype, update_type):
    g = torch.Generator().manual_seed(2)
    sp, n, d = 3, 6, 16
    lse = [torch.randn(n, generator=g) * 2 for _ in range(sp)]
    outs = [torch.randn(n, d, generator=g).to(dtype) for _ in range(sp)]
    out, lse_out = torch_npu.npu_attention_update([t.npu() for t in lse], [t.npu() for t in outs], update_type)
    expected_out, expected_lse = ref.attention_update(lse, outs)
    close(out, expected_out)
    assert lse_out.shape == (n,) and lse_out.dtype == torch.float32
    if update_type == 1:
        torch.testing.assert_close(lse_out.cpu(), expected_lse, rtol=1e-6, atol=1e-6)


def test_attention_update_meta_device_op_and_errors():
    lse = [torch.empty(5, device="meta")] * 2
    outs = [torch.empty(5, 8, device="meta", dtype=torch.bfloat16)] * 2
    out, lse_out = torch.ops.npu.npu_attention_update(lse, outs, 1)
    assert out.shape == (5, 8) and out.dtype == torch.bfloat16 and lse_out.shape == (5,)
    before = count("aclnnAttentionUpdate")
    torch_npu.npu_attention_update([torch.randn(4).npu()], [torch.randn(4, 8).npu()], 0)
    torch.npu.synchronize()
    assert count("aclnnAttentionUpdate") == before + 1
    with pytest.raises(ValueError, match="update_type must be 0"):
        torch_npu.npu_attention_update([torch.randn(4).npu()], [torch.randn(4, 8).npu()], 2)
    with pytest.raises(ValueError, match="of one length"):
        torch_npu.npu_attention_update([torch.randn(4).npu()] * 2, [torch.randn(4, 8).npu()], 0)
    with pytest.raises(TypeError, match="must be float32"):
        torch_npu.npu_attention_update([torch.randn(4).half().npu()], [torch.randn(4, 8).npu()], 0)


# -------------------------------------------------------------------------------------- npu_advance_step_flashattn

@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_advance_step_flashattn(index_dtype):
    g = torch.Generator().manual_seed(3)
    num_seqs, num_queries, block_size = 6, 4, 4
    tokens = torch.randint(5, 50, (num_seqs,), generator=g)
    sampled = torch.randint(5, 50, (num_queries, 1), generator=g)
    positions = torch.randint(5, 50, (num_seqs,), generator=g)
    lens = torch.randint(1, 30, (num_seqs,), generator=g)
    slots = torch.randint(5, 50, (num_seqs,), generator=g)
    tables = torch.randint(0, 40, (num_seqs, 30 // block_size + 1), generator=g)
    args = [t.to(index_dtype) for t in (tokens, sampled, positions, lens, slots, tables)]
    dev = [t.npu() for t in args]
    torch_npu.npu_advance_step_flashattn(*dev, num_seqs, num_queries, block_size)
    expected = ref.advance_step_flashattn(*args, num_seqs, num_queries, block_size)
    for got, exp in zip((dev[0], dev[2], dev[3], dev[4]), expected):
        assert torch.equal(got.cpu(), exp)


def test_advance_step_flashattn_speculative():
    g = torch.Generator().manual_seed(4)
    num_seqs, spec_num, block_size = 3, 2, 8
    per = spec_num + 1
    tokens = torch.randint(5, 50, (num_seqs * per,), generator=g)
    sampled = torch.randint(5, 50, (num_seqs, per), generator=g)
    sampled[1, 2:] = -1  # request 1 accepted 2 tokens, request 2 one
    sampled[2, 1:] = -1
    positions = torch.randint(5, 50, (num_seqs * per,), generator=g)
    lens, slots = positions + 1, torch.zeros(num_seqs * per, dtype=torch.int64)
    tables = torch.randint(0, 100, (num_seqs, 20), generator=g)
    spec = torch.randint(5, 50, (num_seqs, spec_num), generator=g)
    accepted = torch.tensor([2, 1, 0])
    dev = [t.npu() for t in (tokens, sampled, positions, lens, slots, tables)]
    torch_npu.npu_advance_step_flashattn(*dev, num_seqs, num_seqs, block_size, spec_token=spec.npu(),
                                         accepted_num=accepted.npu())
    expected = ref.advance_step_spec(tokens, sampled, positions, lens, slots, tables, num_seqs, block_size, spec,
                                     accepted)
    for got, exp in zip((dev[0], dev[2], dev[3], dev[4]), expected):
        assert torch.equal(got.cpu(), exp)


def test_advance_step_meta_device_ops_and_errors():
    t = lambda *s: torch.zeros(*s, dtype=torch.int64)  # noqa: E731
    torch.ops.npu.npu_advance_step_flashattn(*(x.to("meta") for x in (t(4), t(2, 1), t(4), t(4), t(4), t(4, 3))),
                                             4, 2, 4)
    dev = [x.npu() for x in (t(4), t(2, 1), t(4), t(4), t(4), t(4, 3))]
    before = count("aclnnAdvanceStep")
    torch_npu.npu_advance_step_flashattn(*dev, 4, 2, 4)
    torch.npu.synchronize()
    assert count("aclnnAdvanceStep") == before + 1
    with pytest.raises(ValueError, match="cannot exceed num_seqs"):
        torch_npu.npu_advance_step_flashattn(*dev, 1, 2, 4)
    with pytest.raises(ValueError, match="needs both spec_token and accepted_num"):
        torch_npu.npu_advance_step_flashattn(*dev, 4, 2, 4, spec_token=t(4, 1).npu())
    with pytest.raises(TypeError, match="must be int64"):
        torch_npu.npu_advance_step_flashattn(dev[0].float(), *dev[1:], 4, 2, 4)
    with pytest.raises(RuntimeError, match="outside block_tables"):
        big = [x.clone() for x in dev]
        big[3].fill_(100)  # positions past the 3 blocks of 4 a row holds
        torch_npu.npu_advance_step_flashattn(*big, 4, 2, 4)
        torch.npu.synchronize()


# ------------------------------------------------------------------------------- npu_attn_softmax_ and its backward

@pytest.mark.parametrize("dtype", FLOATS)
def test_attn_softmax_in_place(dtype):
    g = torch.Generator().manual_seed(5)
    scores, grad, values = (torch.randn(2, 5, 7, generator=g).to(dtype), torch.randn(2, 5, 4, generator=g).to(dtype),
                            torch.randn(2, 7, 4, generator=g).to(dtype))
    s = scores.npu()
    out = torch_npu.npu_attn_softmax_(s)
    assert out.data_ptr() == s.data_ptr()
    close(s, torch.softmax(scores.float(), -1).to(dtype))
    # The backward of softmax(scores) @ values, in place of the probabilities.
    leaf = scores.float().requires_grad_()
    (torch.softmax(leaf, -1) @ values.float()).backward(grad.float())
    torch_npu.npu_attn_softmax_backward_(s, grad.npu(), values.npu())
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(s.cpu().float(), leaf.grad, rtol=rtol * 4, atol=atol * 4)


def test_attn_softmax_meta_device_op_and_errors():
    m = torch.empty(2, 3, 4, device="meta")
    assert torch.ops.npu.npu_attn_softmax_(m).shape == (2, 3, 4)
    x = torch.randn(3, 4).npu()
    before = count("aclnnSoftmax")
    torch_npu.npu_attn_softmax_(x)
    torch.npu.synchronize()
    assert count("aclnnSoftmax") == before + 1
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        torch_npu.npu_attn_softmax_(torch.ones(3, 4, dtype=torch.int32).npu())
    with pytest.raises(ValueError, match="do not fit"):
        torch_npu.npu_attn_softmax_backward_(x, torch.randn(3, 2).npu(), torch.randn(5, 2).npu())


# ------------------------------------------------------------------------------------------------ npu_scatter_list

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int8])
def test_scatter_list(dtype):
    g = torch.Generator().manual_seed(6)
    var = [(torch.randn(2, 8, 4, generator=g) * 20).to(dtype) for _ in range(3)]
    updates = (torch.randn(3, 2, 2, 4, generator=g) * 20).to(dtype)
    mask = torch.tensor([1, 0, 1], dtype=torch.uint8)
    for indices in (torch.tensor([0, 3, 6], dtype=torch.int32), torch.tensor([[1, 2], [0, 1], [7, 1]])):
        got = torch_npu.npu_scatter_list([v.npu() for v in var], indices.npu(), updates.npu(), mask.npu())
        expected = ref.scatter_list(var, indices, updates, mask)
        assert len(got) == 3
        for a, e in zip(got, expected):
            assert torch.equal(a.cpu(), e)
        assert torch.equal(expected[1], var[1])  # masked out
    # axis -1 (the last dimension of updates), in place.
    var = [(torch.randn(2, 4, 8, generator=g) * 20).to(dtype) for _ in range(2)]
    updates = (torch.randn(2, 2, 4, 3, generator=g) * 20).to(dtype)
    indices = torch.tensor([5, 0], dtype=torch.int64)
    dev = [v.npu() for v in var]
    torch_npu.npu_scatter_list_(dev, indices.npu(), updates.npu(), None, "update", -1)
    for a, e in zip(dev, ref.scatter_list(var, indices, updates, None, axis=-1)):
        assert torch.equal(a.cpu(), e)


def test_scatter_list_meta_device_op_and_errors():
    var = [torch.empty(2, 8, 4, device="meta", dtype=torch.half)] * 2
    out = torch.ops.npu.npu_scatter_list(var, torch.empty(2, device="meta", dtype=torch.int32),
                                         torch.empty(2, 2, 1, 4, device="meta", dtype=torch.half))
    assert [o.shape for o in out] == [(2, 8, 4)] * 2 and out[0].dtype == torch.half
    dev = [torch.zeros(2, 8, 4).npu() for _ in range(2)]
    upd, idx = torch.ones(2, 2, 1, 4).npu(), torch.tensor([0, 7], dtype=torch.int32).npu()
    before = count("aclnnScatterList")
    torch_npu.npu_scatter_list_(dev, idx, upd)
    torch.npu.synchronize()
    assert count("aclnnScatterList") == before + 1
    with pytest.raises(ValueError, match="reduce only supports 'update'"):
        torch_npu.npu_scatter_list(dev, idx, upd, None, "add")
    with pytest.raises(ValueError, match="does not fit"):
        torch_npu.npu_scatter_list(dev, idx, torch.ones(2, 2, 1, 5).npu())
    with pytest.raises(TypeError, match="updates' dtype"):
        torch_npu.npu_scatter_list(dev, idx, upd.half())
    with pytest.raises(RuntimeError, match="outside its axis"):
        torch_npu.npu_scatter_list_(dev, torch.tensor([0, 8], dtype=torch.int32).npu(), upd)
        torch.npu.synchronize()
