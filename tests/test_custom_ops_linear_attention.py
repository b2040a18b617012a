"""Qwen3-Next style linear attention ops against CPU references written from their documented recurrences
(custom_op_refs.py): npu_recurrent_gated_delta_rule (state in place) and its functional form (g / gk / beta gates,
grouped heads, state indices, speculative acceptance, defaults), npu_fused_causal_conv1d (Qwen3-Next and Pangu
modes, speculative decoding, prefill, prefix caching, padded slots, residual; conv states in place) and
npu_masked_causal_conv1d with its backward (forward, gradients through autograd, the backward op itself);
float32 / float16 / bfloat16, Meta shapes, device ops and clear errors."""

import pytest
import torch

from op_refs import llm_ops as ref
import torch_npu

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1e-2)}


def count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def close(got, expected, scale=1):
    rtol, atol = TOL[expected.dtype]
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected, rtol=rtol * scale, atol=atol * scale)


# ------------------------------------------------------------------------------------ npu_recurrent_gated_delta_rule

def _delta_inputs(dtype, g, seqs=3, mtp=2, nk=2, nv=4, dk=8, dv=8, spare=2):
    tokens = seqs * mtp
    norm = torch.nn.functional.normalize
    q = norm(torch.rand(tokens, nk, dk, generator=g), dim=-1).to(dtype)
    k = norm(torch.rand(tokens, nk, dk, generator=g), dim=-1).to(dtype)
    v = torch.rand(tokens, nv, dv, generator=g).to(dtype)
    state = torch.rand(tokens + spare, nv, dv, dk, generator=g).to(dtype)
    extra = dict(beta=torch.rand(tokens, nv, generator=g).to(dtype), scale=0.5,
                 actual_seq_lengths=torch.full((seqs,), mtp, dtype=torch.int32),
                 ssm_state_indices=torch.randperm(tokens + spare, generator=g)[:tokens].to(torch.int32),
                 num_accepted_tokens=torch.randint(1, mtp + 1, (seqs,), generator=g).to(torch.int32),
                 g=-torch.rand(tokens, nv, generator=g))
    return q, k, v, state, extra


def _npu(kwargs):
    return {n: (t.npu() if isinstance(t, torch.Tensor) else t) for n, t in kwargs.items()}


@pytest.mark.parametrize("dtype", FLOATS)
def test_recurrent_gated_delta_rule(dtype):
    g = torch.Generator().manual_seed(0)
    q, k, v, state, extra = _delta_inputs(dtype, g)
    expected_out, expected_state = ref.recurrent_gated_delta_rule(q, k, v, state, **extra)
    state_npu = state.npu()
    out = torch_npu.npu_recurrent_gated_delta_rule(q.npu(), k.npu(), v.npu(), state_npu, **_npu(extra))
    close(out, expected_out)
    close(state_npu, expected_state)
    assert not torch.equal(state_npu.cpu(), state)  # updated in place
    # The functional form returns the new state and leaves its argument alone.
    state_npu = state.npu()
    out, new_state = torch_npu.npu_recurrent_gated_delta_rule_functional(q.npu(), k.npu(), v.npu(), state_npu,
                                                                         **_npu(extra))
    close(out, expected_out)
    close(new_state, expected_state)
    assert torch.equal(state_npu.cpu(), state)


def test_recurrent_gated_delta_rule_key_gate_and_defaults():
    g = torch.Generator().manual_seed(1)
    q, k, v, state, extra = _delta_inputs(torch.bfloat16, g)
    extra["gk"] = -torch.rand(v.shape[0], v.shape[1], q.shape[2], generator=g)  # per key column decay
    out, new_state = torch_npu.npu_recurrent_gated_delta_rule_functional(q.npu(), k.npu(), v.npu(), state.npu(),
                                                                         **_npu(extra))
    expected_out, expected_state = ref.recurrent_gated_delta_rule(q, k, v, state, **extra)
    close(out, expected_out)
    close(new_state, expected_state)
    # No gates, no beta, scale 1/sqrt(Dk), one token per sequence, token t on state row t.
    out, new_state = torch_npu.npu_recurrent_gated_delta_rule_functional(q.npu(), k.npu(), v.npu(), state.npu())
    expected_out, expected_state = ref.recurrent_gated_delta_rule(q, k, v, state)
    close(out, expected_out)
    close(new_state, expected_state)


def test_recurrent_gated_delta_rule_matches_the_matrix_form():
    # One token, one head: S' = S a (I - b k k^T) + b v k^T and o = S' (scale q), as the documentation writes it.
    g = torch.Generator().manual_seed(2)
    dk, dv = 4, 3
    q, k = torch.randn(1, 1, dk, generator=g), torch.nn.functional.normalize(torch.randn(1, 1, dk, generator=g), dim=-1)
    v, state = torch.randn(1, 1, dv, generator=g), torch.randn(1, 1, dv, dk, generator=g)
    beta, gate = torch.tensor([[0.7]]), torch.tensor([[-0.3]])
    out, new_state = torch_npu.npu_recurrent_gated_delta_rule_functional(q.npu(), k.npu(), v.npu(), state.npu(),
                                                                         beta=beta.npu(), scale=0.25, g=gate.npu())
    kk = k[0, 0]
    expected = state[0, 0] * gate.exp() @ (torch.eye(dk) - 0.7 * torch.outer(kk, kk)) + 0.7 * torch.outer(v[0, 0], kk)
    torch.testing.assert_close(new_state.cpu()[0, 0], expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.cpu()[0, 0], expected @ (0.25 * q[0, 0]), rtol=1e-5, atol=1e-5)


def test_recurrent_gated_delta_rule_meta_device_op_and_errors():
    meta = lambda *s: torch.empty(*s, device="meta", dtype=torch.bfloat16)  # noqa: E731
    out = torch.ops.npu.npu_recurrent_gated_delta_rule(meta(6, 2, 8), meta(6, 2, 8), meta(6, 4, 16), meta(9, 4, 16, 8),
                                                       scale=0.5)
    assert out.shape == (6, 4, 16) and out.dtype == torch.bfloat16
    out, st = torch.ops.npu.npu_recurrent_gated_delta_rule_functional(meta(6, 2, 8), meta(6, 2, 8), meta(6, 4, 16),
                                                                      meta(9, 4, 16, 8))
    assert st.shape == (9, 4, 16, 8)
    g = torch.Generator().manual_seed(3)
    q, k, v, state, extra = _delta_inputs(torch.bfloat16, g)
    before = count("aclnnRecurrentGatedDeltaRule")
    torch_npu.npu_recurrent_gated_delta_rule(q.npu(), k.npu(), v.npu(), state.npu(), **_npu(extra))
    torch.npu.synchronize()
    assert count("aclnnRecurrentGatedDeltaRule") == before + 1
    with pytest.raises(ValueError, match="multiple of the key heads"):
        torch_npu.npu_recurrent_gated_delta_rule(q.npu(), k.npu(), v[:, :3].npu(), state[:, :3].npu())
    with pytest.raises(ValueError, match="state must be"):
        torch_npu.npu_recurrent_gated_delta_rule(q.npu(), k.npu(), v.npu(), state[..., :4].npu())
    with pytest.raises(TypeError, match="share one dtype"):
        torch_npu.npu_recurrent_gated_delta_rule(q.float().npu(), k.npu(), v.npu(), state.npu())
    with pytest.raises(RuntimeError, match="outside"):
        torch_npu.npu_recurrent_gated_delta_rule(q.npu(), k.npu(), v.npu(), state.npu(),
                                                 ssm_state_indices=torch.full((6,), 99, dtype=torch.int32).npu())
        torch.npu.synchronize()


# ------------------------------------------------------------------------------------------- npu_fused_causal_conv1d

def _conv_call(x, w, states, **kwargs):
    """Runs the op on copies (the states on npu, in place) and returns (y, states)."""
    dev_states = states.npu()
    y = torch_npu.npu_fused_causal_conv1d(x.npu(), w.npu(), dev_states, **_npu(kwargs))
    return y, dev_states


@pytest.mark.parametrize("dtype", FLOATS)
def test_fused_causal_conv1d_speculative_decode_pangu(dtype):
    g = torch.Generator().manual_seed(4)
    batch, dim, width, m = 4, 16, 3, 2
    x = torch.randn(batch, m + 1, dim, generator=g).to(dtype)
    w = torch.randn(width, dim, generator=g).to(dtype)
    states = torch.randn(batch, width - 1 + m, dim, generator=g).to(dtype)
    kwargs = dict(cache_indices=torch.arange(batch, dtype=torch.int32),
                  num_accepted_tokens=torch.tensor([1, 2, 1, 3], dtype=torch.int32),
                  num_computed_tokens=torch.tensor([5, 1, 7, 4], dtype=torch.int32), conv_mode="pangu")
    y, new_states = _conv_call(x, w, states, **kwargs)
    expected_y, expected_states = ref.fused_causal_conv1d(x, w, states, **kwargs)
    close(y, expected_y)
    assert torch.equal(new_states.cpu(), expected_states)
    assert (y.cpu()[1, :1] == 0).all()  # pangu: the output whose taps reach before sequence 1 (1 computed) is 0


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("conv_mode", ["default", "pangu"])
def test_fused_causal_conv1d_prefill(dtype, conv_mode):
    g = torch.Generator().manual_seed(5)
    dim, width = 16, 3
    lens = [5, 3, 7, 4]
    x = torch.randn(sum(lens), dim, generator=g).to(dtype)
    w = torch.randn(width, dim, generator=g).to(dtype)
    states = torch.randn(8, width - 1, dim, generator=g).to(dtype)
    starts = torch.tensor([0, 5, 8, 15, 19], dtype=torch.int32)
    kwargs = dict(query_start_loc=starts, cache_indices=torch.tensor([0, 3, -1, 5], dtype=torch.int32),
                  num_computed_tokens=torch.tensor([0, 5, 2, 0], dtype=torch.int32), residual_connection=1,
                  conv_mode=conv_mode)
    y, new_states = _conv_call(x, w, states, **kwargs)
    expected_y, expected_states = ref.fused_causal_conv1d(x, w, states, **kwargs)
    close(y, expected_y)
    assert torch.equal(new_states.cpu(), expected_states)
    assert (y.cpu()[8:15] == 0).all()  # sequence 2's slot is the padding slot (-1): skipped
    assert not torch.equal(new_states.cpu()[0], states[0])


def test_fused_causal_conv1d_prefix_caching():
    g = torch.Generator().manual_seed(6)
    dim, width, block = 16, 3, 4
    lens, computed = [9, 6, 11, 5], [0, 2, 4, 3]
    x = torch.randn(sum(lens), dim, generator=g).half()
    w = torch.randn(width, dim, generator=g).half()
    blocks = 4
    states = torch.randn(4 * blocks, width - 1, dim, generator=g).half()
    starts = torch.tensor([0, 9, 15, 26, 31], dtype=torch.int32)
    first = [c // block for c in computed]
    last = [(c + n - 1) // block for c, n in zip(computed, lens)]
    kwargs = dict(query_start_loc=starts, cache_indices=torch.arange(4 * blocks, dtype=torch.int32).view(4, blocks),
                  num_computed_tokens=torch.tensor(computed, dtype=torch.int32),
                  block_idx_first_scheduled_token=torch.tensor(first, dtype=torch.int32),
                  block_idx_last_scheduled_token=torch.tensor(last, dtype=torch.int32),
                  initial_state_idx=torch.tensor(first, dtype=torch.int32), block_size=block, residual_connection=1,
                  conv_mode="pangu")
    y, new_states = _conv_call(x, w, states, **kwargs)
    expected_y, expected_states = ref.fused_causal_conv1d(x, w, states, **kwargs)
    close(y, expected_y)
    assert torch.equal(new_states.cpu(), expected_states)
    assert not torch.equal(expected_states[1], states[1])  # a completed block got its boundary inputs


def test_fused_causal_conv1d_meta_device_op_and_errors():
    x, w, s = torch.randn(2, 3, 16).half(), torch.randn(3, 16).half(), torch.randn(2, 4, 16).half()
    meta = torch.ops.npu.npu_fused_causal_conv1d(x.to("meta"), w.to("meta"), s.to("meta"))
    assert meta.shape == x.shape and meta.dtype == x.dtype
    before = count("aclnnFusedCausalConv1d")
    _conv_call(x, w, s)
    torch.npu.synchronize()
    assert count("aclnnFusedCausalConv1d") == before + 1
    with pytest.raises(ValueError, match="needs query_start_loc"):
        torch_npu.npu_fused_causal_conv1d(x[0].npu(), w.npu(), s.npu())
    with pytest.raises(ValueError, match="conv_mode must be"):
        torch_npu.npu_fused_causal_conv1d(x.npu(), w.npu(), s.npu(), conv_mode="mamba")
    with pytest.raises(ValueError, match="'pangu' needs num_computed_tokens"):
        torch_npu.npu_fused_causal_conv1d(x.npu(), w.npu(), s.npu(), conv_mode="pangu")
    with pytest.raises(TypeError, match="share one dtype"):
        torch_npu.npu_fused_causal_conv1d(x.npu(), w.float().npu(), s.npu())
    with pytest.raises(RuntimeError, match="reads past the cached state"):
        torch_npu.npu_fused_causal_conv1d(x.npu(), w.npu(), s.npu(),
                                          num_accepted_tokens=torch.tensor([4, 1], dtype=torch.int32).npu())
        torch.npu.synchronize()


# ------------------------------------------------------------------------------------------ npu_masked_causal_conv1d

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("width", [3, 4])
def test_masked_causal_conv1d_forward_and_gradients(dtype, width):
    g = torch.Generator().manual_seed(7)
    s, b, h = 9, 2, 8
    x, w = torch.randn(s, b, h, generator=g).to(dtype), torch.randn(width, h, generator=g).to(dtype)
    mask = torch.rand(b, s, generator=g) > 0.3
    for m in (None, mask):
        close(torch_npu.npu_masked_causal_conv1d(x.npu(), w.npu(), mask=m.npu() if m is not None else None),
              ref.masked_causal_conv1d(x, w, m))
    # Gradients through autograd against autograd of the reference (float32 inside both).
    grad = torch.randn(s, b, h, generator=g).to(dtype)
    xn, wn = x.npu().requires_grad_(), w.npu().requires_grad_()
    torch_npu.npu_masked_causal_conv1d(xn, wn, mask=mask.npu()).backward(grad.npu())
    xr, wr = x.float().requires_grad_(), w.float().requires_grad_()
    ref.masked_causal_conv1d(xr, wr, mask).backward(grad.float())
    close(xn.grad, xr.grad.to(dtype))
    close(wn.grad, wr.grad.to(dtype), scale=4)  # sums over S * B products
    # The backward op itself.
    gi, gw = torch_npu.npu_masked_causal_conv1d_backward(grad.npu(), x.npu(), w.npu(), mask=mask.npu())
    close(gi, xr.grad.to(dtype))
    close(gw, wr.grad.to(dtype), scale=4)


def test_masked_causal_conv1d_meta_device_ops_and_errors():
    x, w = torch.empty(5, 2, 8, device="meta", dtype=torch.bfloat16), torch.empty(3, 8, device="meta",
                                                                                   dtype=torch.bfloat16)
    assert torch.ops.npu.npu_masked_causal_conv1d(x, w).shape == (5, 2, 8)
    gi, gw = torch.ops.npu.npu_masked_causal_conv1d_backward(x, x, w)
    assert gi.shape == (5, 2, 8) and gw.shape == (3, 8) and gw.dtype == torch.bfloat16
    xn, wn = torch.randn(5, 2, 8).npu(), torch.randn(3, 8).npu()
    before, before_grad = count("aclnnMaskedCausalConv1d"), count("aclnnMaskedCausalConv1dBackward")
    torch_npu.npu_masked_causal_conv1d(xn.requires_grad_(), wn).sum().backward()
    torch.npu.synchronize()
    assert count("aclnnMaskedCausalConv1d") == before + 1
    assert count("aclnnMaskedCausalConv1dBackward") == before_grad + 1
    with pytest.raises(ValueError, match=r"mask must be \(B, S\)"):
        torch_npu.npu_masked_causal_conv1d(xn.detach(), wn, mask=torch.ones(5, 2, dtype=torch.bool).npu())
    with pytest.raises(TypeError, match="mask must be bool"):
        torch_npu.npu_masked_causal_conv1d(xn.detach(), wn, mask=torch.ones(2, 5).npu())
    with pytest.raises(ValueError, match="weight must be"):
        torch_npu.npu_masked_causal_conv1d(xn.detach(), torch.randn(3, 4).npu())
