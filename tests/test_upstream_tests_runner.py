"""tools/upstream_tests (make upstream-tests): per-file verdicts from pytest's junit XML, a table per
test folder, causes, chip-specific files, and the docs section, on tiny test files of our own laid out
like an Ascend/pytorch checkout."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "tools" / "upstream_tests" / "run.py"

FILES = {
    "npu/test_device_ok.py": """
import torch, torch_npu
from torch_npu.testing.testcase import TestCase, run_tests

class TestDevice(TestCase):
    def test_add(self):
        self.assertEqual((torch.ones(3).npu() + 1).cpu(), torch.full((3,), 2.0))

    def test_skipped(self):
        self.skipTest("not on this chip")
""",
    "npu/test_missing_name.py": """
import torch, torch_npu

def test_missing():
    torch.npu.no_such_function()

def test_fine():
    assert torch.npu.is_available()
""",
    "optim/test_hangs.py": "import time\n\ndef test_sleep():\n    time.sleep(60)\n",
    "distributed/test_hccl_ok.py": "def test_ok():\n    assert True\n",
    "distributed/test_rpc_other.py": "def test_not_selected():\n    raise AssertionError('distributed files other than hccl / c10d / ddp are not run')\n",
}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = tmp_path_factory.mktemp("pytorch")
    for rel, body in FILES.items():
        path = root / "test" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    return root


def run(checkout, tmp_path, *extra):
    out = tmp_path / "results.json"
    doc = tmp_path / "conformance.md"
    doc.write_text("# Conformance\n\nkept text\n")
    proc = subprocess.run([sys.executable, str(RUNNER), str(checkout), "--dirs", "npu", "optim", "distributed",
                           "--timeout", "20", "--json", str(out), "--doc", str(doc), *extra],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, json.loads(out.read_text()), doc.read_text()


def test_verdicts_tables_and_doc(checkout, tmp_path):
    stdout, results, doc = run(checkout, tmp_path)
    by_path = {r["path"]: r for r in results["files"]}
    assert set(by_path) == {"npu/test_device_ok.py", "npu/test_missing_name.py", "optim/test_hangs.py",
                            "distributed/test_hccl_ok.py"}
    ok = by_path["npu/test_device_ok.py"]
    assert (ok["status"], ok["passed"], ok["skipped"]) == ("passed", 1, 1)
    missing = by_path["npu/test_missing_name.py"]
    assert (missing["status"], missing["passed"], missing["failures"]) == ("failed", 1, 1)
    assert missing["cause"] == "missing torch_npu API" and "no_such_function" in missing["first_error"]
    assert by_path["optim/test_hangs.py"]["status"] == "timeout"
    assert "PASS npu/test_device_ok.py" in stdout and "TIMEOUT optim/test_hangs.py" in stdout
    assert "| npu | 2 | 1 | 2 | 1 | 0 | 1 | 66.7% | 0 |" in doc
    assert doc.startswith("# Conformance\n\nkept text\n") and "upstream-tests:end" in doc


def test_chip_specific_files_are_listed_not_run(checkout, tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("upstream_tests_run", RUNNER)
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    monkeypatch.setitem(runner.CHIP_SPECIFIC, "optim/test_hangs.py", "needs the chip's timer")
    out = tmp_path / "r.json"
    runner.main([str(checkout), "--dirs", "optim", "--json", str(out)])
    (only,) = json.loads(out.read_text())["files"]
    assert (only["status"], only["detail"]) == ("chip-specific", "needs the chip's timer")


def test_report_only_rewrites_the_doc_from_saved_results(checkout, tmp_path):
    run(checkout, tmp_path, "--files", "npu/test_device_ok.py")
    doc = tmp_path / "conformance.md"
    doc.write_text("# Conformance\n")
    proc = subprocess.run([sys.executable, str(RUNNER), str(checkout), "--report-only", "--json",
                           str(tmp_path / "results.json"), "--doc", str(doc)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "| npu | 1 | 1 | 1 | 0 | 0 | 1 |" in doc.read_text()


def test_rerun_failed_keeps_the_other_files_results(checkout, tmp_path):
    run(checkout, tmp_path, "--files", "npu/test_device_ok.py", "npu/test_missing_name.py")
    results = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, str(RUNNER), str(checkout), "--rerun-failed", str(results), "--json",
                           str(results)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "running 1 files" in proc.stdout  # only the failed one ran again
    merged = {r["path"]: r["status"] for r in json.loads(results.read_text())["files"]}
    assert merged == {"npu/test_device_ok.py": "passed", "npu/test_missing_name.py": "failed"}
