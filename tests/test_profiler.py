"""Profiling: PyTorch's profilers see npu device time, and torch_npu.profiler writes torch_npu's run
directories (trace_view.json and the CSV views) whose contents agree with each other and with the run:
device tasks linked to the ops that launched them, stream rows in order, schedule windows of exactly
`active` steps, two ranks side by side, and clear errors for bad arguments."""

import csv
import json
import os
import textwrap

import pytest
import torch
import torch.nn as nn

import torch_npu
from torch_npu.profiler import ProfilerActivity
from trace_format import load, validate

OUT_FILES = {"trace_view.json", "kernel_details.csv", "operator_details.csv", "op_statistic.csv",
             "step_trace_time.csv"}


def _read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def _train_step(model, opt, x, y):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def _model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).npu()
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def test_torch_profiler_reports_npu_time_per_op():
    a = torch.randn(64, 64, device="npu")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        b = torch.mm(a, a)
        c = (b + 1).relu()
        torch.npu.synchronize()
    torch.testing.assert_close(c.cpu(), (torch.mm(a.cpu(), a.cpu()) + 1).relu())
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=20)
    for column in ("Self NPU", "NPU total", "NPU time avg"):
        assert column in table
    ops = {e.key: e for e in prof.key_averages()}
    assert ops["aten::mm"].device_time_total > 0
    assert ops["aten::add"].device_time_total > 0
    # Device rows come with the ops' own events (Kineto's trace, device rows on the npu process).
    events = prof.events()
    device = [e for e in events if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert device and all(e.time_range.end >= e.time_range.start for e in device)


def test_autograd_profiler_use_device_npu_both_modes():
    a = torch.randn(64, 64, device="npu")
    for kineto in (False, True):
        with torch.autograd.profiler.profile(use_device="npu", use_kineto=kineto) as prof:
            torch.mm(a, a)
        mm = [e for e in prof.key_averages() if e.key == "aten::mm"][0]
        assert mm.device_time_total > 0, f"use_kineto={kineto}"


def test_transdata_launches_show_up_in_the_profilers(tmp_path):
    """Format conversions are device work users look for (and remove): each TransData is a device task of
    its own in torch.profiler's tables, in kernel_details.csv / op_statistic.csv and in torch.npu.op_stats."""
    x = torch.randn(2, 20, 4, 4, device="npu")
    before = torch.npu.op_stats().get("aclnnTransData", {}).get("device_op", 0)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        y = torch_npu.npu_format_cast(x, 3)  # NCHW -> NC1HWC0
        back = torch_npu.npu_format_cast(y, 0)  # and back to NCHW
        torch.npu.synchronize()
    assert torch_npu.get_npu_format(y) == 3
    torch.testing.assert_close(back.cpu(), x.cpu())
    assert torch.npu.op_stats()["aclnnTransData"]["device_op"] - before == 2
    device = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1
              and e.name == "aclnnTransData"]
    assert len(device) == 2 and all(e.time_range.end > e.time_range.start for e in device)
    cast = [e for e in prof.key_averages() if e.key == "npu::npu_format_cast"]
    assert cast and cast[0].device_time_total > 0, "the cast op owns its TransData's device time"
    # torch_npu's op tests look for it the same way (torch.profiler.profile with torch_npu.testing loaded).
    from torch_npu.testing.common_utils import check_operators_in_prof

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        torch_npu.npu_format_cast(x, 29)  # FRACTAL_NZ
    assert check_operators_in_prof(["aclnnTransData", "npu::npu_format_cast"], prof, ["aclnnAdd"])

    handler = torch_npu.profiler.tensorboard_trace_handler(str(tmp_path / "prof"))
    with torch_npu.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU],
                                    on_trace_ready=handler, record_shapes=True):
        torch_npu.npu_format_cast(x, 3)
    out = os.path.join(handler.run_dirs[0], "ASCEND_PROFILER_OUTPUT")
    header, kernels = _read_csv(os.path.join(out, "kernel_details.csv"))
    trans = [r for r in kernels if r[header.index("Name")] == "aclnnTransData"]
    assert len(trans) == 1 and trans[0][header.index("Type")] == "TransData"
    assert trans[0][header.index("Input Shapes")].split(";")[0] == "2,20,4,4", "the launching op's input shape"
    header, stats = _read_csv(os.path.join(out, "op_statistic.csv"))
    assert [r[2] for r in stats if r[0] == "TransData"] == ["1"]


@pytest.fixture
def run_dirs(tmp_path):
    """A profiled training loop: schedule(wait=1, warmup=1, active=2, repeat=2) with memory and shapes."""
    model, opt = _model()
    x, y = torch.randn(8, 16, device="npu"), torch.randn(8, 4, device="npu")
    handler = torch_npu.profiler.tensorboard_trace_handler(str(tmp_path / "prof"), worker_name="worker")
    exp = torch_npu.profiler._ExperimentalConfig(profiler_level=torch_npu.profiler.ProfilerLevel.Level1)
    with torch_npu.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU],
                                    schedule=torch_npu.profiler.schedule(wait=1, warmup=1, active=2, repeat=2),
                                    on_trace_ready=handler, record_shapes=True, profile_memory=True,
                                    experimental_config=exp) as prof:
        prof.add_metadata("model", "mlp")
        for _ in range(8):
            _train_step(model, opt, x, y)
            prof.step()
    return handler.run_dirs


def test_run_directories_and_files(run_dirs):
    assert len(run_dirs) == 2 and len(set(run_dirs)) == 2
    for run in run_dirs:
        name = os.path.basename(run)
        assert name.startswith(f"worker_{os.getpid()}_") and name.endswith("_ascend_pt")
        assert os.path.isfile(os.path.join(run, "profiler_info.json"))
        with open(os.path.join(run, "profiler_metadata.json")) as f:
            assert json.load(f)["model"] == "mlp"
        with open(os.path.join(run, "profiler_info.json")) as f:
            info = json.load(f)
        assert info["config"]["experimental_config"]["profiler_level"] == "Level1"
        assert info["config"]["common_config"]["activities"] == ["CPU", "NPU"]
        out = set(os.listdir(os.path.join(run, "ASCEND_PROFILER_OUTPUT")))
        assert OUT_FILES | {"operator_memory.csv", "memory_record.csv", "api_statistic.csv"} <= out


def test_schedule_records_exactly_active_steps(run_dirs):
    seen = []
    for run in run_dirs:
        trace = load(os.path.join(run, "ASCEND_PROFILER_OUTPUT", "trace_view.json"))
        steps = sorted(e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")
                       and e["ph"] == "X")
        assert len(steps) == 2, steps
        seen += steps
        header, rows = _read_csv(os.path.join(run, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))
        step_ids = {r[0] for r in rows}
        assert step_ids == {s.split("#")[1] for s in steps}, "every step of the window has its device tasks"
    # wait 1, warmup 1, active 2: steps 2-3 and 6-7
    assert seen == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#6", "ProfilerStep#7"]


def test_trace_view_loads_and_links_launches_to_device_tasks(run_dirs):
    trace = load(os.path.join(run_dirs[0], "ASCEND_PROFILER_OUTPUT", "trace_view.json"))
    events = validate(trace)
    assert isinstance(trace["baseTimeNanoseconds"], int)
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert {"Python", "CANN", "Ascend Hardware (npu:0)", "Overlap Analysis (npu:0)"} <= names
    tasks = [e for e in events if e["ph"] == "X" and e.get("cat") == "npu_task"]
    assert any(t["name"].startswith("aclnn") for t in tasks), "named device ops appear by name"
    # Each stream row runs one task at a time, in order.
    by_stream = {}
    for t in tasks:
        by_stream.setdefault(t["tid"], []).append(t)
    for row in by_stream.values():
        row.sort(key=lambda t: t["ts"])
        for a, b in zip(row, row[1:]):
            assert b["ts"] >= a["ts"] + a["dur"] - 1e-3
    # Flows: every launch by an op ends at its task; ids match.
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts and set(starts) == set(ends)
    task_at = {(t["tid"], t["ts"]) for t in tasks}
    assert all((e["tid"], e["ts"]) in task_at for e in ends.values())
    assert any(e["ph"] == "C" and e["name"] == "NPU MEM" for e in events), "memory counters"


def test_csv_views_agree(run_dirs):
    out = os.path.join(run_dirs[0], "ASCEND_PROFILER_OUTPUT")
    header, kernels = _read_csv(os.path.join(out, "kernel_details.csv"))
    assert header == ["Step Id", "Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)",
                      "Duration(us)", "Wait Time(us)", "Block Num", "Input Shapes", "Input Data Types",
                      "Input Formats", "Output Shapes", "Output Data Types", "Output Formats"]
    kernel_total = sum(float(r[6]) for r in kernels)
    header, stats = _read_csv(os.path.join(out, "op_statistic.csv"))
    assert header == ["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                      "Max Time(us)", "Ratio(%)"]
    assert sum(int(r[2]) for r in stats) == len(kernels)
    assert abs(sum(float(r[3]) for r in stats) - kernel_total) < 0.01 * kernel_total + 0.01
    assert abs(sum(float(r[7]) for r in stats) - 100) < 0.5
    header, ops = _read_csv(os.path.join(out, "operator_details.csv"))
    assert header[:7] == ["Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
                          "Device Self Duration(us)", "Device Total Duration(us)"]
    for r in ops:
        assert float(r[3]) <= float(r[4]) + 1e-3 and float(r[5]) <= float(r[6]) + 1e-3
    assert any(r[0] == "aten::mm" and float(r[5]) > 0 and r[1] for r in ops), "mm has device time and shapes"
    header, steps = _read_csv(os.path.join(out, "step_trace_time.csv"))
    assert header[:7] == ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
                          "Communication", "Free"]
    assert len(steps) == 2 and all(float(r[2]) > 0 for r in steps)
    header, records = _read_csv(os.path.join(out, "memory_record.csv"))
    assert header == ["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)",
                      "Stream Ptr", "Device Type"]
    assert records and all(r[0] == "PTA" and r[6] == "NPU:0" for r in records)
    header, mem = _read_csv(os.path.join(out, "operator_memory.csv"))
    assert header[:3] == ["Name", "Size(KB)", "Allocation Time(us)"] and mem
    header, api = _read_csv(os.path.join(out, "api_statistic.csv"))
    assert header[:3] == ["Level", "API Name", "Time(us)"] and api


def test_offline_analyse_reproduces_the_files(tmp_path):
    model, opt = _model()
    x, y = torch.randn(8, 16, device="npu"), torch.randn(8, 4, device="npu")
    handler = torch_npu.profiler.tensorboard_trace_handler(str(tmp_path), analyse_flag=False)
    with torch_npu.profiler.profile(on_trace_ready=handler) as prof:
        _train_step(model, opt, x, y)
    (run,) = handler.run_dirs
    assert not os.path.exists(os.path.join(run, "ASCEND_PROFILER_OUTPUT"))
    outs = torch_npu.profiler.profiler.analyse(str(tmp_path))
    assert outs == [os.path.join(run, "ASCEND_PROFILER_OUTPUT")]
    assert OUT_FILES <= set(os.listdir(outs[0]))
    (db,) = torch_npu.profiler.profiler.analyse(run, export_type="db")
    assert "ascend_pytorch_profiler.db" in os.listdir(db)
    # export_chrome_trace writes the same trace view.
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    validate(load(str(tmp_path / "trace.json")))


def test_blocking_launch_device_time_within_host_span_and_two_ranks(tmp_path, run_python):
    """Two processes with distinct ranks write side by side; with ASCEND_LAUNCH_BLOCKING=1 each device task
    runs inside the op that launched it."""
    script = textwrap.dedent(f"""
        import torch, torch_npu
        a = torch.randn(128, 128, device="npu")
        h = torch_npu.profiler.tensorboard_trace_handler({str(tmp_path)!r}, worker_name="node")
        with torch_npu.profiler.profile(on_trace_ready=h, record_shapes=True):
            torch.mm(a, a)
            (a * 2).sum()
    """)
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path,
                              env=dict(os.environ, RANK=str(r), ASCEND_LAUNCH_BLOCKING="1"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    for p in procs:
        out, _ = p.communicate(timeout=180)
        assert p.returncode == 0, out
    runs = sorted(d for d in os.listdir(tmp_path) if d.endswith("_ascend_pt"))
    assert len(runs) == 2
    infos = sorted(f for d in runs for f in os.listdir(tmp_path / d) if f.startswith("profiler_info"))
    assert infos == ["profiler_info_0.json", "profiler_info_1.json"]
    for d in runs:
        raw = json.load(open(tmp_path / d / "FRAMEWORK" / "host_events.json"))
        dev = json.load(open(tmp_path / d / "FRAMEWORK" / "device_activities.json"))
        ops = {o["id"]: o for o in raw["ops"]}
        mms = {o["id"]: o for o in raw["ops"] if o["name"] == "aten::mm"}  # nested: each dispatch level
        tasks = [r for r in dev["records"] if r[3] in mms]
        assert tasks, "the matmul's device task carries its (innermost) op's correlation id"
        slack = 20_000  # ns: the host profiler's clock is an approximation of the same clock
        for r in tasks:
            mm, start, end = mms[r[3]], r[7], r[8]
            assert r[14].startswith("aclnn")
            assert mm["start"] - slack <= r[6] <= start <= end <= mm["end"] + slack
        assert all(r[3] in ops or r[3] == 0 for r in dev["records"])


def test_bad_arguments_raise_clear_errors(tmp_path):
    with pytest.raises(TypeError, match="on_trace_ready must be callable"):
        torch_npu.profiler.profile(on_trace_ready="./result")
    with pytest.raises(ValueError, match="not supported on npu"):
        torch_npu.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
    with pytest.raises(TypeError, match="experimental_config"):
        torch_npu.profiler.profile(experimental_config={"profiler_level": "Level0"})
    with pytest.raises(ValueError, match="profiler_level"):
        torch_npu.profiler._ExperimentalConfig(profiler_level="Level9")
    with pytest.raises(ValueError, match="active must be an int >= 1"):
        torch_npu.profiler.schedule(wait=1, active=0)
    with pytest.raises(PermissionError, match="cannot be created|not writable"):
        torch_npu.profiler.tensorboard_trace_handler("/proc/sys/npu_profiling_out")  # read-only, even for root
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(NotADirectoryError, match="a parent of it is a file"):
        torch_npu.profiler.tensorboard_trace_handler(str(blocker / "out"))
    with pytest.raises(FileNotFoundError, match="no \\*_ascend_pt"):
        torch_npu.profiler.profiler.analyse(str(tmp_path))
    prof = torch_npu.profiler.profile()
    with pytest.raises(RuntimeError, match="nothing recorded yet"):
        prof.export_chrome_trace(str(tmp_path / "t.json"))


def test_handler_errors_are_raised_not_swallowed(tmp_path):
    def broken(prof):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        with torch_npu.profiler.profile(on_trace_ready=broken):
            torch.ones(2, device="npu").add_(1)
