"""The apex distribution (apex/): seed 003's `from apex import amp` and apex.optimizers snippets train on
npu like float32 torch on CPU, apex's keyword names work, and every apex name is torch_npu's object."""

import io

import pytest
import torch
import torch.nn as nn

import apex
import torch.npu  # noqa: F401  (the seed's scripts import it next to apex)
import torch_npu.contrib.amp
import torch_npu.optim
from apex import amp
from torch_npu.utils import is_combined_tensor_valid

STEPS = 20


def _model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4))


def _batches(steps):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(128, 10, generator=g)
    y = (x[:, :4] * 2 + 0.1 * torch.randn(128, 4, generator=g)).argmax(1)
    return [(x[(i * 32) % 128:][:32], y[(i * 32) % 128:][:32]) for i in range(steps)]


def _train_amp(model, optimizer, batches, on_backward=None, clip=None, **scale_kwargs):
    """Seed 003's train() loop: npu batches with int32 targets, amp.scale_loss around backward."""
    criterion = nn.CrossEntropyLoss().to("npu:0")
    losses = []
    for i, (images, target) in enumerate(batches):
        target = target.to(torch.int32)
        images, target = images.to("npu:0", non_blocking=False), target.to("npu:0", non_blocking=False)
        loss = criterion(model(images), target)
        optimizer.zero_grad()
        with amp.scale_loss(loss, optimizer, **scale_kwargs) as scaled_loss:
            scaled_loss.backward()
            if on_backward:
                on_backward(i)
        if clip:
            torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer), clip)
        optimizer.step()
        losses.append(loss.item())
    return losses


def _train_cpu(model, optimizer, batches, clip=None):
    """The same training in float32 with plain torch on CPU (the reference)."""
    losses = []
    for images, target in batches:
        loss = nn.functional.cross_entropy(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
    return losses


def _assert_tracks(losses, ref, tol=0.01):
    assert losses[-1] < 0.6 * losses[0], f"did not converge: {losses}"
    assert max(abs(a - b) for a, b in zip(losses, ref)) < tol, (losses, ref)


def test_apex_names_are_torch_npu_objects():
    for name in ("initialize", "scale_loss", "master_params", "state_dict", "load_state_dict"):
        assert getattr(amp, name) is getattr(torch_npu.contrib.amp, name), name
    assert apex.amp is amp
    assert amp._amp_state is torch_npu.contrib.amp._state._amp_state
    assert sorted(apex.optimizers.__all__) == sorted(torch_npu.optim.__all__)
    for name in torch_npu.optim.__all__:
        assert getattr(apex.optimizers, name) is getattr(torch_npu.optim, name), name
    from apex.optimizers import NpuFusedAdadelta, NpuFusedAdam, NpuFusedLamb, NpuFusedSGD  # the seed's four
    assert (NpuFusedSGD, NpuFusedAdam, NpuFusedLamb, NpuFusedAdadelta) == (
        torch_npu.optim.NpuFusedSGD, torch_npu.optim.NpuFusedAdam, torch_npu.optim.NpuFusedLamb,
        torch_npu.optim.NpuFusedAdadelta)


def test_seed_main_py_o2_static_scale_checkpoint_and_resume():
    # Seed 003's multi-device main.py, one process: SGD, amp.initialize(opt_level='O2', loss_scale=1024.),
    # scale_loss in train(), amp.state_dict() in the checkpoint, amp.load_state_dict() on resume.
    batches = _batches(STEPS)
    ref_model = _model()
    ref = _train_cpu(ref_model, torch.optim.SGD(ref_model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4),
                     batches)

    model = _model().to("npu:0")
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
    model, optimizer = amp.initialize(model, optimizer, opt_level="O2", loss_scale=1024., verbosity=0)
    first = _train_amp(model, optimizer, batches[:STEPS // 2])
    buf = io.BytesIO()
    torch.save({"epoch": 1, "state_dict": model.state_dict(), "optimizer": optimizer.state_dict(),
                "amp": amp.state_dict()}, buf)
    buf.seek(0)

    checkpoint = torch.load(buf, map_location="npu:0")
    model = _model(seed=5).to("npu:0")
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
    model, optimizer = amp.initialize(model, optimizer, opt_level="O2", loss_scale=1024., verbosity=0)
    model.load_state_dict(checkpoint["state_dict"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    amp.load_state_dict(checkpoint["amp"])
    assert model[0].weight.dtype == torch.float16 and model[1].weight.dtype == torch.float32
    second = _train_amp(model, optimizer, batches[STEPS // 2:])
    _assert_tracks(first + second, ref)
    assert amp.state_dict()["loss_scaler0"]["loss_scale"] == 1024.0


def test_seed_mixed_precision_section_fused_sgd_combine_grad_dynamic_scale():
    # "将原有优化器替换为apex.optimizers.*" + "amp.initialize(model, optimizer, combine_grad=True)":
    # O1 by default, dynamic loss scale.
    batches = _batches(STEPS)
    ref_model = _model()
    ref = _train_cpu(ref_model, torch.optim.SGD(ref_model.parameters(), lr=0.1, momentum=0.9), batches)
    model = _model().npu()
    optimizer = apex.optimizers.NpuFusedSGD(model.parameters(), lr=0.1, momentum=0.9)
    model, optimizer = amp.initialize(model, optimizer, combine_grad=True, verbosity=0)
    _assert_tracks(_train_amp(model, optimizer, batches), ref)
    assert amp.state_dict()["loss_scaler0"] == {"loss_scale": 2.0**16, "unskipped": STEPS}
    grads = [p.grad for p in model.parameters()]
    assert is_combined_tensor_valid(grads[0]._base, grads), "gradients are not in one combined buffer"


# apex.optimizers name -> (torch reference class, arguments); Lamb has no torch.optim counterpart, so its
# reference is the same optimizer run in float32 on CPU (test_fused_optim.py checks it against LAMB).
OPTIMIZERS = {
    "NpuFusedSGD": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=1e-4)),
    "NpuFusedAdam": (torch.optim.Adam, dict(lr=1e-2)),
    "NpuFusedAdamW": (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.01)),
    "NpuFusedLamb": (torch_npu.optim.NpuFusedLamb, dict(lr=5e-2)),
    "NpuFusedAdadelta": (torch.optim.Adadelta, dict(lr=5.0)),
    "NpuFusedRMSprop": (torch.optim.RMSprop, dict(lr=3e-3)),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
@pytest.mark.parametrize("opt_level", ["O1", "O2"])
def test_fused_optimizers_under_amp_track_float32_cpu(opt_level, name):
    ref_cls, kwargs = OPTIMIZERS[name]
    batches = _batches(STEPS)
    ref_model = _model()
    ref = _train_cpu(ref_model, ref_cls(ref_model.parameters(), **kwargs), batches)
    model = _model().npu()
    optimizer = getattr(apex.optimizers, name)(model.parameters(), **kwargs)
    model, optimizer = amp.initialize(model, optimizer, opt_level=opt_level, loss_scale="dynamic",
                                      combine_grad=True, verbosity=0)
    _assert_tracks(_train_amp(model, optimizer, batches), ref)


def test_master_params_clipping_o2():
    # apex's idiom: clip the float32 masters, whose gradients are unscaled after scale_loss.
    batches = _batches(STEPS)
    ref_model = _model()
    ref = _train_cpu(ref_model, torch.optim.SGD(ref_model.parameters(), lr=0.2), batches, clip=0.5)
    model = _model().npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    model, optimizer = amp.initialize(model, optimizer, opt_level="O2", verbosity=0)
    masters = list(amp.master_params(optimizer))
    assert all(p.dtype == torch.float32 for p in masters) and masters[0] is not model[0].weight
    _assert_tracks(_train_amp(model, optimizer, batches, clip=0.5), ref)


def test_dynamic_scale_factors_and_overflow_skip():
    model = _model().npu()
    optimizer = apex.optimizers.NpuFusedAdam(model.parameters(), lr=1e-2)
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1", combine_grad=True, dynamic_init_scale=2.**10,
                                      scale_growth_factor=4., scale_backoff_factor=0.25, scale_window=2, verbosity=0)
    seen = {}

    def poison(step):
        if step == 0:
            seen["before"] = model[0].weight.detach().cpu().clone()
            model[3].bias.grad[0] = float("inf")

    _train_amp(model, optimizer, _batches(1), on_backward=poison)
    assert torch.equal(model[0].weight.detach().cpu(), seen["before"]), "the overflow step changed weights"
    assert amp.state_dict()["loss_scaler0"] == {"loss_scale": 256.0, "unskipped": 0}
    _train_amp(model, optimizer, _batches(2))
    assert amp.state_dict()["loss_scaler0"] == {"loss_scale": 1024.0, "unskipped": 0}
    assert not torch.equal(model[0].weight.detach().cpu(), seen["before"])


def test_apex_keyword_arguments():
    x = torch.randn(8, 10).npu()
    model = _model().npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # O1 without patching torch functions is float32 throughout.
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1", patch_torch_functions=False, verbosity=0)
    seen = {}
    model[0].register_forward_hook(lambda m, i, o: seen.update(linear=o.dtype) and None)
    model(x)
    assert seen["linear"] == torch.float32

    model = _model().npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = amp.initialize(model, optimizer, opt_level="O2", cast_model_outputs=torch.float16,
                                      check_combined_tensors=True, user_cast_preferred=False, ddp_replica_count=8,
                                      verbosity=0)
    assert model(x).dtype == torch.float16

    # delay_overflow_check: unscale, but neither check for overflow nor touch the scale.
    model = _model().npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1", verbosity=0)
    before = model[3].bias.detach().cpu().clone()

    def poison(step):
        model[3].bias.grad[0] = float("inf")

    _train_amp(model, optimizer, _batches(1), on_backward=poison, delay_overflow_check=True)
    assert amp.state_dict()["loss_scaler0"] == {"loss_scale": 2.0**16, "unskipped": 0}
    assert not torch.equal(model[3].bias.detach().cpu(), before), "the step was skipped"

    with pytest.raises(NotImplementedError, match="DistributedDataParallel"):
        amp.initialize(_model().npu(), torch.optim.SGD(_model().parameters(), lr=0.1), combine_ddp=True)
