"""Training fusions: torch_npu's fused Adam steps (npu_apply_adam, npu_apply_adam_w, npu_bert_apply_adam through
their out= overloads, which update var / m / v in place) and SyncBatchNorm's statistics (batch_norm_reduce,
batch_norm_gather_stats_update), against CPU references written from their definitions (custom_op_refs)."""


import pytest
import torch

import torch_npu

from op_refs import train_vision as ref

NPU = "npu"
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def adam_state(shape, dtype, seed):
    """var, m, v (non-negative, a second moment) and grad on the CPU."""
    g = torch.Generator().manual_seed(seed)
    var = torch.randn(shape, generator=g)
    m = torch.randn(shape, generator=g) * 0.1
    v = torch.rand(shape, generator=g) * 0.1
    grad = torch.randn(shape, generator=g)
    return [t.to(dtype) for t in (var, m, v, grad)]


def assert_state(got, expected):
    for name, a, b in zip(("var", "m", "v"), got, expected):
        assert a.dtype == b.dtype, name
        torch.testing.assert_close(a.cpu(), b, msg=lambda text, name=name: f"{name}: {text}")


# ---- npu_apply_adam ----------------------------------------------------------------------------------------

ADAM = (0.9 ** 3, 0.999 ** 3, 0.01, 0.9, 0.999, 1e-8)  # beta1_power, beta2_power, lr, beta1, beta2, epsilon


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("nesterov", [False, True])
def test_apply_adam_updates_state_in_place(dtype, nesterov):
    var, m, v, grad = adam_state((4, 33), dtype, 0)
    expected = ref.apply_adam(var, m, v, grad, *ADAM, use_nesterov=nesterov)
    state = [t.to(NPU) for t in (var, m, v)]
    pointers = [t.data_ptr() for t in state]
    out = torch_npu.npu_apply_adam.out(*ADAM, grad.to(NPU), False, nesterov, out=state)
    assert [t.data_ptr() for t in out] == pointers
    assert_state(state, expected)


def test_apply_adam_strided_state_and_device_op():
    var, m, v, grad = adam_state((6, 5), torch.float32, 1)
    expected = ref.apply_adam(var, m, v, grad, *ADAM)
    var_storage = var.t().contiguous().to(NPU)  # var as a transposed (non-contiguous) view
    m_npu, v_npu = m.to(NPU), v.to(NPU)
    before = device_op_count("aclnnApplyAdam")
    torch_npu.npu_apply_adam.out(*ADAM, grad.to(NPU), None, None, out=[var_storage.t(), m_npu, v_npu])
    torch.npu.synchronize()
    assert device_op_count("aclnnApplyAdam") == before + 1
    assert_state([var_storage.t(), m_npu, v_npu], expected)


def test_apply_adam_first_step_powers():
    # beta1_power = 1 makes the bias correction divide by zero: var turns NaN, m and v are still updated
    # (torch_npu's own test compares only v there).
    var, m, v, grad = adam_state((3, 8), torch.float32, 2)
    hyper = (1.0, 1.0, 0.2, 0.2, 0.2, 0.2)
    expected = ref.apply_adam(var, m, v, grad, *hyper)
    state = [t.to(NPU) for t in (var, m, v)]
    torch_npu.npu_apply_adam.out(*hyper, grad.to(NPU), False, False, out=state)
    assert torch.isnan(state[0].cpu()).all()
    assert_state(state[1:], expected[1:])


def test_apply_adam_torch_npu_out_spelling():
    # torch_npu's documented call: torch_npu.npu_apply_adam(..., out=(var, m, v)).
    var, m, v, grad = adam_state((2, 9), torch.float32, 3)
    expected = ref.apply_adam(var, m, v, grad, *ADAM)
    state = tuple(t.to(NPU) for t in (var, m, v))
    torch_npu.npu_apply_adam(*ADAM, grad.to(NPU), False, False, out=state)
    assert_state(state, expected)


# ---- npu_apply_adam_w --------------------------------------------------------------------------------------

ADAM_W = (0.9 ** 4, 0.999 ** 4, 0.01, 0.05, 0.9, 0.999, 1e-8)  # powers, lr, weight_decay, beta1, beta2, epsilon


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("amsgrad,maximize", [(False, False), (False, True), (True, False), (True, True)])
def test_apply_adam_w(dtype, amsgrad, maximize):
    var, m, v, grad = adam_state((5, 17), dtype, 4)
    running_max = (v.float() + torch.rand(v.shape, generator=torch.Generator().manual_seed(5)) * 0.2 - 0.1)
    running_max = running_max.clamp_min(0).to(dtype)
    expected = ref.apply_adam_w(var, m, v, grad, *ADAM_W, max_grad_norm=running_max, amsgrad=amsgrad,
                                maximize=maximize)
    state = [t.to(NPU) for t in (var, m, v)]
    before = device_op_count("aclnnApplyAdamW")
    torch_npu.npu_apply_adam_w.out(*ADAM_W, grad.to(NPU), running_max.to(NPU), amsgrad, maximize, out=state)
    torch.npu.synchronize()
    assert device_op_count("aclnnApplyAdamW") == before + 1
    assert_state(state, expected)


def test_apply_adam_w_needs_max_grad_norm_for_amsgrad():
    var, m, v, grad = [t.to(NPU) for t in adam_state((4,), torch.float32, 6)]
    with pytest.raises(ValueError, match="amsgrad"):
        torch_npu.npu_apply_adam_w.out(*ADAM_W, grad, None, True, False, out=[var, m, v])


# ---- npu_bert_apply_adam -----------------------------------------------------------------------------------

BERT_CASES = [
    # lr, beta1, beta2, epsilon, max_grad_norm, global_grad_norm, weight_decay, step_size, adam_mode
    (1e-3, 0.9, 0.999, 1e-6, 1.0, 2.5, 0.01, None, 0),  # gradient clipped by the global norm, weight decay
    (1e-3, 0.9, 0.99, 1e-6, -1.0, 2.5, 0.0, None, 0),  # no clipping (max_grad_norm <= 0), no decay
    (1e-3, 0.9, 0.99, 1e-6, 1.0, 0.5, 0.01, None, 0),  # global norm <= 1: no clipping
    (5e-4, 0.9, 0.999, 1e-8, 1.0, 2.5, 0.01, 2e-3, 1),  # mBART: own step size, lr-scaled decay, no clipping
    (5e-4, 0.9, 0.999, 1e-8, 1.0, 2.5, 0.0, None, 1),  # mBART without a step size: lr
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", BERT_CASES)
def test_bert_apply_adam(dtype, case):
    lr, beta1, beta2, eps, max_norm, global_norm, decay, step_size, mode = case
    var, m, v, grad = adam_state((3, 40), dtype, 7)
    expected = ref.bert_apply_adam(var, m, v, grad, lr, beta1, beta2, eps, max_norm, global_norm, decay,
                                   step_size=step_size, adam_mode=mode)
    state = [t.to(NPU) for t in (var, m, v)]
    out = torch_npu.npu_bert_apply_adam.out(lr, beta1, beta2, eps, grad.to(NPU), max_norm, global_norm, decay,
                                            step_size=step_size, adam_mode=mode, out=state)
    assert [t.data_ptr() for t in out] == [t.data_ptr() for t in state]
    assert_state(state, expected)


def test_bert_apply_adam_device_op_and_mode_error():
    var, m, v, grad = [t.to(NPU) for t in adam_state((8,), torch.float32, 8)]
    before = device_op_count("aclnnApplyAdamV2")
    torch_npu.npu_bert_apply_adam.out(0.0, 0.9, 0.99, 1e-6, grad, -1.0, 0.0, 0.0, out=[var, m, v])
    torch.npu.synchronize()
    assert device_op_count("aclnnApplyAdamV2") == before + 1
    with pytest.raises(ValueError, match="adam_mode"):
        torch_npu.npu_bert_apply_adam.out(0.0, 0.9, 0.99, 1e-6, grad, -1.0, 0.0, 0.0, adam_mode=2, out=[var, m, v])


# ---- shared: functional forms, argument errors, Meta ----------------------------------------------------------


def test_functional_forms_refuse_like_torch_npu():
    grad = torch.randn(3).to(NPU)
    with pytest.raises(NotImplementedError, match="out="):
        torch_npu.npu_apply_adam(*ADAM, grad, None, None)
    with pytest.raises(NotImplementedError, match="out="):
        torch_npu.npu_apply_adam_w(*ADAM_W, grad, None, None, None)
    with pytest.raises(NotImplementedError, match="out="):
        torch_npu.npu_bert_apply_adam(1e-3, 0.9, 0.99, 1e-6, grad, 1.0, 1.0, 0.0)


def test_state_argument_errors():
    var, m, v, grad = [t.to(NPU) for t in adam_state((4, 3), torch.float32, 9)]
    with pytest.raises(ValueError, match="one shape"):
        torch_npu.npu_apply_adam.out(*ADAM, grad, None, None, out=[var, m[:2], v])
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        torch_npu.npu_apply_adam_w.out(*ADAM_W, grad, None, None, None, out=[var.int(), m.int(), v.int()])
    with pytest.raises(TypeError, match="share one dtype"):
        torch_npu.npu_bert_apply_adam.out(1e-3, 0.9, 0.99, 1e-6, grad, 1.0, 1.0, 0.0, out=[var, m.half(), v])


def test_out_overloads_on_meta():
    var, m, v, grad = (torch.empty(3, 4, device="meta") for _ in range(4))
    ops = torch.ops.npu
    for out in (ops.npu_apply_adam.out(*ADAM, grad, None, None, var=var, m=m, v=v),
                ops.npu_apply_adam_w.out(*ADAM_W, grad, None, None, None, var=var, m=m, v=v),
                ops.npu_bert_apply_adam.out(1e-3, 0.9, 0.99, 1e-6, grad, 1.0, 1.0, 0.0, var=var, m=m, v=v)):
        assert [tuple(t.shape) for t in out] == [(3, 4)] * 3
        assert all(t.device.type == "meta" for t in out)


# ---- batch_norm_reduce -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (4, 6), (3, 2, 7), (1, 1, 2, 2)])
def test_batch_norm_reduce(dtype, shape):
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(10)) * 3 + 1).to(dtype)
    total, squares = torch_npu.batch_norm_reduce(x.to(NPU), 1e-5)
    expected_total, expected_squares = ref.batch_norm_reduce(x)
    for got, expected in ((total, expected_total), (squares, expected_squares)):
        assert got.dtype == torch.float32 and got.shape == (shape[1],)
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-4)


def test_batch_norm_reduce_eps_unused_meta_and_device_op():
    x = torch.randn(2, 3, 4, 4).to(NPU)
    before = device_op_count("aclnnBatchNormReduce")
    a = torch_npu.batch_norm_reduce(x, 1e-5)
    b = torch_npu.batch_norm_reduce(x, 1.0)
    torch.npu.synchronize()
    assert device_op_count("aclnnBatchNormReduce") == before + 2
    for p, q in zip(a, b):
        torch.testing.assert_close(p.cpu(), q.cpu(), rtol=0, atol=0)
    meta = torch.ops.npu.batch_norm_reduce(torch.empty(2, 5, 3, device="meta", dtype=torch.float16), 1e-5)
    assert [(tuple(t.shape), t.dtype) for t in meta] == [((5,), torch.float32)] * 2


def test_batch_norm_reduce_errors():
    # torch_npu's own test expects a RuntimeError mentioning the "dim input tensor" for 1-D inputs.
    with pytest.raises(RuntimeError, match="dim input tensor"):
        torch_npu.batch_norm_reduce(torch.randn(3).to(NPU), 1e-5)
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        torch_npu.batch_norm_reduce(torch.ones(2, 3, dtype=torch.int32).to(NPU), 1e-5)


# ---- batch_norm_gather_stats_update -------------------------------------------------------------------------------


def device_sums(counts, channels, seed):
    """Every device's (sum, square sum) of its own samples, and all samples together."""
    g = torch.Generator().manual_seed(seed)
    samples = [torch.randn(int(n), channels, generator=g) * 2 + 0.5 for n in counts]
    sums = torch.stack([s.sum(0) for s in samples])
    squares = torch.stack([(s * s).sum(0) for s in samples])
    return sums, squares, torch.cat(samples)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("count_dtype", [torch.float32, torch.int32])
def test_batch_norm_gather_stats_update(dtype, count_dtype):
    counts = torch.tensor([4, 5, 6, 4]).to(count_dtype)
    channels, momentum, eps = 3, 0.1, 1e-5
    sums, squares, everything = device_sums(counts, channels, 11)
    sums, squares = sums.to(dtype), squares.to(dtype)
    g = torch.Generator().manual_seed(12)
    running_mean = torch.rand(channels, generator=g).to(dtype)
    running_var = (torch.rand(channels, generator=g) + 0.5).to(dtype)
    mean, invstd, new_mean, new_var = ref.batch_norm_gather_stats_update(sums, squares, counts, running_mean,
                                                                         running_var, momentum, eps)
    if dtype == torch.float32:  # the reference itself against the statistics of all samples together
        torch.testing.assert_close(mean, everything.mean(0), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(invstd, torch.rsqrt(everything.var(0, unbiased=False) + eps), rtol=1e-4, atol=1e-5)
    rm_npu, rv_npu = running_mean.to(NPU), running_var.to(NPU)
    x = torch.randn(2, channels, 4, 4).to(dtype).to(NPU)  # only its channel count is used
    got_mean, got_invstd = torch_npu.batch_norm_gather_stats_update(x, sums.to(NPU), squares.to(NPU), rm_npu, rv_npu,
                                                                    momentum, eps, counts.to(NPU))
    assert got_mean.dtype == dtype and got_mean.shape == (channels,)
    torch.testing.assert_close(got_mean.cpu(), mean)
    torch.testing.assert_close(got_invstd.cpu(), invstd)
    torch.testing.assert_close(rm_npu.cpu(), new_mean)  # the running statistics move in place
    torch.testing.assert_close(rv_npu.cpu(), new_var)


def test_batch_norm_gather_stats_update_without_running_stats_meta_and_device_op():
    counts = torch.tensor([3.0, 7.0])
    sums, squares, _ = device_sums(counts, 5, 13)
    mean, invstd, _, _ = ref.batch_norm_gather_stats_update(sums, squares, counts, None, None, 0.1, 1e-5)
    before = device_op_count("aclnnSyncBatchNormGatherStats")
    got = torch_npu.batch_norm_gather_stats_update(torch.randn(2, 5).to(NPU), sums.to(NPU), squares.to(NPU), None,
                                                   None, 0.1, 1e-5, counts.to(NPU))
    torch.npu.synchronize()
    assert device_op_count("aclnnSyncBatchNormGatherStats") == before + 1
    torch.testing.assert_close(got[0].cpu(), mean)
    torch.testing.assert_close(got[1].cpu(), invstd)
    meta = lambda *s: torch.empty(*s, device="meta")
    out = torch.ops.npu.batch_norm_gather_stats_update(meta(2, 5, 3), meta(4, 5), meta(4, 5), meta(5), meta(5), 0.1,
                                                       1e-5, meta(4))
    assert [tuple(t.shape) for t in out] == [(5,), (5,)]


def test_batch_norm_gather_stats_update_errors():
    x, sums = torch.randn(2, 3).to(NPU), torch.rand(4, 3).to(NPU)
    with pytest.raises(ValueError, match="one count per device"):
        torch_npu.batch_norm_gather_stats_update(x, sums, sums, None, None, 0.1, 1e-5, torch.ones(3).to(NPU))
    with pytest.raises(ValueError, match="both running_mean and running_var"):
        torch_npu.batch_norm_gather_stats_update(x, sums, sums, torch.zeros(3).to(NPU), None, 0.1, 1e-5,
                                                 torch.ones(4).to(NPU))
    with pytest.raises(ValueError, match=r"\(world_size, 3\)"):
        torch_npu.batch_norm_gather_stats_update(x, sums[:, :2], sums[:, :2], None, None, 0.1, 1e-5,
                                                 torch.ones(4).to(NPU))
