"""Kernels PyTorch only has for accelerators (fused LSTM / GRU cells, nn.SyncBatchNorm's pieces), what
torch_npu accepts beyond PyTorch's CPU kernels (int32 class indices), and float16 computed in float32,
each against a CPU reference."""

import pytest
import torch
import torch.nn.functional as F

from ops_util import rand


@pytest.mark.parametrize("cell", [torch.nn.LSTM, torch.nn.GRU])
def test_lstm_and_gru_forward_and_backward_match_cpu(cell):
    torch.manual_seed(0)
    cpu = cell(6, 5, num_layers=2, bidirectional=True)
    npu = cell(6, 5, num_layers=2, bidirectional=True).npu()
    npu.load_state_dict(cpu.state_dict())
    x = torch.randn(4, 3, 6)
    xc, xn = x.clone().requires_grad_(), x.npu().requires_grad_()
    out_c, _ = cpu(xc)
    out_n, _ = npu(xn)
    torch.testing.assert_close(out_n.cpu(), out_c, atol=1e-5, rtol=1e-5)
    out_c.sum().backward()
    out_n.sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad, atol=1e-5, rtol=1e-5)
    for (name, pc), pn in zip(cpu.named_parameters(), npu.parameters()):
        torch.testing.assert_close(pn.grad.cpu(), pc.grad, atol=1e-4, rtol=1e-4, msg=name)


def test_fused_cells_against_the_unfused_formulas():
    torch.manual_seed(1)
    B, H = 3, 4
    ig, hg, cx = torch.randn(B, 4 * H), torch.randn(B, 4 * H), torch.randn(B, H)
    bi, bh = torch.randn(4 * H), torch.randn(4 * H)
    hy, cy, ws = torch.ops.aten._thnn_fused_lstm_cell(ig.npu(), hg.npu(), cx.npu(), bi.npu(), bh.npu())
    i, f, g, o = (ig + hg + bi + bh).chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    torch.testing.assert_close(cy.cpu(), f * cx + i * g)
    torch.testing.assert_close(hy.cpu(), o * (f * cx + i * g).tanh())
    torch.testing.assert_close(ws.cpu(), torch.cat([i, f, g, o], 1))
    # GRU: r, z, n gates; the workspace keeps hx and the hidden part of n.
    ig3, hg3, hx = torch.randn(B, 3 * H), torch.randn(B, 3 * H), torch.randn(B, H)
    hy, ws = torch.ops.aten._thnn_fused_gru_cell(ig3.npu(), hg3.npu(), hx.npu())
    r = (ig3[:, :H] + hg3[:, :H]).sigmoid()
    z = (ig3[:, H:2 * H] + hg3[:, H:2 * H]).sigmoid()
    n = (ig3[:, 2 * H:] + r * hg3[:, 2 * H:]).tanh()
    torch.testing.assert_close(hy.cpu(), (1 - z) * n + z * hx)
    assert ws.shape == (B, 5 * H)
    with pytest.raises(RuntimeError, match="hidden_size"):
        torch.ops.aten._thnn_fused_lstm_cell(ig.npu(), hg.npu(), torch.randn(B, H + 1).npu())


def test_sync_batch_norm_pieces_match_batch_norm():
    torch.manual_seed(2)
    x = torch.randn(6, 3, 5, 5)
    w, b = torch.randn(3), torch.randn(3)
    mean, invstd = torch.batch_norm_stats(x.npu(), 1e-5)
    torch.testing.assert_close(mean.cpu(), x.mean((0, 2, 3)))
    torch.testing.assert_close(invstd.cpu(), (x.var((0, 2, 3), unbiased=False) + 1e-5).rsqrt())
    y = torch.batch_norm_elemt(x.npu(), w.npu(), b.npu(), mean, invstd, 1e-5)
    ref = F.batch_norm(x, None, None, w, b, training=True, eps=1e-5)
    torch.testing.assert_close(y.cpu(), ref, atol=1e-5, rtol=1e-5)
    # Two "devices" holding halves of the batch gather to the statistics of the whole batch.
    halves = [x[:2], x[2:]]
    stats = [torch.batch_norm_stats(h.npu(), 1e-5) for h in halves]
    rm, rv = torch.zeros(3).npu(), torch.ones(3).npu()
    gm, gi = torch.batch_norm_gather_stats_with_counts(
        x.npu(), torch.stack([s[0] for s in stats]), torch.stack([s[1] for s in stats]), rm, rv, 0.1, 1e-5,
        torch.tensor([2.0 * 25, 4.0 * 25]).npu())
    torch.testing.assert_close(gm.cpu(), mean.cpu(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gi.cpu(), invstd.cpu(), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(rm.cpu(), 0.1 * x.mean((0, 2, 3)), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rv.cpu(), 0.9 + 0.1 * x.var((0, 2, 3), unbiased=True), atol=1e-5, rtol=1e-5)
    # Backward pieces give batch norm's input gradient.
    g = torch.randn_like(x)
    sum_dy, sum_dy_xmu, gw, gb = torch.batch_norm_backward_reduce(g.npu(), x.npu(), mean, invstd, w.npu(),
                                                                  True, True, True)
    gx = torch.batch_norm_backward_elemt(g.npu(), x.npu(), mean, invstd, w.npu(), sum_dy, sum_dy_xmu,
                                         torch.tensor([150], dtype=torch.int32).npu())
    xr = x.clone().requires_grad_()
    wr, br = w.clone().requires_grad_(), b.clone().requires_grad_()
    F.batch_norm(xr, None, None, wr, br, training=True, eps=1e-5).backward(g)
    torch.testing.assert_close(gx.cpu(), xr.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(gw.cpu(), wr.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(gb.cpu(), br.grad, atol=1e-4, rtol=1e-4)


def test_int32_class_indices_as_torch_npu_takes_them():
    idx = torch.tensor([0, 3, 1, 2])
    torch.testing.assert_close(F.one_hot(idx.int().npu(), 5).cpu(), F.one_hot(idx, 5).int())
    logits = torch.randn(4, 5)
    xn = logits.npu().requires_grad_()
    loss = F.cross_entropy(xn, idx.int().npu())
    xc = logits.clone().requires_grad_()
    ref = F.cross_entropy(xc, idx)
    torch.testing.assert_close(loss.cpu(), ref)
    loss.backward()
    ref.backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)
    logp = torch.randn(2, 3, 4, 4).log_softmax(1)
    tgt = torch.randint(0, 3, (2, 4, 4))
    torch.testing.assert_close(F.nll_loss(logp.npu(), tgt.int().npu()).cpu(), F.nll_loss(logp, tgt))
    with pytest.raises(RuntimeError):
        F.one_hot(torch.tensor([0.5]).npu())


def test_float16_ops_without_a_cpu_kernel_compute_in_float32():
    a, b = rand((5, 8), torch.float32), rand((4, 8), torch.float32)
    got = torch.cdist(a.half().npu(), b.half().npu())
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.cpu().float(), torch.cdist(a.half().float(), b.half().float()),
                               atol=2e-3, rtol=2e-3)
    x, y = a.half(), rand((5, 8), torch.float16)
    got = torch._VF._add_relu(x.npu(), y.npu(), alpha=3)
    torch.testing.assert_close(got.cpu(), torch.relu(x.float() + 3 * y.float()).half())
    m = torch.eye(3) * 2 + 0.1
    torch.testing.assert_close(torch.linalg.inv(m.half().npu()).cpu().float(), torch.linalg.inv(m.half().float()),
                               atol=2e-3, rtol=2e-3)


def test_float16_accumulation_is_float32_and_rounded_once():
    x = rand((1, 8, 16, 16), torch.float32)
    grid = rand((1, 6, 5, 2), torch.float32, -1, 1)
    got = F.grid_sample(x.half().npu(), grid.half().npu(), align_corners=True)
    ref = F.grid_sample(x.half().float(), grid.half().float(), align_corners=True).half()
    torch.testing.assert_close(got.cpu(), ref, atol=0, rtol=0)
    v = torch.full((4096,), 0.1).half()
    assert v.npu().cumsum(0).cpu()[-1].item() == pytest.approx(v.float().cumsum(0)[-1].half().item())


def test_threshold_backward_broadcasts_and_empty_convolution():
    g, s = torch.randn(3, 4, 5), torch.randn(1, 1, 1)
    got = torch.ops.aten.threshold_backward(g.npu(), s.npu(), 0.0)
    torch.testing.assert_close(got.cpu(), torch.ops.aten.threshold_backward(g, s, 0.0))
    x, w, b = torch.randn(2, 0, 6, 6), torch.randn(4, 0, 3, 3), torch.randn(4)
    torch.testing.assert_close(F.conv2d(x.npu(), w.npu(), b.npu()).cpu(), F.conv2d(x, w, b))


def test_softmax_backward_of_a_half_to_float_softmax():
    grad, out = torch.randn(2, 3), torch.softmax(torch.randn(2, 3), -1)
    got = torch._softmax_backward_data(grad.npu(), out.npu(), -1, torch.float16)
    assert got.dtype == torch.float16
    ref = torch._softmax_backward_data(grad, out, -1, torch.float32).half()
    torch.testing.assert_close(got.cpu(), ref)
    x = torch.randn(3, 4).half()
    y = torch._softmax(x.npu(), -1, True)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y.cpu(), torch.softmax(x.float(), -1))
