"""Tests of the recurrent-net custom ops (npu_lstm_cell and its backward) against CPU references."""
import pytest
import torch
import torch_npu

from op_refs import rnn_misc as ref

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 3e-2}


def make_cell(batch=3, input_size=5, hidden=4, dtype=torch.float32, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    def rnd(*shape):
        return (torch.rand(*shape, generator=g) - 0.5).to(dtype)
    args = [rnd(batch, input_size), rnd(input_size, 4 * hidden), rnd(hidden, 4 * hidden), rnd(batch, hidden),
            rnd(batch, hidden)]
    biases = [rnd(4 * hidden), rnd(4 * hidden)] if bias else [None, None]
    return args, biases


def to_npu(tensors):
    return [t.npu() if t is not None else None for t in tensors]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
def test_lstm_cell_forward(dtype, bias):
    args, biases = make_cell(dtype=dtype, bias=bias)
    out = torch_npu.npu_lstm_cell(*to_npu(args), *to_npu(biases))
    expected = ref.lstm_cell(*args, *biases)
    assert len(out) == 8
    for got, want in zip(out, expected):
        assert got.shape == (1, 3, 4) and got.dtype == dtype
        torch.testing.assert_close(got.cpu().float(), want, atol=TOL[dtype], rtol=TOL[dtype])


def test_lstm_cell_matches_torch_lstm_cell():
    # torch.nn.LSTMCell keeps weights as [4H, input]; torch_npu takes them transposed.
    cell = torch.nn.LSTMCell(6, 5)
    x, h, c = torch.randn(2, 6), torch.randn(2, 5), torch.randn(2, 5)
    want_h, want_c = cell(x, (h, c))
    out = torch_npu.npu_lstm_cell(x.npu(), cell.weight_ih.detach().t().contiguous().npu(),
                                  cell.weight_hh.detach().t().contiguous().npu(), h.npu(), c.npu(),
                                  cell.bias_ih.detach().npu(), cell.bias_hh.detach().npu())
    torch.testing.assert_close(out[1].cpu()[0], want_h.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[2].cpu()[0], want_c.detach(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_lstm_cell_backward(dtype):
    args, biases = make_cell(dtype=dtype)
    g = torch.Generator().manual_seed(1)
    grad_y, grad_h, grad_c = (torch.randn(1, 3, 4, generator=g) for _ in range(3))
    cpu_leaves = [t.detach().float().clone().requires_grad_() for t in args + biases]
    y, h, c = ref.lstm_cell(*cpu_leaves)[:3]
    torch.autograd.backward([y, h, c], [grad_y, grad_h, grad_c])
    npu_leaves = [t.detach().npu().requires_grad_() for t in args + biases]
    out = torch_npu.npu_lstm_cell(*npu_leaves)
    torch.autograd.backward(list(out[:3]), [t.to(dtype).npu() for t in (grad_y, grad_h, grad_c)])
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    for leaf_npu, leaf_cpu in zip(npu_leaves, cpu_leaves):
        torch.testing.assert_close(leaf_npu.grad.cpu().float(), leaf_cpu.grad, atol=tol, rtol=tol)


def test_lstm_cell_backward_only_h_used():
    # an unused output (y, c) reaches the backward as an undefined gradient, read as zeros
    args, biases = make_cell()
    cpu_leaves = [t.clone().requires_grad_() for t in args + biases]
    ref.lstm_cell(*cpu_leaves)[1].sum().backward()
    npu_leaves = [t.detach().npu().requires_grad_() for t in args + biases]
    torch_npu.npu_lstm_cell(*npu_leaves)[1].sum().backward()
    for leaf_npu, leaf_cpu in zip(npu_leaves, cpu_leaves):
        torch.testing.assert_close(leaf_npu.grad.cpu(), leaf_cpu.grad, atol=1e-5, rtol=1e-5)


def test_lstm_cell_meta_and_device_op():
    args, biases = make_cell(batch=7, input_size=9, hidden=6)
    meta_out = torch.ops.npu.npu_lstm_cell(*[t.to("meta") for t in args + biases])
    assert [tuple(t.shape) for t in meta_out] == [(1, 7, 6)] * 8
    before = torch.npu.op_stats().get("aclnnLstmCell", {}).get("device_op", 0)
    torch_npu.npu_lstm_cell(*to_npu(args + biases))
    torch.npu.synchronize()
    assert torch.npu.op_stats()["aclnnLstmCell"]["device_op"] == before + 1


def test_lstm_cell_errors():
    args, biases = make_cell()
    x, w_ih, w_hh, h, c = to_npu(args)
    with pytest.raises(ValueError, match="npu_lstm_cell: w_ih must be"):
        torch_npu.npu_lstm_cell(x, w_ih[:, :-1], w_hh, h, c)
    with pytest.raises(ValueError, match="npu_lstm_cell: b_ih and b_hh"):
        torch_npu.npu_lstm_cell(x, w_ih, w_hh, h, c, biases[0].npu())
    with pytest.raises(TypeError, match="npu_lstm_cell: input must be"):
        torch_npu.npu_lstm_cell(x.int(), w_ih, w_hh, h, c)
