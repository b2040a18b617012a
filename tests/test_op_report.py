"""The op-support report: run a script with ops of each verdict and read the markdown, HTML and CSV back;
the context-manager form; bad command lines."""

import csv
import os
import subprocess
import sys
import textwrap

import torch

from torch_npu.tools.op_report import OpReport

SCRIPT = textwrap.dedent("""
    import sys, torch
    x = torch.randn(16, device=sys.argv[1])
    y = x + x                       # named device op (aclnnAdd)
    z = torch.special.i0e(y)        # no npu kernel: generic executor
    idx = torch.nonzero(z > 0.5)    # data-dependent output: copied to the CPU and back
    print("done", float(y.sum()), idx.shape[1])
""")


def _csv(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {r["Op"]: r for r in rows}, [r["Op"] for r in rows]


def test_cli_report_on_npu_has_each_verdict_blockers_first(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "torch_npu.tools.op_report", "-o", str(out), "--", str(script), "npu"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "done" in proc.stdout and "ops (" in proc.stdout
    assert "2 would not run on a real NPU's op library (2 of them called on npu tensors in this run)" in proc.stdout
    rows, order = _csv(out / "op_report.csv")
    assert rows["aten::add.Tensor"]["Verdict"] == "named device op"
    assert rows["aten::add.Tensor"]["Detail"] == "aclnnAdd"
    assert rows["aten::special_i0e.default"]["Verdict"] == "generic executor"
    assert rows["aten::nonzero.default"]["Verdict"] == "CPU fallback"
    assert rows["aten::add.Tensor"]["Calls"] == "1" and "[16]" in rows["aten::add.Tensor"]["Input shapes (most common)"]
    ranks = {"CPU fallback": 0, "generic executor": 1, "unknown": 2, "npu kernel": 3, "named device op": 4}
    verdicts = [ranks[rows[o]["Verdict"]] for o in order]
    assert verdicts == sorted(verdicts), "blockers come first"
    md = (out / "op_report.md").read_text()
    assert md.startswith("# Op-support report: train.py") and "would not run on a real NPU" in md
    assert "<table>" in (out / "op_report.html").read_text()


def test_context_manager_on_cpu_uses_the_registry(tmp_path):
    with OpReport() as report:
        x = torch.randn(8)
        (x + x).relu()
        torch.special.i0e(x)
    verdicts = {u.op: u.verdict for u in report.ops}
    assert verdicts["aten::special_i0e.default"] == "generic executor", "judged without running on npu"
    assert verdicts["aten::add.Tensor"] in ("named device op", "npu kernel")
    paths = report.write(str(tmp_path / "r"))
    assert all(os.path.isfile(p) for p in paths.values())
    assert report.summary().startswith(f"{len(verdicts)} ops (")


def test_context_manager_folds_tensor_lists_and_skips_profiler_ranges():
    with OpReport() as report:
        with torch.autograd.profiler.record_function("data"):
            batch = torch.stack([torch.randn(3, 4) for _ in range(5)])
        torch.select(batch, 0, 1)
    uses = {u.op: u for u in report.ops}
    assert not [op for op in uses if op.startswith("profiler::")], "record_function ranges are not ops"
    assert list(uses["aten::stack.default"].shapes) == ["[3, 4] x5"]
    assert list(uses["aten::stack.default"].dtypes) == ["float32 x5"]
    assert uses["aten::stack.default"].detail == "ran on cpu only; on npu: decomposes into other ops"
    with OpReport() as report:
        torch._foreach_add([torch.ones(i + 1) for i in range(10)], 1.0)
    (shapes,) = list({u.op: u for u in report.ops}["aten::_foreach_add.Scalar"].shapes)
    assert shapes == "[1]; [2]; [3]; [4]; [5]; ... (10 tensors)"
    # A composite op the registry names through a guessed .out overload that does not exist.
    assert uses["aten::select.int"].verdict == "npu kernel"


def test_bad_command_lines(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "torch_npu.tools.op_report", *a], cwd=tmp_path,
                                    capture_output=True, text=True, timeout=120)
    proc = run("-o", "x")
    assert proc.returncode == 2 and "no script given" in proc.stderr
    proc = run("--", "missing.py")
    assert proc.returncode == 2 and "does not exist" in proc.stderr
