"""The stream-race checker (TORCH_NPU_SANITIZER / torch_npu.npu._sanitizer): unsynchronised accesses
from two npu streams are reported with both ops and stack traces; ordered code is never flagged.

Each scenario runs in a child process: the checker is a process-wide dispatch mode plus trace hooks.
"""

import json

import pytest

SCENARIOS = r'''
import json, sys, torch, torch_npu
from torch_npu.npu import _sanitizer

results = {}

def scenario(fn):
    _sanitizer.enable_npu_sanitizer()
    try:
        fn()
        results[fn.__name__] = None
    except _sanitizer.NPUSanitizerErrors as e:
        results[fn.__name__] = str(e)
    finally:
        _sanitizer.disable_npu_sanitizer()
        torch.npu.synchronize()
    return fn

side = torch.npu.Stream()

@scenario
def write_after_write_on_side_stream():
    a = torch.ones(1000, device="npu")
    with torch.npu.stream(side):
        torch.mul(a, 5, out=a)

@scenario
def read_after_write_on_side_stream():
    a = torch.ones(1000, device="npu")
    with torch.npu.stream(side):
        b = a * 2

@scenario
def write_after_read_on_default_stream():
    a = torch.ones(1000, device="npu")
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        b = a.sum()
    a.add_(1)  # the side stream's read of a is not ordered before this write

@scenario
def ordered_by_wait_stream():
    a = torch.ones(1000, device="npu")
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        torch.mul(a, 5, out=a)
    torch.npu.current_stream().wait_stream(side)
    b = a + 1

@scenario
def ordered_by_events():
    a = torch.ones(1000, device="npu")
    e = torch.npu.Event()
    e.record()
    with torch.npu.stream(side):
        side.wait_event(e)
        a.add_(1)
        done = side.record_event()
    torch.npu.current_stream().wait_event(done)
    a.mul_(3)

@scenario
def ordered_by_device_synchronize():
    a = torch.ones(1000, device="npu")
    torch.npu.synchronize()
    with torch.npu.stream(side):
        a.add_(1)
    torch.npu.synchronize()
    b = a * 2

@scenario
def ordered_by_stream_and_event_synchronize():
    a = torch.ones(1000, device="npu")
    torch.npu.current_stream().synchronize()
    with torch.npu.stream(side):
        a.add_(1)
        e = side.record_event()
    e.synchronize()
    b = a * 2

@scenario
def one_stream_only():
    a = torch.randn(64, 64, device="npu")
    for _ in range(3):
        a = torch.relu(a @ a.t()) / 64
    a.sum().item()

_sanitizer.disable_npu_sanitizer()
a = torch.ones(10, device="npu")
with torch.npu.stream(side):
    a.add_(1)  # disabled: nothing is checked
results["disabled_is_silent"] = None
print(json.dumps(results))
'''


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", SCENARIOS], cwd=tmp_path_factory.mktemp("san"),
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["write_after_write_on_side_stream", "read_after_write_on_side_stream",
                                  "write_after_read_on_default_stream"])
def test_race_is_reported(results, name):
    report = results[name]
    assert report is not None, f"{name}: the race was not reported"
    assert "unsynchronized access" in report
    assert "npu:0 default stream" in report and "npu:0 stream" in report.replace("default stream", "")
    # both ops, and the user's code in both stack traces and at the allocation
    assert report.count("op: aten::") == 2 * report.count("Possible data race")
    assert report.count(name) >= 2
    assert "Tensor allocated at:" in report


def test_race_report_names_both_ops(results):
    report = results["write_after_write_on_side_stream"]
    assert "aten::mul.out" in report
    assert "writing to argument(s) self, out and the output" in report
    assert "/torch/_ops.py" not in report  # PyTorch's dispatch frames are left out of the traces
    assert "aten::ones" in report or "aten::fill_" in report


@pytest.mark.parametrize("name", ["ordered_by_wait_stream", "ordered_by_events", "ordered_by_device_synchronize",
                                  "ordered_by_stream_and_event_synchronize", "one_stream_only",
                                  "disabled_is_silent"])
def test_synchronized_code_is_not_flagged(results, name):
    assert results[name] is None, results[name]


def test_environment_variable_enables_the_checker(run_python):
    # Ordered code runs and prints; the race after it ends the program with the report.
    proc = run_python(
        """
        import torch
        a = torch.ones(100, device="npu")
        s = torch.npu.Stream()
        s.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(s):
            a.add_(1)
        torch.npu.current_stream().wait_stream(s)
        print(a.sum().item(), flush=True)  # .item() synchronizes: everything so far is ordered
        a.mul_(2)
        with torch.npu.stream(s):
            a.add_(1)  # races with the mul_ on the default stream
        """,
        env={"TORCH_NPU_SANITIZER": "1"}, check=False)
    assert proc.stdout.strip() == "200.0", proc.stderr[-3000:]
    assert proc.returncode != 0
    assert "NPUSanitizerErrors" in proc.stderr and "Possible data race" in proc.stderr
