"""NpuFused optimizers: equal to torch.optim (Lamb: to a reference written here) after several steps,
state_dict compatible both ways, combined buffers, and a step whose device-op count does not grow with
the number of parameters."""

import copy
import io

import math

import pytest
import torch

from torch_npu.optim import (NpuFusedAdadelta, NpuFusedAdam, NpuFusedAdamP, NpuFusedAdamW, NpuFusedBertAdam,
                             NpuFusedLamb, NpuFusedRMSprop, NpuFusedRMSpropTF, NpuFusedSGD)
from torch_npu.utils import is_combined_tensor_valid, npu_combine_tensors

STEPS = 6

CASES = [
    ("sgd", NpuFusedSGD, torch.optim.SGD, dict(lr=0.1)),
    ("sgd_momentum_wd", NpuFusedSGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=1e-2)),
    ("sgd_nesterov", NpuFusedSGD, torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("sgd_dampening", NpuFusedSGD, torch.optim.SGD, dict(lr=0.1, momentum=0.8, dampening=0.3)),
    ("adam", NpuFusedAdam, torch.optim.Adam, dict(lr=1e-2)),
    ("adam_wd_amsgrad", NpuFusedAdam, torch.optim.Adam, dict(lr=1e-2, weight_decay=1e-2, amsgrad=True)),
    ("adamw", NpuFusedAdamW, torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    ("adadelta", NpuFusedAdadelta, torch.optim.Adadelta, dict(lr=1.0, weight_decay=1e-2)),
    ("rmsprop", NpuFusedRMSprop, torch.optim.RMSprop, dict(lr=1e-2)),
    ("rmsprop_centered_momentum", NpuFusedRMSprop, torch.optim.RMSprop, dict(lr=1e-2, momentum=0.5, centered=True)),
]


def _model(layers=2, seed=0):
    torch.manual_seed(seed)
    mods = []
    for _ in range(layers - 1):
        mods += [torch.nn.Linear(6, 6), torch.nn.Tanh()]
    return torch.nn.Sequential(*mods, torch.nn.Linear(6, 3))


def _batches(n=STEPS):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)) for _ in range(n)]


def _train(model, opt, batches, device):
    for x, y in batches:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
        opt.step()


def _assert_params_close(a, b, tol=1e-6):
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,fused_cls,ref_cls,kwargs", CASES, ids=[c[0] for c in CASES])
def test_fused_equals_torch_optim(name, fused_cls, ref_cls, kwargs):
    ref = _model()
    model = copy.deepcopy(ref).npu()
    batches = _batches()
    _train(model, fused_cls(model.parameters(), **kwargs), batches, "npu")
    _train(ref, ref_cls(ref.parameters(), **kwargs), batches, "cpu")
    _assert_params_close(model, ref)


@pytest.mark.parametrize("name,fused_cls,ref_cls,kwargs", CASES, ids=[c[0] for c in CASES])
def test_state_dict_interchanges_with_torch_optim(name, fused_cls, ref_cls, kwargs):
    batches = _batches(4)
    # Fused for 2 steps -> save -> torch.optim continues for 2 steps, and the other way round;
    # both must match 4 steps of torch.optim alone.
    ref = _model()
    _train(ref, ref_cls(ref.parameters(), **kwargs), batches, "cpu")
    for first_cls, second_cls, device in ((fused_cls, ref_cls, "npu"), (ref_cls, fused_cls, "npu")):
        model = _model().to(device)
        first = first_cls(model.parameters(), **kwargs)
        _train(model, first, batches[:2], device)
        buf = io.BytesIO()
        torch.save({"model": model.state_dict(), "optim": first.state_dict()}, buf)
        buf.seek(0)
        saved = torch.load(buf, map_location=device)
        model2 = _model(seed=5).to(device)
        model2.load_state_dict(saved["model"])
        second = second_cls(model2.parameters(), **kwargs)
        second.load_state_dict(saved["optim"])
        _train(model2, second, batches[2:], device)
        _assert_params_close(model2, ref)


def _lamb_reference(params, grads, states, step, lr, betas, eps, wd):
    """LAMB per parameter, written plainly (one parameter at a time, float64)."""
    b1, b2 = betas
    for p, g, s in zip(params, grads, states):
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["v"] = b2 * s["v"] + (1 - b2) * g * g
        update = s["m"] / (s["v"].sqrt() + eps) + wd * p  # torch_npu's LAMB: no bias correction
        w_norm, u_norm = p.norm().clamp(max=10.0), update.norm()
        trust = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        p -= lr * trust * update


@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_lamb_matches_reference(wd):
    model = _model().npu()
    ref_params = [p.detach().cpu().double().clone() for p in model.parameters()]
    states = [{"m": torch.zeros_like(p), "v": torch.zeros_like(p)} for p in ref_params]
    opt = NpuFusedLamb(model.parameters(), lr=0.02, weight_decay=wd)
    for step, (x, y) in enumerate(_batches(), start=1):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x.npu()), y.npu()).backward()
        grads = [p.grad.detach().cpu().double() for p in model.parameters()]
        # The reference gradient is the one the optimizer sees (both start from the same weights each step).
        ref_params = [p.detach().cpu().double().clone() for p in model.parameters()]
        opt.step()
        _lamb_reference(ref_params, grads, states, step, 0.02, (0.9, 0.999), 1e-6, wd)
        for p, r in zip(model.parameters(), ref_params):
            torch.testing.assert_close(p.detach().cpu().double(), r, rtol=1e-5, atol=1e-6)


def test_lamb_trust_ratio_is_per_parameter():
    # Two parameters with very different scales: a global ratio would move them alike.
    a = torch.nn.Parameter(torch.full((4,), 10.0, device="npu"))
    b = torch.nn.Parameter(torch.full((4,), 0.01, device="npu"))
    opt = NpuFusedLamb([a, b], lr=0.1)
    (a.sum() + b.sum()).backward()
    opt.step()
    # u has equal elements, so |delta| = lr * min(||w||, 10) / ||u|| * u = lr * min(||w||, 10) / 2 here:
    # ||a|| = 20 is clamped to 10.
    torch.testing.assert_close((10.0 - a.detach()).cpu(), torch.full((4,), 0.5), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close((0.01 - b.detach()).cpu(), torch.full((4,), 1e-3), rtol=1e-3, atol=1e-6)


def test_parameters_gradients_and_state_live_in_combined_buffers():
    model = _model(3).npu()
    opt = NpuFusedAdam(model.parameters(), lr=1e-2)
    _train(model, opt, _batches(2), "npu")
    params = list(model.parameters())
    (bucket,) = opt._buckets[0]
    assert is_combined_tensor_valid(bucket.flat_param, params)
    assert is_combined_tensor_valid(bucket.flat_grad, [p.grad for p in params])
    assert is_combined_tensor_valid(bucket.flat_state["exp_avg"], [opt.state[p]["exp_avg"] for p in params])
    opt.zero_grad()  # zeroes the buffer in place instead of dropping the gradients
    assert is_combined_tensor_valid(bucket.flat_grad, [p.grad for p in params])
    assert bucket.flat_grad.abs().sum().item() == 0


def _step_device_ops(layers):
    model = _model(layers).npu()
    opt = NpuFusedSGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    _train(model, opt, _batches(2), "npu")  # combine first
    torch.npu.synchronize()
    torch.npu.op_stats(reset=True)
    opt.step()
    torch.npu.synchronize()
    return sum(sum(v.values()) for v in torch.npu.op_stats(reset=True).values())


def test_device_ops_per_step_do_not_grow_with_parameter_count():
    few, many = _step_device_ops(2), _step_device_ops(8)
    assert few == many, f"{few} device ops for 4 parameters but {many} for 16"
    assert few <= 4


def test_recombines_after_module_to_and_keeps_training_correctly():
    ref = _model()
    model = copy.deepcopy(ref).npu()
    batches = _batches()
    opt = NpuFusedSGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    _train(model, opt, batches[:3], "npu")
    _train(ref, ref_opt, batches[:3], "cpu")
    model.to("npu:1")  # replaces every parameter's storage
    for p in model.parameters():
        p.grad = None
    for s in opt.state.values():
        s["momentum_buffer"] = s["momentum_buffer"].to("npu:1")
    _train(model, opt, batches[3:], "npu:1")
    _train(ref, ref_opt, batches[3:], "cpu")
    _assert_params_close(model, ref)


def test_npu_combine_tensors_keeps_values_and_identity():
    tensors = [torch.randn(3, 2).npu(), torch.randn(5).npu()]
    values = [t.cpu() for t in tensors]
    ids = [id(t) for t in tensors]
    flat = npu_combine_tensors(tensors)
    assert flat.numel() == 11 and [id(t) for t in tensors] == ids
    assert all(torch.equal(t.cpu(), v) for t, v in zip(tensors, values))
    flat.mul_(2)  # one op updates every tensor
    assert all(torch.equal(t.cpu(), 2 * v) for t, v in zip(tensors, values))
    with pytest.raises(ValueError, match="share device and dtype"):
        npu_combine_tensors([torch.ones(2).npu(), torch.ones(2, dtype=torch.float64).npu()])


@pytest.mark.parametrize("cls,kwargs,message", [
    (NpuFusedSGD, dict(lr=-1.0), "learning rate"),
    (NpuFusedSGD, dict(lr=0.1, nesterov=True), "nesterov"),
    (NpuFusedAdam, dict(betas=(1.0, 0.9)), "betas"),
    (NpuFusedLamb, dict(weight_decay=-1.0), "weight_decay"),
    (NpuFusedRMSprop, dict(momentum=-1.0), "momentum"),
    (NpuFusedAdadelta, dict(rho=2.0), "rho"),
])
def test_bad_arguments_raise_clear_errors(cls, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cls(_model().npu().parameters(), **kwargs)


def _rmsprop_tf_reference(params, grads, states, step, lr=1e-2, alpha=0.9, eps=1e-10, wd=0.0, momentum=0.0,
                          centered=False, decoupled=False, lr_in_momentum=True):
    """timm's RMSpropTF per parameter, written plainly."""
    for i, (p, g, s) in enumerate(zip(params, grads, states)):
        if "sq" not in s:
            s.update(sq=torch.ones_like(p), buf=torch.zeros_like(p), gavg=torch.zeros_like(p))
        if wd:
            if decoupled:
                p.mul_(1 - lr * wd)
            else:
                g = g + wd * p
        s["sq"] = s["sq"] + (1 - alpha) * (g * g - s["sq"])
        if centered:
            s["gavg"] = s["gavg"] + (1 - alpha) * (g - s["gavg"])
            avg = (s["sq"] - s["gavg"] ** 2 + eps).sqrt()
        else:
            avg = (s["sq"] + eps).sqrt()
        if momentum > 0:
            if lr_in_momentum:
                s["buf"] = momentum * s["buf"] + lr * g / avg
                p -= s["buf"]
            else:
                s["buf"] = momentum * s["buf"] + g / avg
                p -= lr * s["buf"]
        else:
            p -= lr * g / avg


def _bert_adam_reference(params, grads, states, step, lr, warmup, t_total, b1=0.9, b2=0.999, e=1e-6, wd=0.01,
                         max_grad_norm=1.0):
    """BertAdam over one combined group, written plainly: clip by the group's norm, no bias correction,
    the warmup_linear schedule."""
    if max_grad_norm > 0:
        norm = torch.sqrt(sum((g * g).sum() for g in grads))
        coef = max_grad_norm / (norm + 1e-6)
        if coef < 1:
            grads = [g * coef for g in grads]
    x = (step - 1) / t_total
    scheduled = lr * (x / warmup if x < warmup else max((x - 1.0) / (warmup - 1.0), 0.0))
    for p, g, s in zip(params, grads, states):
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["v"] = b2 * s["v"] + (1 - b2) * g * g
        p -= scheduled * (s["m"] / (s["v"].sqrt() + e) + wd * p)


def _adamp_reference(params, grads, states, step, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, wd=1e-2, delta=0.1,
                     wd_ratio=0.1, nesterov=False):
    """clovaai's AdamP per parameter, written plainly."""
    b1, b2 = betas
    for p, g, s in zip(params, grads, states):
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["v"] = b2 * s["v"] + (1 - b2) * g * g
        denom = s["v"].sqrt() / math.sqrt(1 - b2 ** step) + eps
        perturb = (b1 * s["m"] + (1 - b1) * g) / denom if nesterov else s["m"] / denom
        ratio = 1.0
        if p.dim() > 1:
            for view in (lambda t: t.reshape(t.size(0), -1), lambda t: t.reshape(1, -1)):
                cos = torch.nn.functional.cosine_similarity(view(g), view(p), dim=1, eps=eps).abs()
                if cos.max() < delta / math.sqrt(view(p).size(1)):
                    shape = [-1] + [1] * (p.dim() - 1)
                    p_n = p / (view(p).norm(dim=1).view(shape) + eps)
                    perturb = perturb - p_n * view(p_n * perturb).sum(dim=1).view(shape)
                    ratio = wd_ratio
                    s["projected"] = True
                    break
        if wd > 0:
            p.mul_(1 - lr * wd * ratio)
        p -= lr / (1 - b1 ** step) * perturb


def _check_against(opt_factory, reference, model_factory=_model, steps=STEPS, tol=(1e-5, 1e-6)):
    model = model_factory().npu()
    opt = opt_factory(model.parameters())
    states = [{"m": torch.zeros_like(p, dtype=torch.float64, device="cpu"),
               "v": torch.zeros_like(p, dtype=torch.float64, device="cpu")} for p in model.parameters()]
    for step, (x, y) in enumerate(_batches(steps), start=1):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x.npu()), y.npu()).backward()
        grads = [p.grad.detach().cpu().double() for p in model.parameters()]
        ref_params = [p.detach().cpu().double().clone() for p in model.parameters()]
        opt.step()
        reference(ref_params, grads, states, step)
        for p, r in zip(model.parameters(), ref_params):
            torch.testing.assert_close(p.detach().cpu().double(), r, rtol=tol[0], atol=tol[1])
    return states


@pytest.mark.parametrize("kwargs", [dict(), dict(weight_decay=1e-2, momentum=0.9),
                                    dict(centered=True, momentum=0.5, lr_in_momentum=False),
                                    dict(weight_decay=0.1, decoupled_decay=True)],
                         ids=["plain", "wd_momentum", "centered", "decoupled"])
def test_rmsprop_tf_matches_timm_reference(kwargs):
    ref_kw = dict(wd=kwargs.get("weight_decay", 0.0), momentum=kwargs.get("momentum", 0.0),
                  centered=kwargs.get("centered", False), decoupled=kwargs.get("decoupled_decay", False),
                  lr_in_momentum=kwargs.get("lr_in_momentum", True))
    _check_against(lambda ps: NpuFusedRMSpropTF(ps, lr=1e-2, **kwargs),
                   lambda p, g, s, step: _rmsprop_tf_reference(p, g, s, step, **ref_kw))


def test_bert_adam_matches_reference_with_clipping_and_warmup():
    _check_against(lambda ps: NpuFusedBertAdam(ps, lr=5e-2, warmup=0.3, t_total=STEPS, max_grad_norm=0.05),
                   lambda p, g, s, step: _bert_adam_reference(p, g, s, step, 5e-2, 0.3, STEPS, max_grad_norm=0.05))
    with pytest.raises(ValueError, match="lr is required"):
        NpuFusedBertAdam([torch.nn.Parameter(torch.ones(2, device="npu"))])
    with pytest.raises(ValueError, match="schedule"):
        NpuFusedBertAdam([torch.nn.Parameter(torch.ones(2, device="npu"))], lr=1.0, schedule="warmup_cubic")


@pytest.mark.parametrize("nesterov", [False, True])
def test_adamp_matches_reference(nesterov):
    def conv_model():  # a convolution before batch norm is scale-invariant: its update gets projected
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Unflatten(1, (6, 1, 1)), torch.nn.Conv2d(6, 8, 1),
                                   torch.nn.BatchNorm2d(8), torch.nn.Flatten(), torch.nn.Linear(8, 3))
    states = _check_against(lambda ps: NpuFusedAdamP(ps, lr=1e-2, weight_decay=1e-2, nesterov=nesterov),
                   lambda p, g, s, step: _adamp_reference(p, g, s, step, nesterov=nesterov), model_factory=conv_model)
    assert states[0].get("projected") and not states[-2].get("projected")  # conv weight yes, head no


def test_lamb_global_grad_norm_divides_large_gradients():
    def reference(params, grads, states, step):
        norm = torch.sqrt(sum((g * g).sum() for g in grads)).clamp(min=1.0)
        _lamb_reference(params, [g / norm for g in grads], states, step, 0.02, (0.9, 0.999), 1e-6, 0.0)
    _check_against(lambda ps: NpuFusedLamb(ps, lr=0.02, use_global_grad_norm=True), reference)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.05, 1e6])
def test_clip_grad_norm_fused_matches_torch_clip_grad_norm(norm_type, max_norm):
    torch.manual_seed(3)
    ref, fused = _model(), _model()
    fused.load_state_dict(ref.state_dict())
    ref, fused = ref.to("npu"), fused.to("npu")
    opt = NpuFusedSGD(fused.parameters(), lr=0.1)
    x, y = _batches(1)[0]
    for m in (ref, fused):
        torch.nn.functional.mse_loss(m(x.npu()), y.npu()).backward()
    expected = torch.nn.utils.clip_grad_norm_(list(ref.parameters()), max_norm, norm_type)
    total = opt.clip_grad_norm_fused_(max_norm, norm_type)
    torch.testing.assert_close(total.cpu(), expected.cpu(), rtol=1e-5, atol=1e-6)
    for a, b in zip(ref.parameters(), fused.parameters()):
        torch.testing.assert_close(b.grad.cpu(), a.grad.cpu(), rtol=1e-5, atol=1e-6)
    opt.step()  # the clipped gradients are the ones the fused step reads
    for a, b in zip(ref.parameters(), fused.parameters()):
        torch.testing.assert_close(b.detach().cpu(), (a - 0.1 * a.grad).detach().cpu(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("adam_w_mode", [True, False])
def test_deepspeed_npu_fused_adam_call_pattern(adam_w_mode):
    """DeepSpeed's NPU FusedAdam (op_builder/npu/fused_adam.py): per flat tensor, torch._fused_adamw_ /
    torch._fused_adam_ with a device step tensor it increments itself; several steps against CPU."""
    g = torch.Generator().manual_seed(0)
    shapes = [(37,), (8, 5), (129,)]
    params = [torch.randn(s, generator=g) for s in shapes]
    grads = [[torch.randn(s, generator=g) for s in shapes] for _ in range(STEPS)]

    def run(device):
        p = [x.clone().to(device) for x in params]
        m = [torch.zeros_like(x) for x in p]
        v = [torch.zeros_like(x) for x in p]
        fused = torch._fused_adamw_ if adam_w_mode else torch._fused_adam_
        for step in range(1, STEPS + 1):
            step_tensor = torch.tensor(step, dtype=torch.int64, device=device)
            for i in range(len(p)):
                fused([p[i]], [grads[step - 1][i].to(device)], [m[i]], [v[i]], [], [step_tensor], amsgrad=False,
                      lr=1e-2, beta1=0.9, beta2=0.999, weight_decay=0.01, eps=1e-8, maximize=False)
        return [x.cpu() for x in p]

    for got, want in zip(run("npu"), run("cpu")):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
