"""torch.npu.memory._record_memory_history / _snapshot / _dump_snapshot: the allocator's state and
history with stack traces, read back by PyTorch's own memory visualiser (torch.cuda._memory_viz)."""

import gc
import os
import pickle
import subprocess
import sys

import pytest
import torch
from torch.cuda import _memory_viz

MiB = 2**20


@pytest.fixture
def recording():
    gc.collect()
    torch.npu.synchronize()
    torch.npu.memory._record_memory_history(max_entries=100000, clear_history=True)
    yield
    torch.npu.memory._record_memory_history(enabled=None)


def allocate_activations():
    return [torch.randn(256, 1024, device="npu") for _ in range(3)]


def _frames_mention(frames, name):
    return any(f["name"] == name and f["filename"].endswith("test_memory_snapshot.py") for f in frames)


def test_snapshot_blocks_carry_the_allocating_python_stack(recording):
    tensors = allocate_activations()
    snap = torch.npu.memory._snapshot()
    blocks = [b for seg in snap["segments"] for b in seg["blocks"]]
    ours = [b for b in blocks if b["state"] == "active_allocated" and _frames_mention(b["frames"], "allocate_activations")]
    assert len(ours) == 3
    addresses = {t.data_ptr() for t in tensors}
    assert {b["address"] for b in ours} == addresses
    assert all(b["requested_size"] == 256 * 1024 * 4 for b in ours)
    # Segment sizes add up, as the visualiser's consistency checks require.
    for seg in snap["segments"]:
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
        assert seg["allocated_size"] == sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated")
        assert seg["segment_type"] in ("small", "large") and 0 <= seg["device"] < torch.npu.device_count()
    del tensors


def test_trace_records_alloc_and_free_in_order(recording):
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="npu")
    addr = x.data_ptr()
    del x
    torch.npu.synchronize()
    trace = torch.npu.memory._snapshot()["device_traces"][0]
    ours = [e for e in trace if e.get("addr") == addr and e["action"] in ("alloc", "free_requested", "free_completed")]
    assert [e["action"] for e in ours][-3:] == ["alloc", "free_requested", "free_completed"]
    alloc = [e for e in ours if e["action"] == "alloc"][-1]
    assert alloc["size"] == 3 * MiB and _frames_mention(alloc["frames"], "test_trace_records_alloc_and_free_in_order")
    assert all(isinstance(e["time_us"], int) for e in trace)
    assert trace[-1]["action"] == "snapshot"


def test_max_entries_keeps_the_latest_events():
    torch.npu.memory._record_memory_history(max_entries=4, clear_history=True)
    try:
        sizes = [MiB + 512 * i for i in range(1, 6)]
        for n in sizes:
            del_me = torch.empty(n, dtype=torch.uint8, device="npu")
            del del_me
        trace = torch.npu.memory._snapshot()["device_traces"][0]
        assert len(trace) == 4
        assert [e["size"] for e in trace if e["action"] == "alloc"] == [sizes[-1]]
    finally:
        torch.npu.memory._record_memory_history(enabled=None)


def test_recording_off_and_state_only():
    torch.npu.memory._record_memory_history(enabled=None)
    x = torch.empty(1000, device="npu")
    snap = torch.npu.memory._snapshot()
    assert all(not t for t in snap["device_traces"])
    block = next(b for s in snap["segments"] for b in s["blocks"] if b["address"] == x.data_ptr())
    assert block["frames"] == []
    torch.npu.memory._record_memory_history("state")  # stacks of live blocks, no event history
    try:
        y = torch.empty(1000, device="npu")
        snap = torch.npu.memory._snapshot()
        assert all(not t for t in snap["device_traces"])
        block = next(b for s in snap["segments"] for b in s["blocks"] if b["address"] == y.data_ptr())
        assert _frames_mention(block["frames"], "test_recording_off_and_state_only")
    finally:
        torch.npu.memory._record_memory_history(enabled=None)
    del x, y


def test_invalid_arguments():
    with pytest.raises(ValueError, match="expected enabled"):
        torch.npu.memory._record_memory_history("sometimes")
    with pytest.raises(ValueError, match="expected stacks"):
        torch.npu.memory._record_memory_history(stacks="cpp")


def test_memory_viz_reads_a_dumped_snapshot(recording, tmp_path):
    torch.npu.empty_cache()  # the model's segments are then allocated while recording
    # Blocks that earlier code keeps alive leave partly used segments the cache cannot release; a
    # buffer larger than any of them needs a segment of its own, allocated while recording.
    staging = torch.empty(64 * MiB, dtype=torch.uint8, device="npu")
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        loss = model(torch.randn(64, 256, device="npu")).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
    del staging
    path = str(tmp_path / "snapshot.pickle")
    torch.npu.memory._dump_snapshot(path)
    with open(path, "rb") as f:
        data = pickle.load(f)
    assert data["device_traces"][0] and data["segments"]
    # The visualiser's text reports and HTML plots, through its command line.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cli = [sys.executable, "-m", "torch.cuda._memory_viz"]
    stats = subprocess.run(cli + ["stats", path], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert stats.returncode == 0, stats.stderr
    assert "total_reserved" in stats.stdout and "segments:" in stats.stdout
    trace = subprocess.run(cli + ["trace", path], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert trace.returncode == 0, trace.stderr
    assert "cudaMalloc" in trace.stdout and "TOTAL MEM" in trace.stdout  # segment events, named as on CUDA
    for plot in ("trace_plot", "segment_plot"):
        out = tmp_path / f"{plot}.html"
        proc = subprocess.run(cli + [plot, path, "-o", str(out)], capture_output=True, text=True, env=env,
                              cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert out.stat().st_size > 1000
    # The flamegraph views need a downloaded script: check their input text instead.
    folded = _memory_viz.segments(data, format_flamegraph=lambda text: text)
    assert "test_memory_viz_reads_a_dumped_snapshot" in folded or "linear" in folded.lower()
    assert _memory_viz.memory(data, format_flamegraph=lambda text: text)
    del model, opt, loss
