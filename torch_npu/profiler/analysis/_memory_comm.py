"""Memory and communication views: operator_memory.csv, memory_record.csv (npu allocations made through the
caching allocator, "PTA") and communication.json (collectives per step)."""

from __future__ import annotations

import json
from collections import defaultdict

from ._model import COLLECTIVE, Run, dur_us, us

OPERATOR_MEMORY_HEADERS = ["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)",
                           "Active Release Time(us)", "Duration(us)", "Active Duration(us)",
                           "Allocation Total Allocated(MB)", "Allocation Total Reserved(MB)",
                           "Allocation Total Active(MB)", "Release Total Allocated(MB)",
                           "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr",
                           "Device Type"]
MEMORY_RECORD_HEADERS = ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                         "Total Active(MB)", "Stream Ptr", "Device Type"]


def _mb(b: int) -> float:
    return round(b / 2**20, 4)


def _npu_events(run: Run):
    return sorted((m for m in run.memory if m.device_type == "npu"), key=lambda m: m.ts)


def operator_memory_rows(run: Run):
    """One row per npu allocation, paired with its release (blank when it outlived the profiling window).
    Allocated memory is active memory for this allocator, so the Active columns repeat it."""
    rows, open_allocs = [], {}
    for m in _npu_events(run):
        if m.bytes > 0:
            row = [m.op or "[unknown]", round(m.bytes / 1024, 3), us(m.ts), "", "", "", "",
                   _mb(m.total_allocated), _mb(m.total_reserved), _mb(m.total_allocated), "", "", "", "",
                   f"NPU:{m.device}"]
            open_allocs[(m.device, m.ptr)] = (m, row)
            rows.append(row)
        else:
            found = open_allocs.pop((m.device, m.ptr), None)
            if found is None:
                continue  # allocated before the window
            alloc, row = found
            row[3] = row[4] = us(m.ts)
            row[5] = row[6] = dur_us(m.ts - alloc.ts)
            row[10], row[11], row[12] = _mb(m.total_allocated), _mb(m.total_reserved), _mb(m.total_allocated)
    return OPERATOR_MEMORY_HEADERS, rows


def memory_record_rows(run: Run):
    rows = [["PTA", us(m.ts), _mb(m.total_allocated), _mb(m.total_reserved), _mb(m.total_allocated), "",
             f"NPU:{m.device}"] for m in _npu_events(run)]
    return MEMORY_RECORD_HEADERS, rows


def communication(run: Run) -> dict:
    """Collectives and point-to-point transfers, per step ("step" when the run had no steps)."""
    out: dict = defaultdict(lambda: {"collective": {}, "p2p": {}})
    for t in run.tasks:
        if t.kind != COLLECTIVE:
            continue
        step = f"step{t.step}" if t.step is not None else "step"
        group = "p2p" if any(k in t.name.lower() for k in ("send", "recv")) else "collective"
        elapse_ms = t.dur / 1e6
        bandwidth = (t.bytes / 1e9) / (t.dur / 1e9) if t.dur > 0 else 0.0
        out[step][group][f"{t.name}@{t.sequence}"] = {
            "Communication Time Info": {
                "Start Timestamp(us)": float(us(t.start)), "Elapse Time(ms)": round(elapse_ms, 6),
                "Transit Time(ms)": round(elapse_ms, 6), "Wait Time(ms)": 0.0, "Synchronization Time(ms)": 0.0,
                "Idle Time(ms)": 0.0, "Wait Time Ratio": 0.0, "Synchronization Time Ratio": 0.0},
            "Communication Bandwidth Info": {
                "SDMA": {"Transit Size(MB)": round(t.bytes / 2**20, 6), "Transit Time(ms)": round(elapse_ms, 6),
                         "Bandwidth(GB/s)": round(bandwidth, 4), "Large Packet Ratio": 0.0,
                         "Size Distribution": {}}},
            "Device": t.device, "Stream": t.stream}
    return dict(out)


def write_communication(run: Run, path: str) -> bool:
    data = communication(run)
    if not data:
        return False
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    return True
