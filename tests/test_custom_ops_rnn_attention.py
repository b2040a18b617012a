"""Tests of the whole-sequence RNN custom ops (npu_lstm, npu_lstm_data, npu_gru and their backward ops) against CPU
references and torch.nn.LSTM / torch.nn.GRU."""
import pytest
import torch
import torch_npu

from op_refs import rnn_attention as ref

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2}
T, B, I, H = 4, 3, 5, 6


def rnd(g, *shape, dtype=torch.float32):
    return (torch.rand(*shape, generator=g) - 0.5).to(dtype)


def make_lstm(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [rnd(g, T, B, I, dtype=dtype), rnd(g, I + H, 4 * H, dtype=dtype), rnd(g, 4 * H, dtype=dtype),
            rnd(g, 1, B, H, dtype=dtype), rnd(g, 1, B, H, dtype=dtype)]


def npu_lstm(x, w, b, h, c, seq_mask=None, direction=False):
    mask = seq_mask if seq_mask is not None else torch.empty(0, dtype=x.dtype, device=x.device)
    return torch_npu.npu_lstm(x, w, b, mask, h, c, True, 1, 0.0, True, False, False, seq_mask is not None, direction)


def packed_case():
    lengths = torch.tensor([4, 2, 1])
    batch_sizes = torch.tensor([int((lengths > t).sum()) for t in range(T)])
    return batch_sizes, ref.lstm_mask_from_batch_sizes(batch_sizes, B, H)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("direction", [False, True])
def test_lstm_forward(dtype, direction):
    args = make_lstm(dtype)
    out = npu_lstm(*[t.npu() for t in args], direction=direction)
    expected = ref.lstm(*args, direction=direction)
    assert len(out) == 8
    for got, want in zip(out, expected):
        assert got.shape == (T, B, H) and got.dtype == dtype
        torch.testing.assert_close(got.cpu().float(), want, atol=TOL[dtype], rtol=TOL[dtype])


def test_lstm_matches_torch_lstm():
    # torch_npu's layout: weight = cat(w_ih, w_hh, 1).t(), bias = b_ih + b_hh, gates i, f, j, o
    module = torch.nn.LSTM(I, H)
    x, h0, c0 = torch.randn(T, B, I), torch.randn(1, B, H), torch.randn(1, B, H)
    want_y, (want_h, want_c) = module(x, (h0, c0))
    weight, bias = (t.detach().contiguous() for t in ref.lstm_weights_from_module(module))
    out = npu_lstm(x.npu(), weight.npu(), bias.npu(), h0.npu(), c0.npu())
    torch.testing.assert_close(out[0].cpu(), want_y.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1].cpu()[-1:], want_h.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[2].cpu()[-1:], want_c.detach(), atol=1e-5, rtol=1e-5)


def test_lstm_seq_mask():
    args = make_lstm()
    _, mask = packed_case()
    out = npu_lstm(*[t.npu() for t in args], seq_mask=mask.half().npu())
    for got, want in zip(out[:3], ref.lstm(*args, seq_mask=mask)[:3]):
        torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)
    assert (out[0].cpu()[2:, 1:] == 0).all()  # finished sequences emit zeros


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_lstm_backward(dtype):
    args = make_lstm(dtype)
    g = torch.Generator().manual_seed(1)
    grads = [torch.randn(T, B, H, generator=g) for _ in range(3)]
    cpu_leaves = [t.detach().float().clone().requires_grad_() for t in args]
    torch.autograd.backward(list(ref.lstm(*cpu_leaves)[:3]), grads)
    npu_leaves = [t.detach().npu().requires_grad_() for t in args]
    out = npu_lstm(*npu_leaves)
    torch.autograd.backward(list(out[:3]), [t.to(dtype).npu() for t in grads])
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    for leaf_npu, leaf_cpu in zip(npu_leaves, cpu_leaves):
        assert leaf_npu.grad.shape == leaf_npu.shape and leaf_npu.grad.dtype == dtype
        torch.testing.assert_close(leaf_npu.grad.cpu().float(), leaf_cpu.grad, atol=tol, rtol=tol)


@pytest.mark.parametrize("direction, masked", [(True, False), (False, True), (True, True)])
def test_lstm_backward_reverse_and_masked(direction, masked):
    # a reverse or seq_mask run: the gradient of exactly that run, as CPU autograd through the reference gives
    args = make_lstm()
    mask = packed_case()[1] if masked else None
    g = torch.Generator().manual_seed(2)
    grads = [torch.randn(T, B, H, generator=g) for _ in range(3)]
    cpu_leaves = [t.clone().requires_grad_() for t in args]
    torch.autograd.backward(list(ref.lstm(*cpu_leaves, seq_mask=mask, direction=direction)[:3]), grads)
    npu_leaves = [t.detach().npu().requires_grad_() for t in args]
    out = npu_lstm(*npu_leaves, seq_mask=None if mask is None else mask.npu(), direction=direction)
    torch.autograd.backward(list(out[:3]), [t.npu() for t in grads])
    for leaf_npu, leaf_cpu in zip(npu_leaves, cpu_leaves):
        torch.testing.assert_close(leaf_npu.grad.cpu(), leaf_cpu.grad, atol=1e-4, rtol=1e-4)


def test_lstm_backward_only_last_h_used():
    # unused outputs reach the backward as undefined gradients, read as zeros
    args = make_lstm()
    cpu_leaves = [t.clone().requires_grad_() for t in args]
    ref.lstm(*cpu_leaves)[1][-1].sum().backward()
    npu_leaves = [t.detach().npu().requires_grad_() for t in args]
    npu_lstm(*npu_leaves)[1][-1].sum().backward()
    for leaf_npu, leaf_cpu in zip(npu_leaves, cpu_leaves):
        torch.testing.assert_close(leaf_npu.grad.cpu(), leaf_cpu.grad, atol=1e-5, rtol=1e-5)


def test_lstm_meta_and_device_op():
    args = make_lstm()
    mask = torch.empty(0)
    meta_out = torch.ops.npu.npu_lstm(*[t.to("meta") for t in args[:3]], mask.to("meta"),
                                      *[t.to("meta") for t in args[3:]], True, 1, 0.0, True, False, False, False,
                                      False)
    assert [tuple(t.shape) for t in meta_out] == [(T, B, H)] * 8
    assert all(t.dtype == torch.float32 for t in meta_out)
    before = torch.npu.op_stats().get("aclnnDynamicRNN", {}).get("device_op", 0)
    npu_lstm(*[t.npu() for t in args])
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnDynamicRNN"]["device_op"] == before + 1


def test_lstm_backward_op_direct_and_meta():
    args = make_lstm()
    out = ref.lstm(*args)
    grads = [torch.randn(T, B, H) for _ in range(3)]
    res = torch.ops.npu.npu_lstm_backward(*[t.npu() for t in grads], *[t.npu() for t in args],
                                          *[t.npu() for t in out])
    assert [tuple(t.shape) for t in res] == [(T, B, I), (I + H, 4 * H), (4 * H,), (1, B, H), (1, B, H)]
    meta = torch.ops.npu.npu_lstm_backward(*[t.to("meta") for t in grads + args + list(out)])
    assert [tuple(t.shape) for t in meta] == [tuple(t.shape) for t in res]
    before = torch.npu.op_stats().get("aclnnDynamicRNNGrad", {}).get("device_op", 0)
    torch.ops.npu.npu_lstm_backward(None, None, grads[2].npu(), *[t.npu() for t in args], *[t.npu() for t in out])
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnDynamicRNNGrad"]["device_op"] == before + 1


def test_lstm_errors():
    x, w, b, h, c = [t.npu() for t in make_lstm()]
    with pytest.raises(ValueError, match="npu_lstm: weight must be"):
        npu_lstm(x, w[:-1], b, h, c)
    with pytest.raises(ValueError, match="npu_lstm: input must be 3-D"):
        npu_lstm(x[0], w, b, h, c)
    with pytest.raises(ValueError, match="npu_lstm: h and c must hold"):
        npu_lstm(x, w, b, h[:, :1], c)
    with pytest.raises(ValueError, match="npu_lstm: with flag_seq=True seq_mask"):
        npu_lstm(x, w, b, h, c, seq_mask=torch.ones(2, device=x.device))
    with pytest.raises(TypeError, match="npu_lstm: input must be"):
        npu_lstm(x.int(), w, b, h, c)
    with pytest.raises(TypeError, match="npu_lstm: weight, bias, h and c must have"):
        npu_lstm(x, w.half(), b, h, c)


def npu_lstm_data(x, batch_sizes, w, b, h, c, seq_mask, direction=False):
    return torch_npu.npu_lstm_data(x, batch_sizes, w, b, seq_mask, h, c, True, 1, 0.0, True, False, False, True,
                                   direction)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("direction", [False, True])
def test_lstm_data_forward(dtype, direction):
    args = make_lstm(dtype)
    batch_sizes, mask = packed_case()
    x, w, b, h, c = [t.npu() for t in args]
    out = npu_lstm_data(x, batch_sizes.npu(), w, b, h, c, mask.half().npu(), direction)
    expected = ref.lstm(*args, seq_mask=mask, direction=direction)
    for got, want in zip(out, expected[:3]):
        assert got.shape == (T, B, H) and got.dtype == dtype
        torch.testing.assert_close(got.cpu().float(), want, atol=TOL[dtype], rtol=TOL[dtype])


def test_lstm_data_matches_packed_bidirectional_lstm():
    module = torch.nn.LSTM(I, H, bidirectional=True)
    x, h0, c0 = torch.randn(T, B, I), torch.randn(2, B, H), torch.randn(2, B, H)
    lengths = torch.tensor([4, 2, 1])
    batch_sizes, mask = packed_case()
    packed_y, (want_h, _) = module(torch.nn.utils.rnn.pack_padded_sequence(x, lengths), (h0, c0))
    want_y = torch.nn.utils.rnn.pad_packed_sequence(packed_y)[0].detach()
    for k, suffix in enumerate(["", "_reverse"]):
        weight, bias = (t.detach().contiguous() for t in ref.lstm_weights_from_module(module, suffix))
        out = npu_lstm_data(x.npu(), batch_sizes.npu(), weight.npu(), bias.npu(), h0[k:k + 1].npu(), c0[k:k + 1].npu(),
                            mask.half().npu(), direction=bool(k))
        torch.testing.assert_close(out[0].cpu(), want_y[..., k * H:(k + 1) * H], atol=1e-5, rtol=1e-5)
        final_h = out[1].cpu()[0 if k else -1]
        torch.testing.assert_close(final_h, want_h[k].detach(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("direction", [False, True])
def test_lstm_data_backward(direction):
    args = make_lstm()
    batch_sizes, mask = packed_case()
    g = torch.Generator().manual_seed(2)
    grads = [torch.randn(T, B, H, generator=g) for _ in range(3)]
    cpu_leaves = [t.clone().requires_grad_() for t in args]
    torch.autograd.backward(list(ref.lstm(*cpu_leaves, seq_mask=mask, direction=direction)[:3]), grads)
    npu_leaves = [t.detach().npu().requires_grad_() for t in args]
    x, w, b, h, c = npu_leaves
    out = npu_lstm_data(x, batch_sizes.npu(), w, b, h, c, mask.half().npu(), direction)
    torch.autograd.backward(list(out[:3]), [t.npu() for t in grads])
    for leaf_npu, leaf_cpu in zip(npu_leaves, cpu_leaves):
        torch.testing.assert_close(leaf_npu.grad.cpu(), leaf_cpu.grad, atol=1e-4, rtol=1e-4)


def test_lstm_data_meta_and_errors():
    args = make_lstm()
    batch_sizes, mask = packed_case()
    meta_out = torch.ops.npu.npu_lstm_data(args[0].to("meta"), batch_sizes.to("meta"), args[1].to("meta"),
                                           args[2].to("meta"), mask.to("meta"), args[3].to("meta"),
                                           args[4].to("meta"), True, 1, 0.0, True, False, False, True, False)
    assert [tuple(t.shape) for t in meta_out] == [(T, B, H)] * 8
    x, w, b, h, c = [t.npu() for t in args]
    with pytest.raises(ValueError, match="npu_lstm_data: batch_sizes must be 1-D"):
        npu_lstm_data(x, batch_sizes[:2].npu(), w, b, h, c, mask.npu())
    with pytest.raises(TypeError, match="npu_lstm_data: batch_sizes must be an integer"):
        npu_lstm_data(x, batch_sizes.float().npu(), w, b, h, c, mask.npu())


def make_gru(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [rnd(g, T, B, I, dtype=dtype), rnd(g, B, H, dtype=dtype), rnd(g, I, 3 * H, dtype=dtype),
            rnd(g, H, 3 * H, dtype=dtype), rnd(g, 3 * H, dtype=dtype), rnd(g, 3 * H, dtype=dtype)]


def npu_gru(x, hx, w_x, w_h, b_x, b_h):
    seq_length = torch.empty(0, dtype=x.dtype, device=x.device)
    return torch_npu.npu_gru(x, hx, w_x, w_h, b_x, b_h, seq_length, True, 1, 0.0, True, False, False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gru_forward(dtype):
    args = make_gru(dtype)
    out = npu_gru(*[t.npu() for t in args])
    assert len(out) == 6
    for got, want in zip(out, ref.gru(*args)):
        assert got.shape == (T, B, H) and got.dtype == dtype
        torch.testing.assert_close(got.cpu().float(), want, atol=TOL[dtype], rtol=TOL[dtype])


def test_gru_matches_torch_gru():
    module = torch.nn.GRU(I, H)
    x, h0 = torch.randn(T, B, I), torch.randn(1, B, H)
    want_y, want_h = module(x, h0)
    params = [module.weight_ih_l0.t(), module.weight_hh_l0.t(), module.bias_ih_l0, module.bias_hh_l0]
    out = npu_gru(x.npu(), h0[0].npu(), *[p.detach().contiguous().npu() for p in params])
    torch.testing.assert_close(out[0].cpu(), want_y.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1].cpu()[-1], want_h[0].detach(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_gru_backward(dtype):
    args = make_gru(dtype)
    g = torch.Generator().manual_seed(3)
    grads = [torch.randn(T, B, H, generator=g) for _ in range(2)]
    cpu_leaves = [t.detach().float().clone().requires_grad_() for t in args]
    torch.autograd.backward(list(ref.gru(*cpu_leaves)[:2]), grads)
    npu_leaves = [t.detach().npu().requires_grad_() for t in args]
    torch.autograd.backward(list(npu_gru(*npu_leaves)[:2]), [t.to(dtype).npu() for t in grads])
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    for leaf_npu, leaf_cpu in zip(npu_leaves, cpu_leaves):
        assert leaf_npu.grad.shape == leaf_npu.shape
        torch.testing.assert_close(leaf_npu.grad.cpu().float(), leaf_cpu.grad, atol=tol, rtol=tol)


def test_gru_meta_device_op_and_backward_order():
    args = make_gru()
    seq_length = torch.empty(0)
    meta_out = torch.ops.npu.npu_gru(*[t.to("meta") for t in args], seq_length.to("meta"), True, 1, 0.0, True,
                                     False, False)
    assert [tuple(t.shape) for t in meta_out] == [(T, B, H)] * 6
    before = torch.npu.op_stats().get("aclnnDynamicGRUV2", {}).get("device_op", 0)
    npu_gru(*[t.npu() for t in args])
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnDynamicGRUV2"]["device_op"] == before + 1
    x, hx, w_x, w_h, b_x, b_h = args
    out = ref.gru(*args)
    grad_y = torch.randn(T, B, H)
    res = torch.ops.npu.npu_gru_backward(grad_y.npu(), None, x.npu(), w_x.npu(), w_h.npu(), b_x.npu(), b_h.npu(),
                                         seq_length.npu(), hx.npu(), *[t.npu() for t in out])
    # upstream's order: weight_input, weight_hidden, input, bias_input, bias_hidden, hx
    assert [tuple(t.shape) for t in res] == [(I, 3 * H), (H, 3 * H), (T, B, I), (3 * H,), (3 * H,), (B, H)]


def test_gru_errors():
    x, hx, w_x, w_h, b_x, b_h = [t.npu() for t in make_gru()]
    with pytest.raises(ValueError, match="npu_gru: weight_input must be"):
        npu_gru(x, hx, w_x[:-1], w_h, b_x, b_h)
    with pytest.raises(ValueError, match="npu_gru: bias_hidden must be"):
        npu_gru(x, hx, w_x, w_h, b_x, b_h[:-1])
    with pytest.raises(ValueError, match="npu_gru: hx must hold"):
        npu_gru(x, hx[:1], w_x, w_h, b_x, b_h)
    with pytest.raises(TypeError, match="npu_gru: input must be"):
        npu_gru(x.int(), hx, w_x, w_h, b_x, b_h)
