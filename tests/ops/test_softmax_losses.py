"""softmax / log_softmax and the losses nll_loss, cross_entropy, mse_loss (forward, backward) on npu vs CPU."""

import pytest
import torch
import torch.nn.functional as F

from ops_util import (FLOATS, assert_device_ops, assert_same, assert_strict_ok, check_out_into_views, check_vs_cpu,
                      device_op_stats, grads_vs_cpu, rand, register_strict, to_npu)

SCALE = 4


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_softmax_forward(op, dtype):
    fn = getattr(torch, op)
    for shape, dims in [((3, 7), (0, 1, -1)), ((2, 3, 4), (0, 1, 2)), ((), (0,)), ((0, 4), (0, 1)), ((5,), (0,))]:
        x = rand(shape, dtype, -5, 5)
        for dim in dims:
            check_vs_cpu(lambda t: fn(t, dim), x, scale=SCALE)
    check_vs_cpu(lambda t: fn(t, 1), rand((4, 6), dtype, -5, 5, noncontig=True), scale=SCALE)
    check_vs_cpu(lambda t: fn(t, -1), rand((3, 8), dtype, -5, 5)[:, ::2], scale=SCALE)
    check_vs_cpu(lambda t: fn(t, 1), torch.tensor([[1e4, -1e4, 0.0], [-float("inf"), 0.0, 1.0]]).to(dtype))
    if dtype != torch.float32:   # compute in float32 from a half input
        check_vs_cpu(lambda t: fn(t, -1, dtype=torch.float32), rand((3, 5), dtype, -5, 5))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_out_and_module(op):
    x = rand((3, 5), lo=-3, hi=3)
    cpu_out, npu_out = torch.empty(0), torch.empty(0, device="npu")
    getattr(torch, "_" + op)(x, 1, False, out=cpu_out)
    getattr(torch, "_" + op)(to_npu(x), 1, False, out=npu_out)
    assert_same(npu_out, cpu_out)
    module = torch.nn.Softmax(dim=0) if op == "softmax" else torch.nn.LogSoftmax(dim=0)
    check_vs_cpu(module, x)


def test_out_into_strided_views():
    x = rand((3, 5), lo=-3, hi=3)
    check_out_into_views(lambda t, out: torch._softmax(t, 1, False, out=out), (x,), (3, 5))
    check_out_into_views(lambda t, out: torch._log_softmax(t, 0, False, out=out), (x,), (3, 5))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_softmax_backward(op, dtype):
    fn = getattr(torch, op)
    grads_vs_cpu(lambda t: fn(t, 1), [rand((3, 7), dtype, -3, 3)], scale=SCALE)
    grads_vs_cpu(lambda t: fn(t, 0), [rand((4, 5), dtype, -3, 3, noncontig=True)], scale=SCALE)
    grads_vs_cpu(lambda t: fn(t, -1), [rand((2, 3, 4), dtype, -3, 3)], scale=SCALE)


def _targets(n, c, ignore=None):
    t = torch.randint(0, c, (n,))
    if ignore is not None and n > 1:
        t[1] = ignore
    return t


NLL_CASES = {
    "mean": dict(),
    "sum": dict(reduction="sum"),
    "none": dict(reduction="none"),
    "weight": dict(weight=True),
    "weight_none": dict(weight=True, reduction="none"),
    "ignore_index": dict(ignore_index=2),
    "ignore_weight": dict(weight=True, ignore_index=0, reduction="sum"),
}


@pytest.mark.parametrize("case", NLL_CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_nll_loss(case, dtype):
    kw = dict(NLL_CASES[case])
    n, c = 6, 4
    logp = torch.log_softmax(rand((n, c), torch.float32, -3, 3), 1).to(dtype)
    target = _targets(n, c, kw.get("ignore_index"))
    if kw.pop("weight", False):
        kw["weight"] = rand((c,), dtype, 0.1, 2)
    weight = kw.pop("weight", None)
    check_vs_cpu(lambda x, t, w: F.nll_loss(x, t, weight=w, **kw), logp, target, weight, scale=SCALE)
    grads_vs_cpu(lambda x: F.nll_loss(x, to_npu(target) if x.is_npu else target,
                                      weight=None if weight is None else weight.to(x.device), **kw),
                 [logp], scale=SCALE)
    # one sample without a batch dimension
    check_vs_cpu(lambda x, t: F.nll_loss(x, t), logp[0], target[0])


def test_nll_loss_all_ignored_and_int32_target_and_non_contiguous():
    logp = torch.log_softmax(rand((3, 4)), 1)
    t = torch.tensor([1, 1, 1])
    check_vs_cpu(lambda x, y: F.nll_loss(x, y, ignore_index=1), logp, t)     # 0 / 0 = NaN like CPU
    check_vs_cpu(lambda x, y: F.nll_loss(x, y, ignore_index=1, reduction="sum"), logp, t)
    logp_t = torch.log_softmax(rand((4, 3)), 0).t()
    check_vs_cpu(F.nll_loss, logp_t, torch.tensor([0, 3, 2]))
    check_vs_cpu(lambda x, y: F.nll_loss(x, y, reduction="none"), torch.log_softmax(rand((0, 4)), 1),
                 torch.empty(0, dtype=torch.long))


@pytest.mark.parametrize("kw", [dict(), dict(reduction="sum"), dict(label_smoothing=0.1), dict(ignore_index=1),
                                dict(weight=True), dict(soft=True)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_cross_entropy(kw, dtype):
    kw = dict(kw)
    n, c = 5, 4
    logits = rand((n, c), dtype, -3, 3)
    if kw.pop("soft", False):
        target = torch.softmax(rand((n, c), torch.float32), 1).to(dtype)
    else:
        target = _targets(n, c, kw.get("ignore_index"))
    weight = rand((c,), dtype, 0.5, 1.5) if kw.pop("weight", False) else None
    check_vs_cpu(lambda x, t, w: F.cross_entropy(x, t, weight=w, **kw), logits, target, weight, scale=SCALE)
    grads_vs_cpu(lambda x: F.cross_entropy(x, target.to(x.device), weight=None if weight is None
                                           else weight.to(x.device), **kw), [logits], scale=SCALE)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_mse_loss(reduction, dtype):
    for shape in [(3, 4), (), (2, 3, 2), (0, 3)]:
        a, b = rand(shape, dtype), rand(shape, dtype)
        check_vs_cpu(lambda x, y: F.mse_loss(x, y, reduction=reduction), a, b, scale=SCALE)
    check_vs_cpu(lambda x, y: F.mse_loss(x, y, reduction=reduction), rand((4, 5), dtype, noncontig=True),
                 rand((4, 5), dtype), scale=SCALE)
    grads_vs_cpu(lambda x, y: F.mse_loss(x, y, reduction=reduction), [rand((3, 4), dtype), rand((3, 4), dtype)],
                 scale=SCALE)


def test_mse_loss_broadcast_and_out():
    a, b = rand((3, 4)), rand((4,))
    with pytest.warns(UserWarning, match="target size"):
        check_vs_cpu(F.mse_loss, a, b)
    cpu_out, npu_out = torch.empty(0), torch.empty(0, device="npu")
    torch._C._nn.mse_loss(a, b.expand(3, 4), out=cpu_out)
    torch._C._nn.mse_loss(to_npu(a), to_npu(b).expand(3, 4), out=npu_out)
    assert_same(npu_out, cpu_out)


def test_errors_match_cpu():
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)"):
        F.nll_loss(torch.zeros(3, 4, device="npu"), torch.zeros(2, dtype=torch.long, device="npu"))
    with pytest.raises((RuntimeError, IndexError), match="Target 7 is out of bounds"):
        F.nll_loss(torch.zeros(3, 4, device="npu"), torch.tensor([0, 7, 1], device="npu"))
        torch.npu.synchronize()
    with pytest.raises(RuntimeError, match="expected target dtype to be Long"):
        F.nll_loss(torch.zeros(3, 4, device="npu"), torch.zeros(3, device="npu"))
        torch.npu.synchronize()
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.softmax(torch.ones(2, 3, device="npu"), 2)


def test_named_device_ops_are_used():
    x = torch.randn(4, 5).npu().requires_grad_()
    target, y = torch.tensor([0, 4, 2, 1]).npu(), torch.randn(4, 5).npu()

    def run():
        torch.softmax(x, 1).sum().backward()
        F.nll_loss(torch.log_softmax(x, 1), target).backward()
        F.mse_loss(x, y).backward()

    assert_device_ops(device_op_stats(run), ["aclnnSoftmax", "aclnnSoftmaxBackward", "aclnnLogSoftmax",
                                             "aclnnLogSoftmaxBackward", "aclnnNLLLoss", "aclnnNLLLossBackward",
                                             "aclnnMseLoss", "aclnnMseLossBackward"])


register_strict("softmax_losses", """
    target = torch.tensor([0, 4, 2, 1])
    y = torch.randn(4, 5)
    fns = [lambda x: torch.softmax(x, 1), lambda x: torch.log_softmax(x, 0),
           lambda x: F.nll_loss(torch.log_softmax(x, 1), target.to(x.device)),
           lambda x: F.cross_entropy(x, target.to(x.device), reduction="sum"),
           lambda x: F.mse_loss(x, y.to(x.device))]
    for fn in fns:
        cx = torch.randn(4, 5, requires_grad=True)
        nx = npu(cx, grad=True)
        co, no = fn(cx), fn(nx)
        same(no, co, atol=1e-5, rtol=1e-4)
        g = torch.rand(co.shape)
        co.backward(g)
        no.backward(npu(g))
        same(nx.grad, cx.grad, atol=1e-5, rtol=1e-4)
""")


def test_strict_mode(run_python):
    assert_strict_ok(run_python, "softmax_losses")
