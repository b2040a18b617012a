"""Smoke test of the benchmark runner: a --quick run writes the JSON, markdown and chart for every section."""

import json
import math
import os
import subprocess
import sys

RUNNER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "run.py")
SECTIONS = ("demo", "small_ops", "kernels", "attention", "copies", "training", "allocator", "distributed",
            "profiling", "long_runs", "graphs")
TITLES = ("The demo's model (make demo)", "Small-op host cost", "Large kernels",
          "Fused attention (npu_fusion_attention vs CPU flash attention)", "Copies", "Training", "Allocator",
          "Distributed (hccl)", "Profiling overhead", "Long runs (leaks)",
          "NPU graphs (capture and replay)")


def _run(out_dir, *extra):
    proc = subprocess.run([sys.executable, RUNNER, "--quick", "--out", str(out_dir), *extra],
                          capture_output=True, text=True, timeout=600, cwd=str(out_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out_dir / "results.json") as f:
        return json.load(f)


def test_quick_run_writes_every_section(tmp_path):
    doc = _run(tmp_path)
    assert doc["quick"] is True
    assert {r["section"] for r in doc["rows"]} == set(SECTIONS)
    for r in doc["rows"]:
        if r["ref"] is not None:  # a measured comparison: positive figures and their ratio
            assert r["npu"]["min"] <= r["npu"]["median"] <= r["npu"]["max"], r
            assert r["npu"]["median"] > 0 and r["ref"]["median"] > 0, r
            assert math.isclose(r["ratio"], r["npu"]["median"] / r["ref"]["median"]), r
            best = "max" if r["higher_is_better"] else "min"
            assert math.isclose(r["ratio_best"], r["npu"][best] / r["ref"][best]), r
        if r["target"] is not None and r["ratio"] is not None:
            assert r["met"] == (r["ratio"] >= r["target"] if r["higher_is_better"] else r["ratio"] <= r["target"])
    allocs = [r for r in doc["rows"] if r["key"].endswith("_segments")]
    assert allocs and all(r["npu"]["median"] >= 0 for r in allocs)

    markdown = (tmp_path / "benchmarks.md").read_text()
    for number, title in enumerate(TITLES, 1):
        assert f"## {number}. {title}" in markdown
    assert "Quick (smoke) run" in markdown
    assert doc["machine"]["torch"] in markdown and "cores" in markdown
    assert "![ratios vs targets](benchmarks.png)" in markdown
    with open(tmp_path / "benchmarks.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_only_runs_the_named_section(tmp_path):
    doc = _run(tmp_path, "--only", "copies")
    assert doc["sections"] == ["copies"]
    assert {r["section"] for r in doc["rows"]} == {"copies"}
    assert "## 5. Copies" in (tmp_path / "benchmarks.md").read_text()
