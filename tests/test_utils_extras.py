"""torch_npu.utils: thread affinity, FlopsCounter against PyTorch's flop formulas, save_async against
torch.save, get_cann_version."""

import os
import threading

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import torch_npu


def test_thread_affinity_binds_and_resets_the_calling_thread():
    before = os.sched_getaffinity(0)
    seen = {}

    def worker():
        torch_npu.utils.set_thread_affinity([0, 0])
        seen["bound"] = os.sched_getaffinity(threading.get_native_id())
        torch_npu.utils.reset_thread_affinity()
        seen["reset"] = os.sched_getaffinity(threading.get_native_id())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["bound"] == {0} and seen["reset"] == before
    assert os.sched_getaffinity(0) == before  # other threads untouched
    with pytest.raises(ValueError, match="core_range"):
        torch_npu.utils.set_thread_affinity([1, 2, 3])
    with pytest.raises(ValueError, match="invalid core range"):
        torch_npu.utils.set_thread_affinity([[3, 1]])
    with pytest.raises(ValueError, match="do not exist"):
        torch_npu.utils.set_thread_affinity([0, 10 ** 6])


def test_flops_counter_matches_flop_counter_mode_and_pauses():
    a, b = torch.randn(8, 16, device="npu"), torch.randn(16, 4, device="npu")
    conv, image = torch.nn.Conv2d(3, 4, 3).npu(), torch.randn(2, 3, 8, 8, device="npu")
    with FlopCounterMode(display=False) as reference:
        a @ b
        conv(image)
    expected = reference.get_total_flops()
    counter = torch_npu.utils.FlopsCounter()
    counter.start()
    a @ b
    conv(image)
    assert counter.get_flops() == [expected, expected]
    counter.pause()
    a @ b
    counter.resume()
    assert counter.get_flops() == [expected, expected + 2 * 8 * 16 * 4]
    counter.stop()
    assert counter.get_flops() == [0, 0]
    a @ b  # not counting after stop
    assert counter.get_flops() == [0, 0]


def test_save_async_writes_what_torch_save_would(tmp_path):
    model = torch.nn.Linear(4, 3).npu()
    state = {"model": model.state_dict(), "step": 7}
    expected = {k: v.cpu().clone() for k, v in model.state_dict().items()}
    torch_npu.utils.save_async(state, tmp_path / "a.pt", model=model)
    with torch.no_grad():
        model.weight.add_(1.0)  # after the call: not in the checkpoint
    torch_npu.utils.save_async({"again": torch.ones(2, device="npu")}, tmp_path / "b.pt")  # waits for a.pt
    loaded = torch.load(tmp_path / "a.pt")
    assert loaded["step"] == 7
    for k, v in expected.items():
        assert torch.equal(loaded["model"][k], v)
    torch_npu.utils.serialization._wait()
    assert torch.equal(torch.load(tmp_path / "b.pt")["again"], torch.ones(2))


def test_save_async_reports_a_failed_write(tmp_path):
    torch_npu.utils.save_async({"x": torch.ones(1)}, tmp_path / "missing" / "dir" / "x.pt")
    with pytest.raises(RuntimeError, match="writing the previous checkpoint failed"):
        torch_npu.utils.serialization._wait()


def test_get_cann_version_is_the_npu_one():
    assert torch_npu.utils.get_cann_version() == torch_npu.npu.utils.get_cann_version()
