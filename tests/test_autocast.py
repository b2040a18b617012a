"""torch.autocast("npu") / torch.npu.amp.autocast: each policy class casts like CPU autocast's reference
semantics (lower precision, float32, promote), values match the same op computed on CPU in that dtype."""

import pytest
import torch
import torch.nn.functional as F

LOW = [torch.float16, torch.bfloat16]


def _pair(*shape, seed=0):
    """Equal CPU and npu tensors; values in (0, 1) for odd seeds (valid for log, targets, divisors)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    if seed % 2:
        x = x.sigmoid()
    return x, x.npu()


# (name, function of npu/cpu tensors, input shapes): ops that must run in the autocast dtype.
LOWER_PRECISION_OPS = [
    ("mm", lambda a, b: torch.mm(a, b), [(4, 5), (5, 3)]),
    ("matmul", lambda a, b: torch.matmul(a, b), [(2, 4, 5), (5, 3)]),
    ("bmm", lambda a, b: torch.bmm(a, b), [(2, 4, 5), (2, 5, 3)]),
    ("baddbmm", lambda c, a, b: torch.baddbmm(c, a, b), [(2, 4, 3), (2, 4, 5), (2, 5, 3)]),
    ("addmm", lambda c, a, b: torch.addmm(c, a, b), [(4, 3), (4, 5), (5, 3)]),
    ("linear", lambda x, w, b: F.linear(x, w, b), [(4, 5), (3, 5), (3,)]),
    ("conv2d", lambda x, w: F.conv2d(x, w, padding=1), [(1, 2, 5, 5), (3, 2, 3, 3)]),
    ("conv1d", lambda x, w: F.conv1d(x, w), [(1, 2, 7), (3, 2, 3)]),
    ("prelu", lambda x, w: F.prelu(x, w), [(2, 3, 4), (3,)]),
    ("addmv", lambda c, a, b: torch.addmv(c, a, b), [(4,), (4, 5), (5,)]),
    ("einsum", lambda a, b: torch.einsum("ij,jk->ik", a, b), [(4, 5), (5, 3)]),
]

# Ops that must run in float32 even on low precision inputs.
FP32_OPS = [
    ("softmax", lambda x: F.softmax(x, dim=-1), [(4, 6)]),
    ("log_softmax", lambda x: F.log_softmax(x, dim=-1), [(4, 6)]),
    ("layer_norm", lambda x: F.layer_norm(x, (6,)), [(4, 6)]),
    ("group_norm", lambda x: F.group_norm(x, 2), [(2, 4, 3)]),
    ("batch_norm", lambda x: F.batch_norm(x, None, None, training=True), [(4, 3)]),
    ("exp", torch.exp, [(4, 6)]),
    ("log", torch.log, [(4, 6)]),
    ("pow", lambda x: torch.pow(x, 2), [(4, 6)]),
    ("sum", torch.sum, [(4, 6)]),
    ("cumsum", lambda x: torch.cumsum(x, 0), [(4, 6)]),
    ("mse_loss", lambda x, y: F.mse_loss(x, y), [(4, 6), (4, 6)]),
    ("l1_loss", lambda x, y: F.l1_loss(x, y), [(4, 6), (4, 6)]),
    ("bce_with_logits", F.binary_cross_entropy_with_logits, [(4, 6), (4, 6)]),
    ("norm", lambda x: torch.norm(x), [(4, 6)]),
]


def _run(fn, shapes, device_type, dtype, cast_inputs=None):
    cpu_in, npu_in = zip(*[_pair(*s, seed=i + 1) for i, s in enumerate(shapes)])
    if cast_inputs is not None:
        cpu_in = [t.to(cast_inputs) for t in cpu_in]
        npu_in = [t.to(cast_inputs) for t in npu_in]
    with torch.autocast("npu", dtype=dtype):
        out = fn(*npu_in)
    return out, cpu_in


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name,fn,shapes", LOWER_PRECISION_OPS, ids=[o[0] for o in LOWER_PRECISION_OPS])
def test_lower_precision_ops_run_in_autocast_dtype(name, fn, shapes, dtype):
    out, cpu_in = _run(fn, shapes, "npu", dtype)
    assert out.device.type == "npu"
    assert out.dtype == dtype, f"{name} ran in {out.dtype}"
    # Reference: the same op with inputs cast to the low precision dtype, computed in float32 on CPU.
    expected = fn(*[t.to(dtype).float() for t in cpu_in])
    torch.testing.assert_close(out.float().cpu(), expected, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name,fn,shapes", FP32_OPS, ids=[o[0] for o in FP32_OPS])
def test_fp32_ops_run_in_float32_on_low_precision_inputs(name, fn, shapes, dtype):
    out, cpu_in = _run(fn, shapes, "npu", dtype, cast_inputs=dtype)
    assert out.dtype == torch.float32, f"{name} ran in {out.dtype}"
    expected = fn(*[t.float() for t in cpu_in])
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,fn", [
    ("cat", lambda a, b: torch.cat([a, b])),
    ("stack", lambda a, b: torch.stack([a, b])),
    ("addcmul", lambda a, b: torch.addcmul(a, a, b)),
    ("addcdiv", lambda a, b: torch.addcdiv(a, a, b)),
    ("atan2", torch.atan2),
])
def test_promote_ops_run_in_widest_input_dtype(name, fn):
    x32, x32_npu = _pair(3, 4, seed=2)
    x16, x16_npu = _pair(3, 4, seed=1)
    with torch.autocast("npu", dtype=torch.float16):
        out = fn(x32_npu, x16_npu.half())
    assert out.dtype == torch.float32, f"{name} ran in {out.dtype}"
    torch.testing.assert_close(out.cpu(), fn(x32, x16.half().float()))


def test_ops_without_policy_keep_input_dtype():
    _, x = _pair(4, 4)
    with torch.autocast("npu", dtype=torch.float16):
        assert torch.relu(x).dtype == torch.float32
        assert torch.relu(x.half()).dtype == torch.float16
        assert (x + 1).dtype == torch.float32


def test_torch_npu_amp_autocast_defaults_to_float16_and_can_be_disabled():
    _, a = _pair(4, 4)
    with torch.npu.amp.autocast():
        assert torch.mm(a, a).dtype == torch.float16
        assert torch.is_autocast_enabled("npu")
    with torch.npu.amp.autocast(dtype=torch.bfloat16):
        assert torch.mm(a, a).dtype == torch.bfloat16
    with torch.npu.amp.autocast(enabled=False):
        assert torch.mm(a, a).dtype == torch.float32
    assert not torch.is_autocast_enabled("npu")


def test_autocast_npu_does_not_touch_cpu_tensors():
    a = torch.randn(3, 3)
    with torch.autocast("npu", dtype=torch.float16):
        assert torch.mm(a, a).dtype == torch.float32


def test_autocast_backward_gives_float32_grads_for_float32_leaves():
    w = torch.randn(5, 3).npu().requires_grad_()
    _, x = _pair(4, 5)
    with torch.autocast("npu", dtype=torch.float16):
        loss = torch.mm(x, w).float().pow(2).sum()
    loss.backward()
    assert w.grad.dtype == torch.float32
    expected = 2 * x.cpu().half().float().t() @ (x.cpu().half().float() @ w.detach().cpu().half().float())
    torch.testing.assert_close(w.grad.cpu(), expected, rtol=2e-2, atol=5e-2)


def test_binary_cross_entropy_is_refused_under_autocast():
    _, x = _pair(4, seed=1)
    with torch.autocast("npu", dtype=torch.float16):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(x.sigmoid(), x.sigmoid())


def test_amp_dtype_queries():
    assert torch.npu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.npu.is_bf16_supported() is True
    _, a = _pair(3, 3)
    with pytest.warns(UserWarning, match="not supported"):
        with torch.autocast("npu", dtype=torch.int32):  # refused with a warning: autocast stays off
            assert torch.mm(a, a).dtype == torch.float32


def test_torch_npu_amp_module_is_one_module():
    import torch.npu.amp as via_torch
    import torch_npu.npu.amp as via_package

    assert via_torch is via_package
    from torch.npu.amp import GradScaler

    assert issubclass(GradScaler, torch.amp.GradScaler)
