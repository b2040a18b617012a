"""The end-to-end (E2E / "CANN") profile folder, PROF_*/, as torch.npu.profile writes it: a timeline already
exported for chrome://tracing (timeline/msprof.json) with the layers seed-era tools show, top to bottom:

    MsprofTx        PyTorch framework: the ops (use_e2e_profiler=True only)
    AscendCL        the runtime API call of each launch (ACL_PROF_ACL_API)
    Task Scheduler  device work per stream: named device ops, kernels, copies, events (ACL_PROF_TASK_TIME)
    AI CPU          host tasks: ops run by the generic executor (ACL_PROF_AICPU)
    HCCL            collectives (ACL_PROF_HCCL_TRACE)
    Step Trace      iterations marked with iteration_start / iteration_end (ACL_PROF_TRAINING_TRACE)

and summary/op_summary.csv and summary/api_statistic.csv."""

from __future__ import annotations

import json
import os

from . import _tables
from ._model import COLLECTIVE, HOST_TASK, KIND_NAMES, Run, us
from ._trace_view import api_name, base_ns

LAYERS = ["MsprofTx", "AscendCL", "Task Scheduler", "AI CPU", "HCCL", "Step Trace"]
OP_SUMMARY_HEADERS = ["Device_id", "Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)",
                      "Task Wait Time(us)", "Block Num"]


def timeline(run: Run, switches: dict) -> dict:
    base = base_ns(run)

    def ts(ns):
        return round((ns - base) / 1000.0, 3)

    events = []
    for i, layer in enumerate(LAYERS):
        events.append({"ph": "M", "name": "process_name", "pid": i, "tid": 0, "args": {"name": layer}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": i, "tid": 0, "args": {"sort_index": i}})

    def thread(pid, tid, name):
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})

    if switches.get("framework"):
        for tid in sorted({o.tid for o in run.ops}):
            thread(0, tid, f"Thread {tid}")
        for o in run.ops:
            if not o.python:
                events.append({"ph": "X", "name": o.name, "pid": 0, "tid": o.tid, "ts": ts(o.start),
                               "dur": round(o.dur / 1000, 3), "args": {"Correlation Id": o.id}})
    if switches.get("ACL_PROF_ACL_API"):
        for tid in sorted({t.launch_tid for t in run.tasks}):
            thread(1, tid, f"Thread {tid}")
        for t in run.tasks:
            events.append({"ph": "X", "name": api_name(t), "pid": 1, "tid": t.launch_tid, "ts": ts(t.api_start),
                           "dur": round(max(t.enqueue - t.api_start, 0) / 1000, 3), "args": {"Task": t.name}})
    layer_of = {HOST_TASK: (3, "ACL_PROF_AICPU"), COLLECTIVE: (4, "ACL_PROF_HCCL_TRACE")}
    named = set()
    for t in run.tasks:
        pid, switch = layer_of.get(t.kind, (2, "ACL_PROF_TASK_TIME"))
        if not switches.get(switch):
            continue
        tid = t.device * 100000 + t.stream
        if (pid, tid) not in named:
            named.add((pid, tid))
            thread(pid, tid, f"npu:{t.device} Stream {t.stream}" if t.stream else f"npu:{t.device} synchronous")
        events.append({"ph": "X", "name": t.name, "pid": pid, "tid": tid, "ts": ts(t.start),
                       "dur": round(t.dur / 1000, 3),
                       "args": {"Task Type": KIND_NAMES[t.kind], "Stream Id": t.stream, "Task Id": t.sequence}})
    if switches.get("ACL_PROF_TRAINING_TRACE"):
        thread(5, 0, "Iterations")
        for i, (start, end) in enumerate(run.iterations, 1):
            events.append({"ph": "X", "name": f"Iteration {i}", "pid": 5, "tid": 0, "ts": ts(start),
                           "dur": round((end - start) / 1000, 3)})
    return {"traceEvents": events, "displayTimeUnit": "ms", "baseTimeNanoseconds": base}


def write_prof_dir(run: Run, prof_dir: str, switches: dict) -> None:
    os.makedirs(os.path.join(prof_dir, "timeline"), exist_ok=True)
    os.makedirs(os.path.join(prof_dir, "summary"), exist_ok=True)
    with open(os.path.join(prof_dir, "timeline", "msprof.json"), "w") as f:
        json.dump(timeline(run, switches), f, separators=(",", ":"))
    if switches.get("ACL_PROF_TASK_TIME") or switches.get("ACL_PROF_AICPU"):
        headers, kernel_rows = _tables.kernel_rows(run, "Level0")
        offset = 1 if headers[0] == "Step Id" else 0
        rows = [[r[offset], r[offset + 1], r[offset + 2], r[offset + 3], r[offset + 4], r[offset + 5],
                 r[offset + 6], r[offset + 7]] for r in kernel_rows]
        _tables.write_csv(os.path.join(prof_dir, "summary", "op_summary.csv"), OP_SUMMARY_HEADERS, rows)
    if switches.get("ACL_PROF_ACL_API"):
        headers, rows = _tables.api_statistic_rows(run)
        _tables.write_csv(os.path.join(prof_dir, "summary", "api_statistic.csv"), headers, rows)
    with open(os.path.join(prof_dir, "sample.json"), "w") as f:
        json.dump({"switches": switches, "devices": run.devices, "tasks": len(run.tasks),
                   "start(us)": us(run.start_ns), "iterations": len(run.iterations),
                   "note": "AI Core metrics and L2 cache come from NPU hardware counters: not collected on the "
                           "software NPU"}, f, indent=1)
