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
    @SupportedDevices(['Ascend310P'])
    def test_other_chip(self):
        raise AssertionError("must not run on the default Ascend910B1")
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
    assert "all tests skipped" in _line(stdout, "test_only_310p.py")
    wrong = _line(stdout, "test_wrong_value.py")
    assert wrong.startswith("FAIL") and "[wrong result]" in wrong and "TestWrong.test_wrong" in wrong
    missing = _line(stdout, "test_missing_op.py")
    assert "[missing npu_* op]" in missing and "npu_no_such_op" in missing
    assert "[timeout]" in _line(stdout, "test_hangs.py")
    by_name = {r["name"]: r for r in results["files"]}
    assert by_name["test_relu_ok.py"]["ran"] == 1 and by_name["test_only_310p.py"]["skipped"] == 1
    assert by_name["test_missing_op.py"]["detail"] == "npu_no_such_op"


def test_summary_counts_files_and_causes(run):
    stdout, results, _ = run
    assert "files: 2/5 passed (40.0%), 1 of them with every test skipped" in stdout
    summary = stdout[stdout.index("failures by cause:"):]
    for cause in ("wrong result", "missing npu_* op: npu_no_such_op", "timeout"):
        assert cause in summary
    assert results["meta"]["soc"] == "Ascend910B1"


def test_docs_section_keeps_the_rest_and_partial_runs_leave_it(run, checkout):
    _, _, doc = run
    text = doc.read_text()
    assert text.startswith("# Conformance\n\nOpInfo results stay here.\n")
    assert "| 5 | 2 | 3 | 40.0% | 1 |" in text
    assert "`test_hangs.py`" in text
    subprocess.run([sys.executable, str(RUNNER), str(checkout), "--files", "test_relu_ok.py",
                    "test_only_310p.py", "--json", str(doc.parent / "r2.json"), "--doc", str(doc)],
                   check=True, capture_output=True, timeout=300, cwd=doc.parent)
    assert doc.read_text() == text  # a partial run leaves the docs alone


def test_docs_section_replaced_in_place(tmp_path):
    from report import BEGIN, END, write_doc

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
