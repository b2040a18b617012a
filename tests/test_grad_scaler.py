"""GradScaler on npu (torch.amp.GradScaler("npu") and torch.npu.amp.GradScaler): the device kernels
against their CPU versions, dynamic and static scales, and skipped steps on inf/nan gradients."""

import copy

import pytest
import torch


def _model_and_data(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    g = torch.Generator().manual_seed(seed + 100)
    return model, torch.randn(16, 6, generator=g), torch.randn(16, 2, generator=g)


def _params_cpu(model):
    return [p.detach().cpu().clone() for p in model.parameters()]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_unscale_kernel_matches_cpu(dtype):
    grads = [torch.randn(5, 3).to(dtype), torch.randn(7).to(dtype)]
    grads[1][2] = float("inf")
    for with_inf in (False, True):
        cpu = [g.clone() for g in grads] if with_inf else [grads[0].clone()]
        npu = [g.npu() for g in cpu]
        found_cpu, found_npu = torch.zeros(()), torch.zeros((), device="npu")
        inv_cpu, inv_npu = torch.full((), 0.125), torch.full((), 0.125, device="npu")
        torch._amp_foreach_non_finite_check_and_unscale_(cpu, found_cpu, inv_cpu)
        torch._amp_foreach_non_finite_check_and_unscale_(npu, found_npu, inv_npu)
        assert found_npu.item() == found_cpu.item() == float(with_inf)
        for a, b in zip(npu, cpu):
            assert torch.equal(a.cpu(), b)


@pytest.mark.parametrize("found", [0.0, 1.0])
@pytest.mark.parametrize("tracker", [0, 2])
def test_update_scale_kernel_matches_cpu(found, tracker):
    results = []
    for device in ("cpu", "npu"):
        scale = torch.full((), 1024.0, device=device)
        growth = torch.full((), tracker, dtype=torch.int32, device=device)
        torch._amp_update_scale_(scale, growth, torch.full((), found, device=device), 2.0, 0.5, 3)
        results.append((scale.item(), growth.item()))
    assert results[0] == results[1]


@pytest.mark.parametrize("make_scaler", [
    lambda: torch.amp.GradScaler("npu", init_scale=2.0**10),
    lambda: torch.npu.amp.GradScaler(init_scale=2.0**10),
])
def test_scaled_training_equals_unscaled_cpu_training(make_scaler):
    model, x, y = _model_and_data()
    ref = copy.deepcopy(model)
    model = model.npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    scaler = make_scaler()
    for _ in range(5):
        opt.zero_grad()
        scaler.scale(torch.nn.functional.mse_loss(model(x.npu()), y.npu())).backward()
        scaler.step(opt)
        scaler.update()
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(ref(x), y).backward()
        ref_opt.step()
    # A power-of-two scale multiplies and divides exactly: the runs agree to float32 rounding.
    for a, b in zip(_params_cpu(model), _params_cpu(ref)):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    assert scaler.get_scale() == 2.0**10


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_step_with_non_finite_gradient_is_skipped_and_scale_backs_off(bad):
    model, x, y = _model_and_data()
    model = model.npu()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    scaler = torch.npu.amp.GradScaler(init_scale=256.0, growth_interval=2)
    before = _params_cpu(model)
    before_stats = torch.npu.op_stats().get("aten::_amp_foreach_non_finite_check_and_unscale_", {})
    scaler.scale(torch.nn.functional.mse_loss(model(x.npu()), y.npu())).backward()
    model[0].weight.grad[0, 0] = bad
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 128.0
    assert all(torch.equal(a, b) for a, b in zip(_params_cpu(model), before)), "a skipped step changed weights"
    assert len(opt.state) == 0, "a skipped step created optimizer state"
    # The unscale/check ran as a device op on npu (not on the CPU).
    after_stats = torch.npu.op_stats()["aten::_amp_foreach_non_finite_check_and_unscale_"]
    assert sum(after_stats.values()) > sum(before_stats.values())
    assert after_stats.get("fallback", 0) == before_stats.get("fallback", 0)
    # Finite steps go through again and, after growth_interval of them, the scale grows.
    for _ in range(2):
        opt.zero_grad()
        scaler.scale(torch.nn.functional.mse_loss(model(x.npu()), y.npu())).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 256.0
    assert not all(torch.equal(a, b) for a, b in zip(_params_cpu(model), before))


def test_static_scale_never_changes_but_still_skips_overflow():
    model, x, y = _model_and_data()
    model = model.npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.npu.amp.GradScaler(init_scale=128.0, growth_interval=1, dynamic=False)
    for step in range(4):
        opt.zero_grad()
        scaler.scale(torch.nn.functional.mse_loss(model(x.npu()), y.npu())).backward()
        before = _params_cpu(model)
        if step == 1:
            model[2].bias.grad[0] = float("inf")
        scaler.step(opt)
        scaler.update()
        changed = not all(torch.equal(a, b) for a, b in zip(_params_cpu(model), before))
        assert changed == (step != 1)
        assert scaler.get_scale() == 128.0


def test_unscale_then_clip_and_state_dict_round_trip():
    model, x, y = _model_and_data()
    model = model.npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("npu", init_scale=64.0)
    scaler.scale(torch.nn.functional.mse_loss(model(x.npu()), y.npu())).backward()
    scaler.unscale_(opt)
    unscaled = [p.grad.detach().cpu().clone() for p in model.parameters()]
    ref_model, _, _ = _model_and_data()
    torch.nn.functional.mse_loss(ref_model(x), y).backward()
    for a, p in zip(unscaled, ref_model.parameters()):
        torch.testing.assert_close(a, p.grad, rtol=1e-5, atol=1e-7)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    scaler.step(opt)
    scaler.update()
    state = scaler.state_dict()
    other = torch.npu.amp.GradScaler()
    other.load_state_dict(state)
    assert other.get_scale() == scaler.get_scale() == 64.0
    assert other.state_dict() == state
