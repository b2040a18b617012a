"""torch.npu.set_sync_debug_mode (warn / error at blocking copies, never at explicit synchronize) and
torch.npu.utilization (busy share of the time between calls)."""

import time
import warnings

import pytest
import torch

import torch_npu  # noqa: F401


@pytest.fixture
def restore_mode():
    yield
    torch.npu.set_sync_debug_mode(0)


def test_modes_and_reports(restore_mode):
    x = torch.ones(4, device="npu")
    assert torch.npu.get_sync_debug_mode() == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x.cpu()  # default: silent
    torch.npu.set_sync_debug_mode("warn")
    assert torch.npu.get_sync_debug_mode() == 1
    with pytest.warns(UserWarning, match="synchronizing NPU operation.*npu to the host"):
        assert x.sum().item() == 4.0
    with pytest.warns(UserWarning, match="host to npu"):
        torch.ones(3).to("npu")
    torch.npu.set_sync_debug_mode(2)
    with pytest.raises(RuntimeError, match="synchronizing NPU operation.*refused"):
        x.cpu()
    pinned = torch.empty(4).pin_memory()
    pinned.copy_(x, non_blocking=True)  # asynchronous: allowed
    torch.npu.synchronize()  # explicit: never reported
    assert torch.equal(pinned, torch.ones(4))
    with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
        torch.npu.set_sync_debug_mode("loud")
    with pytest.raises(ValueError, match="must be 0"):
        torch.npu.set_sync_debug_mode(3)


def test_utilization_follows_device_work():
    torch.npu.synchronize()
    torch.npu.utilization()  # starts a period
    a = torch.randn(512, 512, device="npu")
    start = time.perf_counter()
    while time.perf_counter() - start < 0.3:
        for _ in range(8):
            a = (a @ a).tanh()
        torch.npu.synchronize()
    busy = torch.npu.utilization()
    time.sleep(0.2)
    idle = torch.npu.utilization()
    assert busy >= 30 and idle <= 10, (busy, idle)
    assert 0 <= torch.npu.utilization("npu:1") <= 100
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.npu.utilization(99)
