"""The analysis that turns raw profiling data into torch_npu's files, on a hand-made run whose answers are
known: steps with compute and a collective that overlap, a copy, an event, memory events and a
multi-stream device. Covers communication.json and the overlap arithmetic, which a single-process test run
does not exercise with real collectives."""

import csv
import json
import os

import pytest

from torch_npu.profiler import analysis
from torch_npu.profiler.analysis._model import Run
from trace_format import load, validate

T0 = 1_795_000_000_000_000_000  # ns
US = 1000


def _op(id_, name, start, end, **kw):
    return dict(id=id_, name=name, start=T0 + start * US, end=T0 + end * US, tid=7, **kw)


def _task(kind, stream, corr, seq, enqueue, start, end, name, nbytes=0, memcpy_kind=0):
    t = lambda us: T0 + us * US  # noqa: E731
    return [kind, 0, stream, corr, seq, t(enqueue) - 500, t(enqueue), t(start), t(end), nbytes, memcpy_kind, 0,
            False, 77, name]


@pytest.fixture
def run_dir(tmp_path):
    host = {"pid": 1234, "threads": {"77": "MainThread"}, "ops": [
        _op(0, "ProfilerStep#3", 0, 100, user_annotation=True),
        _op(5, "aten::mm", 1, 20, shapes=[[2, 3], [3, 4]], dtypes=["float", "float"]),
        _op(6, "aten::add", 21, 30, shapes=[[2, 4], [2, 4], []], dtypes=["float", "float", "Scalar"]),
        _op(7, "aten::empty", 22, 23),
        _op(0, "ProfilerStep#4", 100, 200, user_annotation=True),
        _op(9, "c10d::allreduce_", 101, 120),
    ], "memory": [
        {"ts": T0 + 1500, "ptr": 100, "bytes": 4096, "total_allocated": 4096, "total_reserved": 2 << 20,
         "device_type": "npu", "device": 0, "op": "aten::mm"},
        {"ts": T0 + 50 * US, "ptr": 100, "bytes": -4096, "total_allocated": 0, "total_reserved": 2 << 20,
         "device_type": "npu", "device": 0, "op": ""}]}
    device = {"warning": "", "records": [
        _task(1, 3, 5, 0, 3, 4, 9, "aclnnMatmul"),
        _task(0, 3, 6, 1, 25, 26, 40, "aten::add.Tensor"),
        _task(3, 3, 0, 2, 41, 42, 43, "memcpy", 4096, 2),
        _task(5, 3, 0, 3, 44, 45, 45, "event record"),
        _task(7, 9, 9, 4, 103, 104, 150, "allreduce", 1 << 20),
        _task(1, 3, 9, 5, 106, 130, 140, "aclnnAdd"),
    ]}
    os.makedirs(tmp_path / "FRAMEWORK")
    (tmp_path / "FRAMEWORK" / "host_events.json").write_text(json.dumps(host))
    (tmp_path / "FRAMEWORK" / "device_activities.json").write_text(json.dumps(device))
    (tmp_path / "profiler_info.json").write_text(json.dumps({"config": {"experimental_config": {
        "profiler_level": "Level1", "export_type": "text"}}}))
    return tmp_path


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_step_trace_overlap_and_free_time(run_dir):
    out = analysis.export(str(run_dir))
    steps = {r["Step"]: r for r in _rows(os.path.join(out, "step_trace_time.csv"))}
    s3, s4 = steps["3"], steps["4"]
    assert float(s3["Computing"]) == 19.0  # 5 + 14 us of compute, the copy is not compute
    assert float(s3["Communication"]) == 0.0 and float(s3["Free"]) == 81.0
    assert float(s3["Preparing"]) == 4.0  # step start to the first task
    # step 4: a 46 us allreduce with a 10 us add inside it
    assert float(s4["Communication"]) == 46.0 and float(s4["Computing"]) == 10.0
    assert float(s4["Overlapped"]) == 10.0 and float(s4["Communication(Not Overlapped)"]) == 36.0
    assert float(s4["Free"]) == 100.0 - 46.0


def test_kernel_details_wait_times_and_launch_shapes(run_dir):
    out = analysis.export(str(run_dir))
    rows = _rows(os.path.join(out, "kernel_details.csv"))
    assert [r["Name"] for r in rows] == ["aclnnMatmul", "aten::add.Tensor", "memcpy", "allreduce", "aclnnAdd"]
    mm, add, copy, allreduce, add2 = rows
    assert (mm["Type"], mm["Accelerator Core"], mm["Step Id"]) == ("Matmul", "AI_CORE", "3")
    assert (add["Type"], add["Accelerator Core"]) == ("add", "AI_CPU")
    assert (copy["Type"], copy["Accelerator Core"]) == ("MEMCPY_ASYNC", "DMA")
    assert (allreduce["Accelerator Core"], allreduce["Step Id"]) == ("HCCL", "4")
    assert float(add["Wait Time(us)"]) == 17.0  # stream 3 idle from 9 to 26 us
    assert mm["Input Shapes"] == "2,3;3,4" and mm["Input Data Types"] == "FLOAT;FLOAT"
    assert add["Input Data Types"] == "FLOAT;FLOAT;SCALAR" and add["Input Formats"] == "ND;ND;"
    assert mm["Start Time(us)"] == "1795000000000004.000"


def test_communication_json(run_dir):
    out = analysis.export(str(run_dir))
    with open(os.path.join(out, "communication.json")) as f:
        comm = json.load(f)
    (op,) = comm["step4"]["collective"].values()
    assert op["Communication Time Info"]["Elapse Time(ms)"] == pytest.approx(0.046)
    sdma = op["Communication Bandwidth Info"]["SDMA"]
    assert sdma["Transit Size(MB)"] == 1.0
    assert sdma["Bandwidth(GB/s)"] == pytest.approx((1 << 20) / 1e9 / 46e-6, rel=1e-3)


def test_operator_details_and_memory(run_dir):
    out = analysis.export(str(run_dir))
    ops = {r["Name"]: r for r in _rows(os.path.join(out, "operator_details.csv"))}
    assert float(ops["aten::add"]["Host Self Duration(us)"]) == 8.0  # 9 us minus the 1 us empty inside
    assert float(ops["aten::add"]["Device Self Duration(us)"]) == 14.0
    assert float(ops["aten::mm"]["Device Self Duration With AICore(us)"]) == 5.0
    (alloc,) = _rows(os.path.join(out, "operator_memory.csv"))
    assert alloc["Name"] == "aten::mm" and float(alloc["Size(KB)"]) == 4.0
    assert float(alloc["Duration(us)"]) == 48.5 and alloc["Device Type"] == "NPU:0"
    assert float(alloc["Release Total Allocated(MB)"]) == 0.0
    records = _rows(os.path.join(out, "memory_record.csv"))
    assert [r["Component"] for r in records] == ["PTA", "PTA"]


def test_trace_view_rows_flows_and_numeric_timestamps(run_dir):
    out = analysis.export(str(run_dir))
    trace = load(os.path.join(out, "trace_view.json"))
    events = validate(trace)
    run = Run.load(str(run_dir))
    assert trace["baseTimeNanoseconds"] % (86_400 * 10**9) == 0 and trace["baseTimeNanoseconds"] <= run.start_ns
    flows = [e for e in events if e["ph"] == "s"]
    assert len(flows) == 4  # the four tasks launched inside ops (the copy and the event were not)
    threads = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"MainThread", "Stream 3", "Stream 9", "Computing", "Free"} <= threads
    api = [e for e in events if e.get("cat") == "api"]
    assert {e["name"] for e in api} >= {"aclnnMatmul", "nrtLaunchHostFunc", "nrtMemcpyAsync"}


def test_db_export_and_bad_paths(run_dir, tmp_path_factory):
    import sqlite3

    out = analysis.export(str(run_dir), export_type="db")
    with sqlite3.connect(os.path.join(out, "ascend_pytorch_profiler.db")) as db:
        (n,) = db.execute('SELECT COUNT(*) FROM "kernel_details"').fetchone()
    assert n == 5
    empty = tmp_path_factory.mktemp("empty")
    with pytest.raises(FileNotFoundError, match="not a torch_npu profiling run"):
        analysis.export(str(empty))


def test_render_draws_the_trace(run_dir, tmp_path_factory):
    from torch_npu.profiler.render import render

    out = analysis.export(str(run_dir))
    png = str(tmp_path_factory.mktemp("png") / "trace.png")
    assert render(os.path.join(out, "trace_view.json"), png, step=4) == png
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no ProfilerStep#9"):
        render(os.path.join(out, "trace_view.json"), png, step=9)
