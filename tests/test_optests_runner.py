"""tools/optests (make optests): per-file verdicts, first errors, causes and the docs section, checked on
tiny op-test files of our own laid out like an op-plugin checkout."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "tools" / "optests" / "run.py"
sys.path.insert(0, str(RUNNER.parent))
from causes import parse_output  # noqa: E402

HEADER = """\
import numpy as np
import torch
import torch_npu
from torch_npu.testing.testcase import TestCase, run_tests
from torch_npu.testing.common_utils import create_common_tensor, SupportedDevices
"""

SAMPLES = {
    "test_relu_ok.py": """
class TestRelu(TestCase):
    def test_relu(self):
        cpu_x, npu_x = create_common_tensor([np.float32, 0, (4, 5)], -1, 1)
        self.assertRtolEqual(torch.relu(cpu_x), torch.relu(npu_x).cpu())
""",
    "test_only_310p.py": """
class TestOther(TestCase):
    def test_any_chip(self):
        self.assertTrue(torch.npu.get_device_name(0).startswith("Ascend"))

    @SupportedDevices(['Ascend310P'])
    def test_other_chip(self):
        print("a line the test prints", flush=True)
        self.assertEqual(torch.npu.get_device_name(0), "Ascend310P3")
""",
    "test_unknown_chip.py": """
class TestUnknown(TestCase):
    @SupportedDevices(['Ascend910C'])
    def test_chip_we_cannot_be(self):
        raise AssertionError("no chip family of the software NPU matches")
""",
    "test_wrong_value.py": """
class TestWrong(TestCase):
    def test_wrong(self):
        cpu_x, npu_x = create_common_tensor([np.float32, 0, (8,)], 1, 2)
        self.assertRtolEqual(cpu_x, (npu_x * 2).cpu())
""",
    "test_missing_op.py": """
class TestMissing(TestCase):
    def test_missing(self):
        torch_npu.npu_no_such_op(torch.ones(2).npu())
""",
    "test_skipped_by_source.py": """
import unittest


class TestLater(TestCase):
    @unittest.skip("skip until CANN is updated")
    def test_later(self):
        raise AssertionError("never runs")
""",
    "test_hangs.py": "import time\ntime.sleep(60)\n",
}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = tmp_path_factory.mktemp("op-plugin")
    tests = root / "test" / "test_base_ops"
    tests.mkdir(parents=True)
    for name, body in SAMPLES.items():
        text = body if name == "test_hangs.py" else HEADER + body + '\n\nif __name__ == "__main__":\n    run_tests()\n'
        (tests / name).write_text(text)
    return root


@pytest.fixture(scope="module")
def run(checkout, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    doc = out / "conformance.md"
    doc.write_text("# Conformance\n\nOpInfo results stay here.\n")
    proc = subprocess.run([sys.executable, str(RUNNER), str(checkout), "--jobs", "2", "--timeout", "20",
                           "--json", str(out / "results.json"), "--doc", str(doc)],
                          capture_output=True, text=True, timeout=300, cwd=out)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, json.loads((out / "results.json").read_text()), doc


def _line(stdout, name):
    return next(ln for ln in stdout.splitlines() if f" {name} " in ln)


def test_each_file_gets_a_verdict_and_first_error(run):
    stdout, results, _ = run
    assert _line(stdout, "test_relu_ok.py").startswith("PASS")
    assert _line(stdout, "test_only_310p.py").startswith("PASS")
    assert "all tests skipped" in _line(stdout, "test_unknown_chip.py")
    wrong = _line(stdout, "test_wrong_value.py")
    assert wrong.startswith("FAIL") and "[wrong result]" in wrong and "TestWrong.test_wrong" in wrong
    missing = _line(stdout, "test_missing_op.py")
    assert "[missing npu_* op]" in missing and "npu_no_such_op" in missing
    assert "[timeout]" in _line(stdout, "test_hangs.py")
    by_name = {r["name"]: r for r in results["files"]}
    assert by_name["test_relu_ok.py"]["ran"] == 1
    # the 310P-only test ran as an Ascend310P3 in a second run of the file, and skipped in none
    chip = by_name["test_only_310p.py"]
    assert chip["socs"] == ["Ascend910B", "Ascend310P"] and (chip["ran"], chip["skipped"]) == (2, 0)
    assert chip["tests"] == {"TestOther.test_any_chip": "passed", "TestOther.test_other_chip": "passed"}
    assert by_name["test_unknown_chip.py"]["socs"] == ["Ascend910B"]
    assert by_name["test_unknown_chip.py"]["skipped"] == 1
    assert by_name["test_skipped_by_source.py"]["skipped_by_source"]
    assert not by_name["test_unknown_chip.py"]["skipped_by_source"]
    assert by_name["test_missing_op.py"]["detail"] == "npu_no_such_op"


def test_summary_counts_files_and_causes(run):
    stdout, results, _ = run
    assert "files: 2/7 passed (28.6%); 2 more with every test skipped (not passes)" in stdout
    assert "unittest.skip on every test): 1; passed of the other 6: 33.3%" in stdout
    assert "tests: 7 ran, 3 passed, 2 failed or errored, 2 skipped on every chip" in stdout
    summary = stdout[stdout.index("failures by cause:"):]
    for cause in ("wrong result", "missing npu_* op: npu_no_such_op", "timeout"):
        assert cause in summary
    assert results["meta"]["soc"] == "Ascend910B1"


def test_docs_section_keeps_the_rest_and_partial_runs_leave_it(run, checkout):
    _, _, doc = run
    text = doc.read_text()
    assert text.startswith("# Conformance\n\nOpInfo results stay here.\n")
    assert "| 7 | 2 | 3 | 2 | 1 | 28.6% | 33.3% |" in text and "| 7 | 3 | 2 | 2 |" in text
    assert "every test skipped" in text and "`test_unknown_chip.py`" in text
    assert "`test_hangs.py`" in text
    subprocess.run([sys.executable, str(RUNNER), str(checkout), "--files", "test_relu_ok.py",
                    "test_only_310p.py", "--json", str(doc.parent / "r2.json"), "--doc", str(doc)],
                   check=True, capture_output=True, timeout=300, cwd=doc.parent)
    assert doc.read_text() == text  # a partial run leaves the docs alone


def test_docs_section_replaced_in_place(tmp_path):
    from report import MARKERS, write_doc

    BEGIN, END = MARKERS["base"]

    doc = tmp_path / "c.md"
    doc.write_text(f"intro\n\n{BEGIN}\nold\n{END}\n\n## after\n")
    result = parse_output("test_a.py", 0, "....\n" + "-" * 70 + "\nRan 4 tests in 0.1s\n\nOK\n", 1.0, False)
    write_doc(doc, [result], {"seconds": 60, "torch": "2.13.0", "soc": "Ascend910B1", "cann": "8.5.0"})
    text = doc.read_text()
    assert text.count(BEGIN) == 1 and "old" not in text
    assert text.startswith("intro\n\n") and text.rstrip().endswith("## after")


def test_parse_output_classifies_first_errors():
    fmt = textwrap.dedent("""\
        E
        ======================================================================
        ERROR: test_abs_fp16 (__main__.TestAbs.test_abs_fp16)
        ----------------------------------------------------------------------
        Traceback (most recent call last):
          File "test_abs.py", line 38, in test_abs_fp16
            cpu_input, npu_input = create_common_tensor(item, -10, 10)
                                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
        ValueError: npu_format 29 (FRACTAL_NZ) is not supported yet: private storage formats are not implemented.

        ----------------------------------------------------------------------
        Ran 3 tests in 0.285s

        FAILED (errors=1, skipped=1)
        """)
    r = parse_output("test_abs.py", 1, fmt, 2.0, False)
    assert (r.status, r.ran, r.errors, r.skipped) == ("failed", 3, 1, 1)
    assert r.first_test == "TestAbs.test_abs_fp16"
    assert r.first_error.startswith("ValueError: npu_format 29")
    assert r.cause == "needs private formats"

    import_error = ("Traceback (most recent call last):\n  File \"test_x.py\", line 3, in <module>\n"
                    "    from torch_npu.testing.common_utils import Foo\n"
                    "ImportError: cannot import name 'Foo' from 'torch_npu.testing.common_utils'\n")
    r = parse_output("test_x.py", 1, import_error, 1.0, False)
    assert (r.cause, r.detail) == ("missing torch_npu API", "torch_npu.testing.common_utils")

    crashed = parse_output("test_y.py", -11, "Fatal Python error: Segmentation fault\n", 1.0, False)
    assert crashed.status == "crashed" and crashed.cause == "crash"

    no_tests = parse_output("test_z.py", 0, "\nRan 0 tests in 0.0s\n\nOK\n", 1.0, False)
    assert no_tests.passed and not no_tests.all_skipped

    numpy2 = ("Traceback (most recent call last):\n  File \"test_w.py\", line 33, in test_w\n"
              "    shape = int(np.log10(shape) + 1)\n"
              "TypeError: only 0-dimensional arrays can be converted to Python scalars\n")
    assert parse_output("test_w.py", 1, numpy2, 1.0, False).cause == "test code needs NumPy 1.x"


def test_rerun_failed_reports_the_previous_run_with_new_verdicts(run, checkout, tmp_path):
    _, results, _ = run
    previous = json.loads(json.dumps(results))
    for f in previous["files"]:  # pretend only test_relu_ok.py failed last time
        f["status"] = "failed" if f["name"] == "test_relu_ok.py" else "passed"
    prev_json = tmp_path / "results.json"
    prev_json.write_text(json.dumps(previous))
    proc = subprocess.run([sys.executable, str(RUNNER), str(checkout), "--rerun-failed", str(prev_json),
                           "--json", str(prev_json)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "running 1 files" in proc.stdout
    merged = json.loads(prev_json.read_text())
    assert {f["name"]: f["status"] for f in merged["files"]} == {f["name"]: "passed" for f in previous["files"]}
    assert "failed files re-run" in merged["meta"]["selection"]


def test_custom_suite_has_its_own_docs_section(tmp_path):
    from report import MARKERS, write_doc

    doc = tmp_path / "c.md"
    result = parse_output("test_b.py", 0, "test_x (__main__.TestB.test_x) ... ok\n" + "-" * 70 +
                          "\nRan 1 test in 0.1s\n\nOK\n", 1.0, False)
    meta = {"seconds": 60, "torch": "2.13.0", "soc": "Ascend910B1", "cann": "8.5.0"}
    write_doc(doc, [result], meta, "base")
    write_doc(doc, [result], meta, "custom")
    text = doc.read_text()
    assert all(text.count(marker) == 1 for pair in MARKERS.values() for marker in pair)
    assert "`test/test_custom_ops`" in text and "`test/test_base_ops`" in text


def test_verbose_lines_give_each_test_its_verdict():
    from causes import parse_tests

    out = textwrap.dedent("""\
        test_a (__main__.TestX.test_a) ... ok
        test_b (__main__.TestX.test_b)
        A docstring line. ... printed by the test
        more output
        FAIL
        test_c (__main__.TestX.test_c) ... skipped 'Only run on ['Ascend950']'
        test_d (__main__.TestY.test_d) ... ERROR
        test_e (__main__.TestY.test_e) ... expected failure
        test_f (__main__.TestY.test_f) ... """)
    assert parse_tests(out) == {"TestX.test_a": "passed", "TestX.test_b": "failed", "TestX.test_c": "skipped",
                                "TestY.test_d": "failed", "TestY.test_e": "passed", "TestY.test_f": "failed"}


def test_runs_as_several_chips_merge_per_test():
    from causes import FileResult
    from socs import extra_socs, merge_runs

    source = "@SupportedDevices(['Ascend910B', 'Ascend950'])\n@SupportedDevices([\"Ascend910C\", 'Ascend310P'])\n"
    assert extra_socs(source) == [("Ascend950", "Ascend950PR"), ("Ascend310P", "Ascend310P3")]
    default = FileResult("t.py", "passed", ran=3, skipped=2,
                         tests={"T.a": "passed", "T.b": "skipped", "T.c": "skipped"})
    as950 = FileResult("t.py", "failed", ran=3, failures=1, skipped=1, first_test="T.c", first_error="boom",
                       cause="other", tests={"T.a": "passed", "T.b": "passed", "T.c": "failed"})
    merged = merge_runs([("Ascend910B", default), ("Ascend950", as950)])
    assert merged.tests == {"T.a": "passed", "T.b": "passed", "T.c": "failed"}
    assert (merged.status, merged.ran, merged.failures, merged.skipped) == ("failed", 3, 1, 0)
    assert merged.first_test == "T.c [Ascend950]" and merged.socs == ["Ascend910B", "Ascend950"]
    only_default = merge_runs([("Ascend910B", default)])
    assert only_default.all_skipped is False and only_default.socs == ["Ascend910B"]


def test_resume_keeps_finished_files_and_runs_the_rest(checkout, tmp_path):
    out = tmp_path / "r.json"
    first = [sys.executable, str(RUNNER), str(checkout), "--files", "test_relu_ok.py", "--json", str(out)]
    subprocess.run(first, check=True, capture_output=True, timeout=120, cwd=tmp_path)
    proc = subprocess.run([sys.executable, str(RUNNER), str(checkout), "--files", "test_relu_ok.py",
                           "test_skipped_by_source.py", "--json", str(out), "--resume"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "resuming: 1 files done earlier, 1 to run" in proc.stdout
    files = {f["name"]: f for f in json.loads(out.read_text())["files"]}
    assert files["test_relu_ok.py"]["status"] == "passed" and files["test_skipped_by_source.py"]["skipped_by_source"]
