"""Pinned host memory: pin_memory(), non_blocking copies to and from npu, DataLoader(pin_memory=True)."""

import copy

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset


def test_pin_memory_is_pinned():
    x = torch.randn(8)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned()
    assert p.device.type == "cpu"
    assert torch.equal(p, x)
    assert p.pin_memory().is_pinned()


def test_empty_with_pin_memory():
    p = torch.empty(16, pin_memory=True)
    assert p.is_pinned()
    q = torch.zeros(3, 4, pin_memory=True)
    assert q.is_pinned() and torch.equal(q, torch.zeros(3, 4))


def test_views_of_pinned_tensor_are_pinned():
    p = torch.randn(4, 6).pin_memory()
    assert p.t().is_pinned()
    assert p[1:].is_pinned()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_non_blocking_round_trip_with_pinned_memory(dtype):
    src = (torch.randn(64, 16) * 100).to(dtype).pin_memory()
    x = src.to("npu", non_blocking=True)
    y = x * 2
    out = torch.empty(64, 16, dtype=dtype).pin_memory()
    out.copy_(y, non_blocking=True)
    torch.npu.synchronize()
    assert torch.equal(out, src * 2)


def test_non_blocking_copy_to_npu_then_sync_on_stream():
    src = torch.randn(1000).pin_memory()
    x = torch.empty(1000, device="npu")
    x.copy_(src, non_blocking=True)
    torch.npu.current_stream().synchronize()
    assert torch.equal(x.cpu(), src)


def test_non_blocking_to_cpu_gives_correct_values_after_synchronize():
    ref = torch.randn(128, 8)
    x = ref.npu()
    host = x.to("cpu", non_blocking=True)
    torch.npu.synchronize()
    assert torch.equal(host, ref)


def test_non_blocking_copy_from_pinned_noncontiguous_source():
    src = torch.randn(16, 8).pin_memory()
    x = src.t().to("npu", non_blocking=True)
    out = torch.empty(8, 16).pin_memory()
    out.copy_(x, non_blocking=True)
    torch.npu.synchronize()
    assert torch.equal(out, src.t())


def test_non_blocking_copy_to_pageable_destination_is_complete_on_return():
    ref = torch.randn(256)
    x = ref.npu()
    dst = torch.empty(256)  # pageable: the copy must be synchronous
    dst.copy_(x, non_blocking=True)
    assert torch.equal(dst, ref)


def test_pinned_buffer_reused_after_synchronize():
    buf = torch.empty(32).pin_memory()
    results = []
    for i in range(4):
        buf.copy_(torch.full((32,), float(i)))
        x = buf.to("npu", non_blocking=True)
        torch.npu.synchronize()  # the copy is done: the buffer may be overwritten
        results.append(x)
    for i, x in enumerate(results):
        assert torch.equal(x.cpu(), torch.full((32,), float(i)))


def test_pinned_source_freed_right_after_non_blocking_copy():
    for _ in range(10):
        src = torch.randn(1 << 15).pin_memory()
        keep = src.clone()
        x = src.to("npu", non_blocking=True)
        del src  # the pinned block must outlive the queued copy
        torch.npu.synchronize()
        assert torch.equal(x.cpu(), keep)


def test_pinned_to_other_device_non_blocking():
    src = torch.randn(10).pin_memory()
    x = src.to("npu:2", non_blocking=True)
    torch.npu.synchronize(2)
    assert x.device == torch.device("npu", 2)
    assert torch.equal(x.cpu(), src)


def _dataset():
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g))


def test_dataloader_pin_memory_yields_pinned_batches():
    ds = _dataset()
    loader = DataLoader(ds, batch_size=8, pin_memory=True)
    n = 0
    for i, (xb, yb) in enumerate(loader):
        assert xb.is_pinned() and yb.is_pinned()
        assert torch.equal(xb, ds.tensors[0][i * 8:(i + 1) * 8])
        n += 1
    assert n == 4


def test_dataloader_pin_memory_with_worker_processes():
    ds = _dataset()
    torch.ones(1, device="npu")  # the runtime is up before the workers fork
    batches = []
    for xb, yb in DataLoader(ds, batch_size=8, pin_memory=True, num_workers=2):
        assert xb.is_pinned() and yb.is_pinned()
        batches.append((xb.to("npu", non_blocking=True), yb.to("npu", non_blocking=True)))
    torch.npu.synchronize()
    assert torch.equal(torch.cat([b[0].cpu() for b in batches]), ds.tensors[0])
    assert torch.equal(torch.cat([b[1].cpu() for b in batches]), ds.tensors[1])


def test_dataloader_batches_train_on_npu_like_cpu():
    ds = _dataset()
    torch.manual_seed(0)
    cpu_model = torch.nn.Linear(4, 1)
    npu_model = copy.deepcopy(cpu_model).npu()
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    npu_opt = torch.optim.SGD(npu_model.parameters(), lr=0.1)
    for xb, yb in DataLoader(ds, batch_size=8, pin_memory=True):
        assert xb.is_pinned()
        for model, opt, x, y in ((cpu_model, cpu_opt, xb, yb),
                                 (npu_model, npu_opt, xb.to("npu", non_blocking=True),
                                  yb.to("npu", non_blocking=True))):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
    torch.npu.synchronize()
    torch.testing.assert_close(npu_model.weight.cpu(), cpu_model.weight)
    torch.testing.assert_close(npu_model.bias.cpu(), cpu_model.bias)
