"""torch_npu's CSV views of a run: kernel_details, operator_details, op_statistic, api_statistic and
step_trace_time (column names as torch_npu writes them; times in microseconds)."""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict

from . import _intervals
from ._model import COLLECTIVE, COMPUTE_KINDS, DEVICE_OP, EVENT_RECORD, KERNEL, Run, dur_us, us
from ._trace_view import api_name

KERNEL_HEADERS = ["Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
                  "Wait Time(us)", "Block Num", "Input Shapes", "Input Data Types", "Input Formats",
                  "Output Shapes", "Output Data Types", "Output Formats"]
OPERATOR_HEADERS = ["Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
                    "Device Self Duration(us)", "Device Total Duration(us)",
                    "Device Self Duration With AICore(us)", "Device Total Duration With AICore(us)"]
OP_STATISTIC_HEADERS = ["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                        "Max Time(us)", "Ratio(%)"]
API_STATISTIC_HEADERS = ["Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance"]
STEP_TRACE_HEADERS = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
                      "Communication", "Free", "Stage", "Bubble",
                      "Communication(Not Overlapped and Exclude Receive)", "Preparing"]

_DTYPES = {"float": "FLOAT", "double": "DOUBLE", "c10::Half": "FLOAT16", "c10::BFloat16": "BF16",
           "long int": "INT64", "int": "INT32", "short int": "INT16", "signed char": "INT8",
           "unsigned char": "UINT8", "bool": "BOOL", "Scalar": "SCALAR", "c10::complex<float>": "COMPLEX64",
           "c10::complex<double>": "COMPLEX128"}


def write_csv(path: str, headers: list[str], rows) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(headers)
        w.writerows(rows)


def _shapes(shapes) -> str:
    return ";".join(",".join(str(d) for d in s) for s in shapes) if shapes else ""


def _dtypes(dtypes) -> str:
    return ";".join(_DTYPES.get(d, d.upper()) for d in dtypes) if dtypes else ""


def _formats(shapes, dtypes) -> str:
    n = max(len(shapes or []), len(dtypes or []))
    return ";".join("ND" if (dtypes and i < len(dtypes) and dtypes[i] not in ("Scalar", "")) else ""
                    for i in range(n))


def kernel_rows(run: Run, level: str):
    """One row per device task (event records are instants and left out)."""
    tasks = [t for t in run.tasks if t.kind != EVENT_RECORD]
    prev_end: dict[tuple[int, int], int] = {}
    rows = []
    for t in sorted(tasks, key=lambda t: (t.start, t.sequence)):
        key = (t.device, t.stream)
        wait = max(t.start - prev_end[key], 0) if key in prev_end and t.stream else 0
        prev_end[key] = max(prev_end.get(key, 0), t.end)
        op = t.op
        shapes, dtypes = (op.shapes, op.dtypes) if op is not None else ([], [])
        block = t.block_dim if t.kind == KERNEL else (1 if t.kind == DEVICE_OP else 0)
        row = [t.device, t.name, t.type, t.core, us(t.start), dur_us(t.dur), dur_us(wait), block,
               _shapes(shapes) or "N/A", _dtypes(dtypes) or "N/A", _formats(shapes, dtypes) or "N/A",
               "N/A", "N/A", "N/A"]
        if run.steps:
            row.insert(0, t.step if t.step is not None else "")
        rows.append(row)
    headers = (["Step Id"] if run.steps else []) + KERNEL_HEADERS
    return headers, rows


def operator_rows(run: Run):
    """One row per host op (not steps, record_function ranges or Python frames), with its own device time
    and that of the ops it called."""
    rows = []
    for op in sorted(run.ops, key=lambda o: o.start):
        if op.user_annotation or op.python:
            continue
        own = op.tasks
        everything = list(op.all_tasks())
        ai_core = (DEVICE_OP, KERNEL)
        rows.append([op.name, str(op.shapes) if op.shapes else "", "; ".join(op.stack),
                     dur_us(op.self_host_ns()), dur_us(op.dur),
                     dur_us(sum(t.dur for t in own)), dur_us(sum(t.dur for t in everything)),
                     dur_us(sum(t.dur for t in own if t.kind in ai_core)),
                     dur_us(sum(t.dur for t in everything if t.kind in ai_core))])
    return OPERATOR_HEADERS, rows


def op_statistic_rows(run: Run):
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for t in run.tasks:
        if t.kind != EVENT_RECORD:
            groups[(t.type, t.core)].append(t.dur)
    grand = sum(sum(v) for v in groups.values()) or 1
    rows = [[typ, core, len(d), dur_us(sum(d)), dur_us(min(d)), dur_us(sum(d) / len(d)), dur_us(max(d)),
             round(100.0 * sum(d) / grand, 2)] for (typ, core), d in groups.items()]
    rows.sort(key=lambda r: -r[3])
    return OP_STATISTIC_HEADERS, rows


def api_statistic_rows(run: Run):
    """The host time of each runtime launch call (Level1 and above)."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for t in run.tasks:
        name = api_name(t)
        groups[("acl" if t.kind == DEVICE_OP else "runtime", name)].append(max(t.enqueue - t.api_start, 0))
    rows = []
    for (level, name), d in groups.items():
        var = statistics.pvariance([x / 1000.0 for x in d]) if len(d) > 1 else 0.0
        rows.append([level, name, dur_us(sum(d)), len(d), dur_us(sum(d) / len(d)), dur_us(min(d)),
                     dur_us(max(d)), round(var, 3)])
    rows.sort(key=lambda r: -r[2])
    return API_STATISTIC_HEADERS, rows


def step_trace_rows(run: Run):
    """Per device and step: device busy time split into computing and communication, idle time, and the
    time from the step's start to its first device task."""
    rows = []
    windows = [(s.id, s.start, s.end) for s in run.steps] or [(None, None, None)]
    for device in run.devices:
        for step, s_start, s_end in windows:
            tasks = [t for t in run.tasks if t.device == device and (step is None or t.step == step)]
            compute = [(t.start, t.end) for t in tasks if t.kind in COMPUTE_KINDS]
            comm = [(t.start, t.end) for t in tasks if t.kind == COLLECTIVE]
            busy = compute + comm
            if not busy and step is None:
                continue
            first = min((s for s, _ in busy), default=s_start or 0)
            start = s_start if s_start is not None else first
            end = max([s_end or 0] + [e for _, e in busy])
            computing = _intervals.total(compute)
            communication = _intervals.total(comm)
            not_overlapped = _intervals.total(_intervals.subtract(comm, compute))
            recv = _intervals.total([(t.start, t.end) for t in tasks
                                     if t.kind == COLLECTIVE and "recv" in t.name.lower()])
            free = max(end - start - _intervals.total(busy), 0)
            rows.append([device, "" if step is None else step, dur_us(computing), dur_us(not_overlapped),
                         dur_us(communication - not_overlapped), dur_us(communication), dur_us(free),
                         dur_us(end - start - recv), dur_us(recv), dur_us(not_overlapped - recv),
                         dur_us(max(first - start, 0))])
    return STEP_TRACE_HEADERS, rows
