"""The profilers as seed-era scripts call them: torch.autograd.profiler.profile(use_npu=True, ...) with its
exact table, torch.npu.profile (E2E, PROF_* folder with a layered timeline), prof_init / prof_start /
prof_stop / prof_finalize with iteration_start / iteration_end, and torch_npu.profiler.dynamic_profile."""

import json
import os
import re
import time

import pytest
import torch
import torch.nn as nn

import torch_npu
from trace_format import load, validate

SEED_COLUMNS = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self NPU %",
                "Self NPU", "NPU total", "NPU time avg"]
MEM_COLUMNS = ["CPU Mem", "Self CPU Mem", "NPU Mem", "Self NPU Mem"]


def _step(model, x):
    loss = model(x).sum()
    loss.backward()
    return loss


def _header(table: str) -> list[str]:
    lines = table.splitlines()
    return re.split(r"\s{2,}", lines[1].strip())


@pytest.fixture
def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).npu()


def test_use_npu_table_has_the_seed_columns(model, tmp_path):
    x = torch.randn(4, 8, device="npu")
    with torch.autograd.profiler.profile(use_npu=True) as prof:
        _step(model, x)
    table = str(prof)
    assert _header(table) == SEED_COLUMNS + ["# of Calls"]
    rows = {re.split(r"\s{2,}", line.strip())[0]: line for line in table.splitlines()[3:]}
    assert "aten::addmm" in rows or "aten::mm" in rows
    npu_total = {e.key: e.device_time_total for e in prof.key_averages()}
    assert npu_total.get("aten::addmm", 0) + npu_total.get("aten::mm", 0) > 0
    path = str(tmp_path / "profile_data.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    names = {e.get("name") for e in trace["traceEvents"]}
    assert any(str(n).startswith("aclnn") for n in names), "device rows in the chrome trace"


def test_record_shapes_and_profile_memory_columns(model):
    x = torch.randn(4, 8, device="npu")
    with torch.autograd.profiler.profile(use_npu=True, record_shapes=True, profile_memory=True) as prof:
        _step(model, x)
    table = prof.table()
    assert _header(table) == SEED_COLUMNS + MEM_COLUMNS + ["# of Calls", "Input Shapes"]
    assert "[[4, 8]" in table
    npu_mem = [e.device_memory_usage for e in prof.key_averages()]
    assert any(m > 0 for m in npu_mem), "npu allocations are attributed to ops"


def test_use_npu_simple_keeps_innermost_ops(model, tmp_path):
    x = torch.randn(4, 8, device="npu")
    with torch.autograd.profiler.profile(use_npu=True, use_npu_simple=True) as prof:
        model(x)
    keys = {e.key for e in prof.key_averages()}
    assert "aten::linear" not in keys, "composite parents are left out"
    assert keys & {"aten::addmm", "aten::mm", "aten::relu", "aten::clamp_min"}
    path = str(tmp_path / "simple.json")
    prof.export_chrome_trace(path)
    events = validate(load(path))
    names = {e.get("name") for e in events}
    assert "aten::linear" not in names and names & keys
    assert any(str(n).startswith("aclnn") for n in names), "the device work of the kept ops"


def test_e2e_profile_writes_a_layered_timeline(model, tmp_path):
    x = torch.randn(4, 8, device="npu")
    config = torch.npu.profileConfig(ACL_PROF_ACL_API=True, ACL_PROF_TASK_TIME=True, ACL_PROF_AICORE_METRICS=True,
                                     ACL_PROF_AICPU=True, ACL_PROF_L2CACHE=False, ACL_PROF_HCCL_TRACE=True,
                                     ACL_PROF_TRAINING_TRACE=True, aiCoreMetricsType=0)
    with torch.npu.profile(profiler_result_path=str(tmp_path), use_e2e_profiler=True, config=config) as p:
        for _ in range(2):
            torch.npu.iteration_start()
            _step(model, x)
            torch.npu.iteration_end()
    (prof_dir,) = [d for d in os.listdir(tmp_path) if d.startswith("PROF_")]
    assert os.path.join(str(tmp_path), prof_dir) == p.prof_dir
    trace = load(os.path.join(tmp_path, prof_dir, "timeline", "msprof.json"))
    events = validate(trace)
    layers = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    used = {layers[e["pid"]] for e in events if e["ph"] == "X"}
    assert {"MsprofTx", "AscendCL", "Task Scheduler", "Step Trace"} <= used
    assert sum(1 for e in events if e["ph"] == "X" and e["name"].startswith("Iteration ")) == 2
    assert any(e["name"].startswith("aclnn") for e in events if e["ph"] == "X" and layers[e["pid"]] == "Task Scheduler")
    summary = set(os.listdir(os.path.join(tmp_path, prof_dir, "summary")))
    assert {"op_summary.csv", "api_statistic.csv"} <= summary


def test_prof_init_start_stop_finalize(model, tmp_path):
    x = torch.randn(4, 8, device="npu")
    torch.npu.prof_init(str(tmp_path))
    torch.npu.prof_start(torch.npu.profileConfig(ACL_PROF_ACL_API=False))
    _step(model, x)
    prof_dir = torch.npu.prof_stop()
    torch.npu.prof_finalize()
    events = validate(load(os.path.join(prof_dir, "timeline", "msprof.json")))
    layers = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    used = {layers[e["pid"]] for e in events if e["ph"] == "X"}
    assert "Task Scheduler" in used and "MsprofTx" not in used and "AscendCL" not in used
    with pytest.raises(RuntimeError, match="before prof_init"):
        torch.npu.prof_start()
    with pytest.raises(FileNotFoundError, match="create the directory first"):
        torch.npu.prof_init(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="aiCoreMetricsType"):
        torch.npu.profileConfig(aiCoreMetricsType=7)


def test_dynamic_profile_starts_mid_run_from_the_config_file(model, tmp_path):
    from torch_npu.profiler import dynamic_profile as dp

    x = torch.randn(4, 8, device="npu")
    dp.init(str(tmp_path))
    cfg_path = tmp_path / "profiler_config.json"
    cfg = json.loads(cfg_path.read_text())
    assert cfg["activities"] == ["CPU", "NPU"] and cfg["active"] == 1
    for _ in range(3):
        _step(model, x)
        dp.step()
    assert not [d for d in os.listdir(tmp_path) if d.endswith("_ascend_pt")], "the template alone collects nothing"
    cfg.update(active=2, analyse=True, prof_dir=str(tmp_path / "out"))
    cfg_path.write_text(json.dumps(cfg))
    future = time.time() + 5
    os.utime(cfg_path, (future, future))
    for _ in range(4):
        _step(model, x)
        dp.step()
    (run,) = os.listdir(tmp_path / "out")
    trace = load(str(tmp_path / "out" / run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"))
    steps = [e for e in validate(trace) if e["ph"] == "X" and e["name"].startswith("ProfilerStep#")]
    assert len(steps) == 2
