"""Training checkpoints: modules, optimizer and scaler state saved from npu and loaded with
map_location ("cpu", "npu:1") round-trip bit-exactly, and resumed training equals uninterrupted
training; a pin_memory DataLoader feeds the device with non_blocking copies."""

import io

import pytest
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from torch_npu.optim import NpuFusedAdam


def _model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))


def _batches(n):
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)) for _ in range(n)]


def _train(model, opt, scaler, batches, device):
    for x, y in batches:
        opt.zero_grad()
        with torch.autocast("npu", dtype=torch.bfloat16, enabled=device.startswith("npu")):
            loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()


def _save(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return buf


def _state_tensors(sd):
    """Every tensor in a (nested) state dict, in a fixed order."""
    if isinstance(sd, torch.Tensor):
        return [sd]
    if isinstance(sd, dict):
        return [t for k in sorted(sd, key=str) for t in _state_tensors(sd[k])]
    if isinstance(sd, (list, tuple)):
        return [t for v in sd for t in _state_tensors(v)]
    return []


@pytest.mark.parametrize("opt_cls", [torch.optim.Adam, NpuFusedAdam])
@pytest.mark.parametrize("location", ["npu:1", "cpu"])
def test_checkpoint_round_trip_is_bit_exact(opt_cls, location):
    model = _model().npu()
    opt = opt_cls(model.parameters(), lr=1e-2)
    scaler = torch.npu.amp.GradScaler(init_scale=256.0)
    _train(model, opt, scaler, _batches(3), "npu")
    ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "scaler": scaler.state_dict()}
    loaded = torch.load(_save(ckpt), map_location=location)
    for name in ("model", "optimizer"):
        saved, restored = _state_tensors(ckpt[name]), _state_tensors(loaded[name])
        assert len(saved) == len(restored) > 0
        for a, b in zip(saved, restored):
            if name == "optimizer" and b.dim() == 0 and b.device.type == "cpu" and a.device.type == "cpu":
                assert torch.equal(a, b)  # step counters stay on the CPU, as torch.optim keeps them
                continue
            assert b.device == torch.device(location)
            assert a.dtype == b.dtype and torch.equal(a.cpu(), b.cpu())
    assert loaded["scaler"] == ckpt["scaler"]


def test_whole_module_save_load_with_map_location():
    model = _model().npu()
    buf = _save(model)
    for location, device in (("cpu", "cpu"), ("npu:1", "npu:1"), (None, "npu:0")):
        buf.seek(0)
        restored = torch.load(buf, map_location=location, weights_only=False)
        for a, b in zip(model.state_dict().values(), restored.state_dict().values()):
            assert b.device == torch.device(device)
            assert torch.equal(a.cpu(), b.cpu())


@pytest.mark.parametrize("opt_cls", [torch.optim.SGD, NpuFusedAdam])
def test_resumed_training_equals_uninterrupted_training(opt_cls, deterministic):
    kwargs = dict(lr=0.05, momentum=0.9) if opt_cls is torch.optim.SGD else dict(lr=1e-2)
    batches = _batches(6)
    model = _model().npu()
    opt = opt_cls(model.parameters(), **kwargs)
    scaler = torch.npu.amp.GradScaler(init_scale=2.0**12)
    _train(model, opt, scaler, batches, "npu")

    half = _model().npu()
    half_opt = opt_cls(half.parameters(), **kwargs)
    half_scaler = torch.npu.amp.GradScaler(init_scale=2.0**12)
    _train(half, half_opt, half_scaler, batches[:3], "npu")
    buf = _save({"model": half.state_dict(), "optimizer": half_opt.state_dict(), "scaler": half_scaler.state_dict()})
    ckpt = torch.load(buf, map_location="npu:1")
    resumed = _model(seed=9).to("npu:1")
    resumed.load_state_dict(ckpt["model"])
    resumed_opt = opt_cls(resumed.parameters(), **kwargs)
    resumed_opt.load_state_dict(ckpt["optimizer"])
    resumed_scaler = torch.npu.amp.GradScaler()
    resumed_scaler.load_state_dict(ckpt["scaler"])
    _train(resumed, resumed_opt, resumed_scaler, batches[3:], "npu:1")
    for a, b in zip(model.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a.cpu(), b.cpu())


def test_pinned_dataloader_feeds_device_with_non_blocking_copies():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 6, generator=g), torch.randint(0, 3, (64,), generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, pin_memory=True)
    losses = {}
    for device in ("cpu", "npu"):
        model = _model().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses[device] = []
        for xb, yb in loader:
            assert xb.is_pinned() and yb.is_pinned()
            xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            losses[device].append(loss.item())
    assert losses["cpu"] == losses["npu"]
