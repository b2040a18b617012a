"""trace_view.json: the run as a Chrome / Perfetto trace (the JSON trace-event format).

Rows: host threads with their ops and step markers; at Level1 and above a CANN row per launching thread
with the runtime API call of each launch; per device, one row per stream with its tasks ("Ascend Hardware"),
the overlap analysis (Computing / Communication / Free) and memory counters. Flow arrows join each launch
to its device task. Timestamps are numbers (microseconds since `baseTimeNanoseconds`, a UTC midnight kept
at the top level), so that both chrome://tracing and Perfetto load the file and nanoseconds survive."""

from __future__ import annotations

import json

from . import _intervals
from ._model import (COLLECTIVE, COMPUTE_KINDS, DEVICE_OP, EVENT_RECORD, EVENT_WAIT, HOST_TASK, KERNEL,
                     KIND_NAMES, MEMCPY, MEMCPY_KINDS, MEMSET, Run)

DAY_NS = 86_400 * 1_000_000_000
CANN_PID = 2_000_000_000
HARDWARE_PID = 2_000_000_100  # + device
OVERLAP_PID = 2_000_000_200  # + device
FLOW_CAT = "async_npu"

API_NAMES = {HOST_TASK: "nrtLaunchHostFunc", KERNEL: "nrtLaunchKernel", MEMSET: "nrtMemsetAsync",
             EVENT_RECORD: "nrtEventRecord", EVENT_WAIT: "nrtStreamWaitEvent", COLLECTIVE: "nrtLaunchHostFunc"}


def api_name(task) -> str:
    """The runtime call that launched a task (what the CANN / AscendCL layer shows)."""
    if task.kind == DEVICE_OP:
        return task.name
    if task.kind == MEMCPY:
        return "nrtMemcpyAsync" if task.stream else "nrtMemcpy"
    return API_NAMES.get(task.kind, "nrtLaunchHostFunc")


def base_ns(run: Run) -> int:
    return (run.start_ns // DAY_NS) * DAY_NS


def build(run: Run, level: str = "Level0") -> dict:
    base = base_ns(run)

    def ts(ns: int) -> float:
        return round((ns - base) / 1000.0, 3)

    events: list[dict] = []

    def meta(pid, name, sort, tid=None, thread=None):
        if tid is None:
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}})
        else:
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": sort}})

    # Host: ops, user annotations (steps, record_function) and Python frames, one row per thread.
    pid = run.pid
    if run.ops:
        meta(pid, "Python", 0)
        events.append({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": "CPU"}})
        for i, tid in enumerate(sorted({o.tid for o in run.ops})):
            meta(pid, None, i, tid, run.thread_name(tid))
    for op in run.ops:
        args = {"Correlation Id": op.id}
        if op.shapes:
            args["Input Dims"] = op.shapes
        if op.dtypes:
            args["Input type"] = op.dtypes
        if op.stack:
            args["Call stack"] = ";\r\n".join(op.stack)
        cat = "user_annotation" if op.user_annotation else ("python_function" if op.python else "cpu_op")
        events.append({"ph": "X", "cat": cat, "name": op.name, "pid": pid, "tid": op.tid, "ts": ts(op.start),
                       "dur": round(op.dur / 1000.0, 3), "args": args})

    # CANN layer (Level1+): the launching API call of every device task.
    if level in ("Level1", "Level2") and run.tasks:
        meta(CANN_PID, "CANN", 1)
        for i, tid in enumerate(sorted({t.launch_tid for t in run.tasks})):
            meta(CANN_PID, None, i, tid, run.thread_names.get(tid) or f"Thread {tid}")
        for t in run.tasks:
            events.append({"ph": "X", "cat": "api", "name": api_name(t), "pid": CANN_PID, "tid": t.launch_tid,
                           "ts": ts(t.api_start), "dur": round(max(t.enqueue - t.api_start, 0) / 1000.0, 3),
                           "args": {"Task": t.name, "Sequence": t.sequence}})

    # Device: one row per stream, flows from each launch, overlap analysis, memory counters.
    for device in run.devices:
        hw, ov = HARDWARE_PID + device, OVERLAP_PID + device
        meta(hw, f"Ascend Hardware (npu:{device})", 2 + 2 * device)
        tasks = [t for t in run.tasks if t.device == device]
        for stream in sorted({t.stream for t in tasks}):
            meta(hw, None, stream, stream, f"Stream {stream}" if stream else "Synchronous copies")
        for t in tasks:
            args = {"Task Type": KIND_NAMES[t.kind], "Accelerator Core": t.core, "Stream Id": t.stream,
                    "Task Id": t.sequence, "Correlation Id": t.correlation}
            if t.op is not None:
                args["Launched by"] = t.op.name
            if t.kind in (MEMCPY, MEMSET):
                args["Bytes"] = t.bytes
            if t.kind == MEMCPY:
                args["Direction"] = MEMCPY_KINDS.get(t.memcpy_kind, "")
            if t.kind == KERNEL:
                args["Block Num"] = t.block_dim
            if t.failed:
                args["Failed"] = True
            if t.kind == EVENT_RECORD:
                events.append({"ph": "i", "s": "t", "cat": "npu_event", "name": t.name, "pid": hw, "tid": t.stream,
                               "ts": ts(t.start), "args": args})
                continue
            events.append({"ph": "X", "cat": "npu_task", "name": t.name, "pid": hw, "tid": t.stream,
                           "ts": ts(t.start), "dur": round(t.dur / 1000.0, 3), "args": args})
            if t.op is not None:
                # The arrow starts inside the launching op (clamped: the two clocks agree to a few us).
                launch = min(max(t.enqueue, t.op.start), t.op.end)
                events.append({"ph": "s", "id": t.sequence + 1, "cat": FLOW_CAT, "name": FLOW_CAT, "pid": pid,
                               "tid": t.op.tid, "ts": ts(launch)})
                events.append({"ph": "f", "bp": "e", "id": t.sequence + 1, "cat": FLOW_CAT, "name": FLOW_CAT,
                               "pid": hw, "tid": t.stream, "ts": ts(max(t.start, launch))})
        for m in run.memory:
            if m.device_type == "npu" and m.device == device:
                events.append({"ph": "C", "name": "NPU MEM", "pid": hw, "tid": 0, "ts": ts(m.ts),
                               "args": {"PTA Allocated(MB)": round(m.total_allocated / 2**20, 4),
                                        "PTA Reserved(MB)": round(m.total_reserved / 2**20, 4)}})
        compute = [(t.start, t.end) for t in tasks if t.kind in COMPUTE_KINDS]
        comm = [(t.start, t.end) for t in tasks if t.kind == COLLECTIVE]
        if compute or comm:
            meta(ov, f"Overlap Analysis (npu:{device})", 3 + 2 * device)
            rows = {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)", 3: "Free"}
            for tid, name in rows.items():
                meta(ov, None, tid, tid, name)
            busy = _intervals.union(compute + comm)
            spans = {0: _intervals.union(compute), 1: _intervals.union(comm),
                     2: _intervals.subtract(comm, compute), 3: _intervals.gaps(busy)}
            for tid, intervals in spans.items():
                for s, e in intervals:
                    events.append({"ph": "X", "cat": "overlap", "name": rows[tid], "pid": ov, "tid": tid,
                                   "ts": ts(s), "dur": round((e - s) / 1000.0, 3)})
    trace = {"traceEvents": events, "displayTimeUnit": "ms", "baseTimeNanoseconds": base}
    if run.device_warning:
        trace["deviceWarning"] = run.device_warning
    return trace


def write(run: Run, path: str, level: str = "Level0") -> None:
    with open(path, "w") as f:
        json.dump(build(run, level), f, separators=(",", ":"))
