"""dropout (mask statistics, seeding, scaling, backward) and embedding (forward, backward) on npu."""

import pytest
import torch
import torch.nn.functional as F

from ops_util import (FLOATS, assert_device_ops, assert_same, assert_strict_ok, check_vs_cpu, device_op_stats,
                      grads_vs_cpu, rand, register_strict, to_npu)


def _dropout(x, p, seed, **kw):
    torch.npu.manual_seed(seed)
    return F.dropout(x, p, training=True, **kw)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout_scaling_and_keep_rate(dtype, p):
    x = rand((40, 50), dtype, 0.5, 2.0)
    nx = to_npu(x)
    out = _dropout(nx, p, 7)
    assert out.device.type == "npu" and out.dtype == dtype and out.shape == x.shape
    out = out.cpu()
    kept = out != 0
    # kept elements are the input scaled by 1 / (1 - p), computed in the input dtype
    expected = (x * (1.0 / (1.0 - p))).to(dtype)
    torch.testing.assert_close(out[kept], expected[kept], atol=0, rtol=2e-2 if dtype != torch.float32 else 1e-6)
    n = x.numel()
    sigma = (n * p * (1 - p)) ** 0.5
    assert abs(kept.sum().item() - n * (1 - p)) < 5 * sigma, f"kept {kept.sum().item()} of {n} at p={p}"


def test_dropout_same_seed_same_mask_and_different_seeds_differ():
    x = torch.ones(64, 32, device="npu")
    a, b, c = _dropout(x, 0.5, 123).cpu(), _dropout(x, 0.5, 123).cpu(), _dropout(x, 0.5, 321).cpu()
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    # the mask does not depend on the dtype of equal-shaped inputs being drawn from the same seed twice
    d = _dropout(x.half(), 0.5, 123).cpu()
    assert torch.equal(_dropout(x.half(), 0.5, 123).cpu(), d)
    # successive draws without reseeding differ
    torch.npu.manual_seed(5)
    e, f = F.dropout(x, 0.5).cpu(), F.dropout(x, 0.5).cpu()
    assert not torch.equal(e, f)


def test_dropout_edge_probabilities_eval_and_shapes():
    x = rand((6, 7))
    nx = to_npu(x)
    assert_same(_dropout(nx, 0.0, 1), x)                         # p = 0: identity
    assert_same(_dropout(nx, 1.0, 1), torch.zeros_like(x))       # p = 1: all dropped
    assert_same(F.dropout(nx, 0.5, training=False), x)           # eval: identity
    assert_same(_dropout(to_npu(torch.empty(0, 3)), 0.5, 1), torch.empty(0, 3))
    out = _dropout(to_npu(torch.tensor(2.0)), 0.5, 1)
    assert out.shape == () and out.item() in (0.0, 4.0)
    t = to_npu(rand((8, 6)).t())                                  # non-contiguous input
    out = _dropout(t, 0.5, 3).cpu()
    kept = out != 0
    torch.testing.assert_close(out[kept], (t.cpu() * 2)[kept])


def test_dropout_in_place_and_native_mask():
    # dropout_ (in place) draws its mask through bernoulli_ (as PyTorch does on every device), so
    # it is compared with itself per seed rather than with the out-of-place mask
    x = rand((20, 10), lo=1, hi=2)
    results = []
    for _ in range(2):
        nx = to_npu(x)
        torch.npu.manual_seed(11)
        r = F.dropout(nx, 0.3, inplace=True)
        assert r.data_ptr() == nx.data_ptr()
        results.append(nx.cpu())
    assert torch.equal(results[0], results[1])
    kept = results[0] != 0
    assert 0 < kept.sum() < x.numel()
    torch.testing.assert_close(results[0][kept], (x / 0.7)[kept])
    torch.npu.manual_seed(11)
    out, mask = torch.native_dropout(to_npu(x), 0.3, True)
    assert mask.dtype == torch.bool and mask.device.type == "npu"
    torch.testing.assert_close(out.cpu(), torch.where(mask.cpu(), x / 0.7, torch.zeros(())))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_dropout_backward_uses_the_mask(dtype):
    x = rand((30, 20), dtype, 0.5, 1.5).to("npu").requires_grad_()
    torch.npu.manual_seed(9)
    out = F.dropout(x, 0.4)
    g = rand((30, 20), dtype)
    out.backward(to_npu(g))
    mask = (out != 0).cpu()
    expected = torch.where(mask, g * (1 / 0.6), torch.zeros((), dtype=dtype)).to(dtype)
    torch.testing.assert_close(x.grad.cpu(), expected, atol=0, rtol=2e-2 if dtype != torch.float32 else 1e-6)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32], ids=str)
def test_embedding_forward(dtype, index_dtype):
    w = rand((10, 4), dtype)
    for idx_shape in [(5,), (2, 3), (), (0,), (2, 0)]:
        idx = torch.randint(0, 10, idx_shape, dtype=index_dtype)
        check_vs_cpu(F.embedding, idx, w)
    check_vs_cpu(F.embedding, torch.randint(0, 10, (4, 3)).t(), w)                 # non-contiguous indices
    check_vs_cpu(F.embedding, torch.randint(0, 10, (3,)), rand((4, 10), dtype).t())  # non-contiguous weight
    check_vs_cpu(lambda i, ww: F.embedding(i, ww, padding_idx=2), torch.tensor([2, 0, 2]).to(index_dtype), w)


def test_embedding_max_norm_renormalises_weight_like_cpu():
    w = rand((6, 3), lo=-3, hi=3)
    idx = torch.tensor([0, 2, 2, 5])
    nw = to_npu(w)
    cpu_out = F.embedding(idx, w, max_norm=1.0)
    npu_out = F.embedding(to_npu(idx), nw, max_norm=1.0)
    assert_same(npu_out, cpu_out)
    assert_same(nw, w, scale=2)        # rows that were looked up are renormalised in place


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_embedding_backward(dtype):
    idx = torch.tensor([[1, 3, 1], [0, 9, 1]])                  # repeated indices accumulate
    w = rand((10, 4), dtype)
    grads_vs_cpu(lambda ww: F.embedding(idx.to(ww.device), ww), [w], scale=4)
    grads_vs_cpu(lambda ww: F.embedding(idx.to(ww.device), ww, padding_idx=1), [w], scale=4)
    grads_vs_cpu(lambda ww: F.embedding(idx.to(ww.device), ww, scale_grad_by_freq=True), [w], scale=4)
    grads_vs_cpu(lambda ww: F.embedding(idx.to(ww.device).t(), ww), [w], scale=4)


def test_errors_match_cpu():
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        F.dropout(torch.ones(3, device="npu"), 1.5)
    with pytest.raises(RuntimeError, match="dropout probability has to be between 0 and 1"):
        torch.native_dropout(torch.ones(3, device="npu"), -0.1, True)
        torch.npu.synchronize()
    with pytest.raises((IndexError, RuntimeError), match="index out of range in self"):
        F.embedding(torch.tensor([0, 10], device="npu"), torch.ones(10, 3, device="npu"))
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="Expected tensor for argument #1 'indices' to have one of the following"):
        F.embedding(torch.tensor([0.0, 1.0], device="npu"), torch.ones(10, 3, device="npu"))
        torch.npu.synchronize()


def test_named_device_ops_are_used():
    x = torch.randn(8, 8).npu().requires_grad_()
    w = torch.randn(10, 4).npu().requires_grad_()
    idx = torch.tensor([[1, 3, 1], [0, 9, 2]]).npu()

    def run():
        F.dropout(x, 0.5).sum().backward()
        F.embedding(idx, w).sum().backward()

    assert_device_ops(device_op_stats(run), ["aclnnDropout", "aclnnDropoutBackward", "aclnnEmbedding",
                                             "aclnnEmbeddingDenseBackward"])


register_strict("dropout_embedding", """
    x = torch.rand(16, 8) + 0.5
    nx = npu(x, grad=True)
    torch.npu.manual_seed(3)
    a = F.dropout(nx, 0.5)
    torch.npu.manual_seed(3)
    b = F.dropout(nx, 0.5)
    same(a, b.cpu(), atol=0, rtol=0)
    kept = a.cpu() != 0
    same(a, torch.where(kept, x * 2, torch.zeros(())))
    g = torch.rand(16, 8)
    a.backward(npu(g))
    same(nx.grad, torch.where(kept, g * 2, torch.zeros(())))
    idx = torch.tensor([[1, 3, 1], [0, 9, 2]])
    w = torch.randn(10, 4, requires_grad=True)
    nw = npu(w, grad=True)
    co, no = F.embedding(idx, w), F.embedding(npu(idx), nw)
    same(no, co)
    g = torch.rand(co.shape)
    co.backward(g)
    no.backward(npu(g))
    same(nw.grad, w.grad)
""")


def test_strict_mode(run_python):
    assert_strict_ok(run_python, "dropout_embedding")
