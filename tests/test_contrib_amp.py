"""torch_npu.contrib.amp (apex-style): O1/O2 training tracks float32 CPU training, master weights,
batch norm in float32, static/dynamic loss scale with skipped overflow steps, combined gradients,
amp.state_dict round trip, and clear errors."""

import copy

import pytest
import torch
import torch.nn as nn

from torch_npu.contrib import amp
from torch_npu.optim import NpuFusedSGD
from torch_npu.utils import is_combined_tensor_valid

STEPS = 25


def _model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4))


def _data():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(128, 10, generator=g)
    y = (x[:, :4] * 2 + 0.1 * torch.randn(128, 4, generator=g)).argmax(1)
    return x, y


def _train(model, opt, device, use_amp, steps=STEPS, on_backward=None):
    x, y = _data()
    losses = []
    for i in range(steps):
        xb, yb = x[(i * 32) % 128:][:32].to(device), y[(i * 32) % 128:][:32].to(device)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xb), yb)
        if use_amp:
            with amp.scale_loss(loss, opt) as scaled:
                scaled.backward()
                if on_backward:
                    on_backward(i)
        else:
            loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _fp32_cpu_losses():
    model = _model()
    return _train(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), "cpu", False)


@pytest.mark.parametrize("opt_level", ["O1", "O2"])
@pytest.mark.parametrize("combine_grad", [False, True])
def test_mixed_precision_converges_like_fp32_cpu(opt_level, combine_grad):
    ref = _fp32_cpu_losses()
    model = _model().npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model, opt = amp.initialize(model, opt, opt_level=opt_level, combine_grad=combine_grad, verbosity=0)
    losses = _train(model, opt, "npu", True)
    assert losses[-1] < 0.5 * losses[0], "did not converge"
    assert max(abs(a - b) for a, b in zip(losses, ref)) < 0.05, (losses, ref)


def test_o1_keeps_float32_weights_and_runs_linear_in_float16():
    model = _model().npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O1", verbosity=0)
    seen = {}
    for name, index in (("linear", 0), ("bn", 1)):
        model[index].register_forward_hook(lambda m, i, o, name=name: seen.update({name: o.dtype}) and None)
    out = model(torch.randn(8, 10).npu())
    assert seen == {"linear": torch.float16, "bn": torch.float32}
    assert out.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_o2_half_model_float32_batchnorm_and_master_weights():
    model = _model().npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model, opt = amp.initialize(model, opt, opt_level="O2", verbosity=0)
    assert model[0].weight.dtype == torch.float16 and model[3].weight.dtype == torch.float16
    assert model[1].weight.dtype == torch.float32 and model[1].running_mean.dtype == torch.float32
    masters = opt.param_groups[0]["params"]
    assert all(p.dtype == torch.float32 for p in masters)
    assert masters[0] is not model[0].weight
    out = model(torch.randn(8, 10).npu())
    assert out.dtype == torch.float32
    _train(model, opt, "npu", True, steps=3)
    # After each step the float16 model weights are the rounded float32 masters.
    for model_p, master in zip(model.parameters(), masters):
        assert torch.equal(model_p.detach().cpu(), master.detach().to(model_p.dtype).cpu())


def test_dynamic_scale_skips_overflow_step_and_backs_off():
    model = _model().npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O1", loss_scale="dynamic", verbosity=0)
    assert amp.state_dict()["loss_scaler0"]["loss_scale"] == 2.0**16
    weights = {}

    def poison(step):
        if step == 1:
            weights["before"] = model[0].weight.detach().cpu().clone()
            model[3].bias.grad[0] = float("inf")

    _train(model, opt, "npu", True, steps=2, on_backward=poison)
    assert torch.equal(model[0].weight.detach().cpu(), weights["before"]), "the overflow step changed weights"
    assert amp.state_dict()["loss_scaler0"] == {"loss_scale": 2.0**15, "unskipped": 0}
    _train(model, opt, "npu", True, steps=1)
    assert not torch.equal(model[0].weight.detach().cpu(), weights["before"])
    assert amp.state_dict()["loss_scaler0"]["unskipped"] == 1


@pytest.mark.parametrize("loss_scale,expected", [(128.0, 128.0), (-1, 2.0**16), ("dynamic", 2.0**16)])
def test_static_and_dynamic_loss_scale_values(loss_scale, expected):
    model = _model().npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O2", loss_scale=loss_scale, verbosity=0)
    loss = torch.tensor(0.5, device="npu")
    with amp.scale_loss(loss, opt, delay_unscale=True) as scaled:
        assert scaled.item() == 0.5 * expected
    _train(model, opt, "npu", True, steps=3)
    if loss_scale == 128.0:
        assert amp.state_dict()["loss_scaler0"]["loss_scale"] == 128.0


def test_combine_grad_shares_buffer_with_fused_optimizer_and_matches_uncombined():
    results = []
    for combine in (False, True):
        model = _model().npu()
        opt = NpuFusedSGD(model.parameters(), lr=0.1, momentum=0.9)
        model, opt = amp.initialize(model, opt, opt_level="O2", combine_grad=combine, verbosity=0)
        results.append(_train(model, opt, "npu", True, steps=6))
        if combine:
            for bucket in opt._buckets[0]:
                assert is_combined_tensor_valid(bucket.flat_grad, [p.grad for p in bucket.params])
            stash = opt._amp_stash
            half_bucket = [b for b in stash.buckets if b.model_params][0]
            assert is_combined_tensor_valid(half_bucket.model_params[0].grad._base,
                                            [p.grad for p in half_bucket.model_params])
    torch.testing.assert_close(torch.tensor(results[0]), torch.tensor(results[1]), rtol=1e-6, atol=1e-6)


def test_state_dict_round_trip_and_lr_scheduler():
    model = _model().npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O1", verbosity=0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    _train(model, opt, "npu", True, steps=2)
    sched.step()
    assert opt.param_groups[0]["lr"] == 0.05
    saved = copy.deepcopy(amp.state_dict())
    saved["loss_scaler0"]["loss_scale"] = 512.0
    amp.load_state_dict(saved)
    assert amp.state_dict() == saved
    with pytest.raises(ValueError, match="loss scalers"):
        amp.load_state_dict({})


def test_bad_arguments_raise_clear_errors():
    model = _model().npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="opt_level"):
        amp.initialize(model, opt, opt_level="02")
    with pytest.raises(ValueError, match="loss_scale"):
        amp.initialize(model, opt, opt_level="O1", loss_scale=0)
    with pytest.raises(TypeError, match="nn.Module"):
        amp.initialize("model", opt)
    model, opt = amp.initialize(model, opt, opt_level="O1", verbosity=0)
    with pytest.raises(RuntimeError, match="already initialized"):
        amp.initialize(model, opt, opt_level="O1")
    stranger = torch.optim.SGD(_model().npu().parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="not passed to amp.initialize"):
        with amp.scale_loss(torch.tensor(1.0, device="npu"), stranger):
            pass


@pytest.mark.parametrize("opt_level", ["O1", "O2"])
def test_resume_after_initialize_continues_training(opt_level):
    # The seed's order: build, amp.initialize, then load model / optimizer / amp state.
    model = _model().npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model, opt = amp.initialize(model, opt, opt_level=opt_level, verbosity=0)
    _train(model, opt, "npu", True, steps=3)
    saved = copy.deepcopy({"model": model.state_dict(), "optimizer": opt.state_dict(), "amp": amp.state_dict()})
    expected = _train(model, opt, "npu", True, steps=4)[-1]

    resumed = _model(seed=7).npu()
    resumed_opt = torch.optim.SGD(resumed.parameters(), lr=0.1, momentum=0.9)
    resumed, resumed_opt = amp.initialize(resumed, resumed_opt, opt_level=opt_level, verbosity=0)
    resumed.load_state_dict(saved["model"])
    resumed_opt.load_state_dict(saved["optimizer"])
    amp.load_state_dict(saved["amp"])
    masters = resumed_opt.param_groups[0]["params"]
    assert torch.equal(masters[0].detach().to(resumed[0].weight.dtype).cpu(), resumed[0].weight.detach().cpu())
    got = _train(resumed, resumed_opt, "npu", True, steps=4)[-1]
    # O2 restores masters from the float16 weights (the checkpoint holds no float32 copy): close, not equal.
    assert got == pytest.approx(expected, abs=1e-6 if opt_level == "O1" else 2e-2)


def test_disabled_amp_changes_nothing():
    model = _model().npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    assert amp.initialize(model, enabled=False) is model
    model2, opt2 = amp.initialize(model, opt, opt_level="O2", enabled=False)
    assert model2 is model and opt2 is opt and model[0].weight.dtype == torch.float32
    loss = torch.tensor(2.0, device="npu")
    with amp.scale_loss(loss, opt) as scaled:
        assert scaled is loss
