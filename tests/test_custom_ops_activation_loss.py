"""Activations and the fused cross-entropy on their device ops: fast_gelu and npu_silu (with gradients),
npu_gelu_mul, npu_clipped_swiglu and npu_cross_entropy_loss (weights, ignore_index, label smoothing, z-loss, with
gradients), against CPU references written from the documented formulas; Meta shapes, device ops and errors."""

import pytest
import torch
import torch.nn.functional as F

import torch_npu
import custom_op_refs as shared_ref
from op_refs import misc_ops as ref

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: (1e-4, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 2e-2)}


def check(actual, expected, dtype=torch.float32):
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(actual.detach().cpu().float(), expected.detach().cpu().float(), rtol=rtol, atol=atol)


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def assert_launches(name, fn):
    before = device_op_count(name)
    fn()
    torch.npu.synchronize()
    assert device_op_count(name) == before + 1, name


def forward_backward(fn, x, grad):
    leaf = x.detach().requires_grad_(True)
    out = fn(leaf)
    out.backward(grad.to(out.device, out.dtype))
    return out, leaf.grad


# --- fast_gelu / npu_silu ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_fast_gelu_and_gradient(dtype):
    x = torch.randn(4, 33, generator=torch.Generator().manual_seed(0)).to(dtype)
    grad = torch.randn(4, 33)
    out, dx = forward_backward(torch.ops.npu.fast_gelu, x.npu(), grad)
    expect, edx = forward_backward(shared_ref.fast_gelu, x.float(), grad)
    assert out.dtype == dtype
    check(out, expect, dtype)
    check(dx, edx, dtype)
    check(torch_npu.fast_gelu(x.npu()), expect, dtype)
    # torch_npu's documented values: fast_gelu([1, 2, 3, 4]).
    ones = torch.tensor([1.0, 2.0, 3.0, 4.0])
    check(torch.ops.npu.fast_gelu(ones.npu()), shared_ref.fast_gelu(ones))


@pytest.mark.parametrize("dtype", DTYPES)
def test_npu_silu_and_gradient(dtype):
    x = torch.randn(3, 17, generator=torch.Generator().manual_seed(1)).to(dtype)
    grad = torch.randn(3, 17)
    out, dx = forward_backward(torch_npu.npu_silu, x.npu(), grad)
    expect, edx = forward_backward(F.silu, x.float(), grad)
    assert out.dtype == dtype
    check(out, expect, dtype)
    check(dx, edx, dtype)
    direct = torch_npu.npu_silu_backward(grad.to(dtype).npu(), x.npu(), out.detach())
    check(direct, edx, dtype)


def test_activation_meta_device_ops_and_errors():
    m = torch.empty(2, 5, device="meta")
    assert torch.ops.npu.fast_gelu(m).shape == (2, 5) and torch.ops.npu.npu_silu(m).shape == (2, 5)
    x = torch.randn(2, 5).npu()
    assert_launches("aclnnFastGelu", lambda: torch.ops.npu.fast_gelu(x))
    assert_launches("aclnnSilu", lambda: torch_npu.npu_silu(x))
    assert_launches("aclnnSiluBackward", lambda: torch_npu.npu_silu_backward(x, x, x))
    with pytest.raises(TypeError, match="floating-point"):
        torch_npu.npu_silu(torch.ones(3, dtype=torch.int32).npu())
    with pytest.raises(ValueError, match="one shape"):
        torch_npu.npu_silu_backward(x, x, torch.randn(5).npu())


# --- npu_gelu_mul ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_mul(dtype, approximate):
    x = torch.randn(10, 3, 40, generator=torch.Generator().manual_seed(2)).to(dtype)
    out = torch_npu.npu_gelu_mul(x.npu(), approximate=approximate)
    assert out.shape == (10, 3, 20) and out.dtype == dtype
    check(out, ref.gelu_mul(x, approximate), dtype)


def test_gelu_mul_meta_device_op_and_errors():
    assert torch.ops.npu.npu_gelu_mul(torch.empty(100, 400, device="meta")).shape == (100, 200)
    x = torch.rand(4, 8).npu()
    assert_launches("aclnnGeluMul", lambda: torch_npu.npu_gelu_mul(x))
    with pytest.raises(ValueError, match="two equal halves"):
        torch_npu.npu_gelu_mul(torch.rand(4, 7).npu())
    with pytest.raises(ValueError, match="'none'"):
        torch_npu.npu_gelu_mul(x, approximate="fast")


# --- npu_clipped_swiglu ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("interleaved", [True, False])
def test_clipped_swiglu(dtype, interleaved):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(12, 64, generator=g) * 4).to(dtype)  # wide enough to hit both clamps
    for kwargs in ({}, {"alpha": 0.7, "limit": 1.0, "bias": 1.2}):
        out = torch_npu.npu_clipped_swiglu(x.npu(), interleaved=interleaved, **kwargs)
        assert out.shape == (12, 32) and out.dtype == dtype
        check(out, ref.clipped_swiglu(x, interleaved=interleaved, **kwargs), dtype)


def test_clipped_swiglu_groups_and_inner_dim():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(10, 16, generator=g) * 3
    groups = torch.tensor([2, 3, 1], dtype=torch.int64)  # 6 of 10 rows processed, the rest zero
    out = torch_npu.npu_clipped_swiglu(x.npu(), group_index=groups.npu(), limit=2.0)
    expect = ref.clipped_swiglu(x, group_index=groups, limit=2.0)
    check(out, expect)
    assert torch.count_nonzero(out.cpu()[6:]) == 0
    # Groups summing past the rows: all rows. A split along an inner dimension of a 4-D x.
    check(torch_npu.npu_clipped_swiglu(x.npu(), group_index=torch.tensor([7, 9]).npu()), ref.clipped_swiglu(x))
    x4 = torch.randn(2, 6, 3, 4, generator=g)
    for interleaved in (True, False):
        out = torch_npu.npu_clipped_swiglu(x4.npu(), dim=1, interleaved=interleaved)
        assert out.shape == (2, 3, 3, 4)
        check(out, ref.clipped_swiglu(x4, dim=1, interleaved=interleaved))


def test_clipped_swiglu_meta_device_op_and_errors():
    assert torch.ops.npu.npu_clipped_swiglu(torch.empty(8, 4, 6, device="meta"), dim=1).shape == (8, 2, 6)
    x = torch.randn(4, 8).npu()
    assert_launches("aclnnClippedSwiglu", lambda: torch_npu.npu_clipped_swiglu(x))
    with pytest.raises(ValueError, match="must be even"):
        torch_npu.npu_clipped_swiglu(torch.randn(4, 7).npu())
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        torch_npu.npu_clipped_swiglu(torch.randn(8).npu())
    with pytest.raises(TypeError, match="int64"):
        torch_npu.npu_clipped_swiglu(x, group_index=torch.tensor([1.0, 2.0]).npu())


# --- npu_cross_entropy_loss --------------------------------------------------------------------------------

CASES = [dict(), dict(weight=True), dict(ignore_index=2), dict(label_smoothing=0.2),
         dict(weight=True, ignore_index=1, label_smoothing=0.1)]


def loss_inputs(dtype, seed=5, n=16, c=11):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(n, c, generator=g) * 3).to(dtype)
    target = torch.randint(0, c, (n,), generator=g)
    target[:3] = 2  # some rows of the class an ignore_index case drops
    weight = torch.rand(c, generator=g) + 0.1
    return x, target, weight


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_loss_forward(dtype, reduction):
    x, target, weight = loss_inputs(dtype)
    for case in CASES:
        kw = {k: v for k, v in case.items() if k != "weight"}
        w = weight if case.get("weight") else None
        loss, log_prob, zloss, lse = torch_npu.npu_cross_entropy_loss(
            x.npu(), target.npu(), None if w is None else w.npu(), reduction=reduction, **kw)
        eloss, elog_prob, _, _ = ref.cross_entropy_loss(x, target, w, reduction, **kw)
        assert loss.dtype == log_prob.dtype == dtype
        assert loss.shape == ((16,) if reduction == "none" else (1,)) and zloss.numel() == 0 and lse.numel() == 0
        check(loss, eloss, dtype)
        check(log_prob, elog_prob, dtype)
        # The reference is PyTorch's cross_entropy.
        torch_loss = F.cross_entropy(x.float(), target, w, reduction=reduction, **kw)
        check(eloss.reshape(torch_loss.shape), torch_loss)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_loss_gradients(reduction):
    x, target, weight = loss_inputs(torch.float32, seed=6)
    for case in CASES:
        kw = {k: v for k, v in case.items() if k != "weight"}
        w = weight if case.get("weight") else None
        grads = []
        for fn, device in ((ref.cross_entropy_loss, "cpu"), (torch_npu.npu_cross_entropy_loss, "npu")):
            leaf = x.detach().to(device).requires_grad_(True)
            loss = fn(leaf, target.to(device), None if w is None else w.to(device), reduction, **kw)[0]
            (loss * torch.linspace(0.5, 1.5, loss.numel()).to(device)).sum().backward()
            grads.append(leaf.grad)
        check(grads[1], grads[0])


def test_cross_entropy_zloss_outputs_and_gradient():
    x, target, _ = loss_inputs(torch.float32, seed=7)
    for reduction in ("mean", "sum", "none"):
        results = []
        for fn, device in ((ref.cross_entropy_loss, "cpu"), (torch_npu.npu_cross_entropy_loss, "npu")):
            leaf = x.detach().to(device).requires_grad_(True)
            loss, _, zloss, lse = fn(leaf, target.to(device), None, reduction, 3, 0.0, 1e-2, True)
            (loss.sum() + 2 * zloss.sum()).backward()
            results.append((loss, zloss, lse, leaf.grad))
        for a, e in zip(results[1], results[0]):
            check(a, e)
    # return_zloss without a scale: zloss 0, lse_for_zloss empty; a scale without return_zloss: zloss empty.
    _, _, zloss, lse = torch_npu.npu_cross_entropy_loss(x.npu(), target.npu(), return_zloss=True)
    assert zloss.shape == (1,) and float(zloss.cpu()) == 0.0 and lse.numel() == 0
    _, _, zloss, lse = torch_npu.npu_cross_entropy_loss(x.npu(), target.npu(), lse_square_scale_for_zloss=0.5)
    assert zloss.numel() == 0 and lse.shape == (16,)
    check(lse, torch.logsumexp(x, 1))


def test_cross_entropy_backward_op_meta_device_ops_and_errors():
    x, target, weight = loss_inputs(torch.float16, seed=8)
    loss, log_prob, _, _ = torch_npu.npu_cross_entropy_loss(x.npu(), target.npu(), weight.npu(), "sum")
    grad = torch_npu.npu_cross_entropy_loss_backward(torch.ones(1).half().npu(), log_prob, target.npu(),
                                                     weight.npu(), reduction="sum")
    assert grad.dtype == torch.float16 and grad.shape == (16, 11)
    leaf = x.float().requires_grad_(True)
    ref.cross_entropy_loss(leaf, target, weight, "sum")[0].sum().backward()
    check(grad, leaf.grad, torch.float16)
    m = torch.ops.npu.npu_cross_entropy_loss(torch.empty(5, 7, device="meta"),
                                             torch.empty(5, dtype=torch.int64, device="meta"), reduction="none",
                                             lse_square_scale_for_zloss=0.1, return_zloss=True)
    assert [tuple(t.shape) for t in m] == [(5,), (5, 7), (5,), (5,)]
    xs, ts = x.float().npu(), target.npu()
    assert_launches("aclnnCrossEntropyLoss", lambda: torch_npu.npu_cross_entropy_loss(xs, ts))
    assert_launches("aclnnCrossEntropyLossGrad", lambda: torch_npu.npu_cross_entropy_loss_backward(
        torch.ones(1).npu(), xs.log_softmax(1), ts))
    with pytest.raises(ValueError, match="reduction must be"):
        torch_npu.npu_cross_entropy_loss(xs, ts, reduction="batchmean")
    with pytest.raises(TypeError, match="int64"):
        torch_npu.npu_cross_entropy_loss(xs, ts.float())
    with pytest.raises(ValueError, match=r"target must be \[N\]"):
        torch_npu.npu_cross_entropy_loss(xs, ts[:4])
    with pytest.raises(RuntimeError, match="class indices"):
        torch_npu.npu_cross_entropy_loss(xs, torch.full((16,), 11).npu())[0].cpu()
