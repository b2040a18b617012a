"""The compare tool (msaccucmp) and compare_with_cpu: metrics and verdicts, reports, root-cause
marking, and a deliberately wrong device op (a custom op package overriding aclnnGelu) named first."""

import csv
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import torch_npu  # noqa: F401
from torch_npu.tools.accucmp import compare_files
from torch_npu.tools.accucmp.compare import CONTAMINATED, LIKELY_ROOT_CAUSE
from torch_npu.tools.accucmp.metrics import compare_arrays
from torch_npu.tools.accucmp.report import COLUMNS
from torch_npu.tools.accuracy import compare_with_cpu

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "accuracy")


def test_metrics_and_verdict_rules():
    rng = np.random.default_rng(0)
    b = rng.standard_normal(1000).astype(np.float32)
    same = compare_arrays(b, b)
    assert same["verdict"] == "Yes" and same["cosine"] == pytest.approx(1.0) and same["max_abs"] == 0
    assert same["thousandth"] == 1.0 and same["five_thousandths"] == 1.0
    # cosine < 0.99 with max abs err > 0.001
    noisy = compare_arrays(b + 0.2 * rng.standard_normal(1000), b)
    assert noisy["cosine"] < 0.99 and noisy["verdict"] == "No"
    # a pure scale keeps the cosine at 1 but a max abs err > 1 fails
    assert compare_arrays(b * 2, b)["verdict"] == "No"
    # small errors pass
    small = compare_arrays(b + 1e-5, b)
    assert small["verdict"] == "Yes" and small["max_abs"] == pytest.approx(1e-5, rel=1e-2)
    # relative error ratios
    ratios = compare_arrays(np.array([1.0, 1.002, 1.0]), np.array([1.0, 1.0, 1.1]))
    assert ratios["thousandth"] == pytest.approx(1 / 3) and ratios["five_thousandths"] == pytest.approx(2 / 3)
    # inf / nan only on one side fail; the same ones on both sides do not
    with_inf = b.copy()
    with_inf[3] = np.inf
    assert compare_arrays(with_inf, b)["verdict"] == "No"
    assert compare_arrays(with_inf, with_inf)["verdict"] == "Yes"
    neg = with_inf.copy()
    neg[3] = -np.inf
    assert compare_arrays(neg, with_inf)["verdict"] == "No"


def _fake_dump(path, ops):
    """A dump with the given {(name, seqid): (order, inputs, outputs)}."""
    from torch_npu.utils.dump_file import DumpWriter, OpRecord, TensorRecord

    writer = DumpWriter(str(path), "data", device="cpu", background=False)
    for (name, seqid), (order, inputs, outputs) in ops.items():
        rec = OpRecord(name=name, seqid=seqid, op=f"aten::{name}", order=order, phase="forward", stack="m.py:1",
                       module="M", step=0)
        rec.inputs = [TensorRecord(dtype="torch.float32", shape=a.shape, data=a) for a in inputs]
        rec.outputs = [TensorRecord(dtype="torch.float32", shape=a.shape, data=a) for a in outputs]
        writer.put(rec)
    writer.close()


def test_root_cause_contamination_and_unmatched(tmp_path):
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    y, z = np.exp(x), np.exp(x) * 2
    golden = {("neg", 0): (0, [x], [-x]), ("exp", 0): (1, [x], [y]), ("mul", 0): (2, [y], [z]),
              ("abs", 0): (3, [x], [np.abs(x)]), ("tanh", 0): (4, [x], [np.tanh(x)])}
    wrong_y = y[::-1].copy()
    npu = {("neg", 0): (0, [x], [-x]), ("exp", 0): (1, [x], [wrong_y]), ("mul", 0): (2, [wrong_y], [wrong_y * 2]),
           ("abs", 0): (3, [x], [np.abs(x).reshape(8, 8)]), ("sin", 0): (4, [x], [np.sin(x)])}
    _fake_dump(tmp_path / "golden.h5", golden)
    _fake_dump(tmp_path / "npu.h5", npu)
    result = compare_files(str(tmp_path / "npu.h5"), str(tmp_path / "golden.h5"), out_dir=str(tmp_path / "out"),
                           progress=True)
    causes = {op.key: op.cause for op in result.ops}
    assert causes == {"neg/0": "", "exp/0": LIKELY_ROOT_CAUSE, "mul/0": CONTAMINATED, "abs/0": ""}
    abs_rows = [r for r in result.rows if r.npu_name == "abs/0/output/0"]
    assert abs_rows[0].verdict == "Unmatched" and abs_rows[0].message == "shapes differ"
    assert result.unmatched == ["sin/0 (only in the NPU dump)", "tanh/0 (only in the benchmark dump)"]
    summary = result.summary()
    assert "likely root cause: exp/0 (aten::exp, forward) at m.py:1 in M" in summary
    with open(result.csv_path) as f:
        rows = list(csv.reader(f))
    assert rows[0] == COLUMNS
    by_name = {r[0] or r[1]: dict(zip(COLUMNS, r)) for r in rows[1:]}
    assert by_name["exp/0/output/0"]["Accuracy Reached or Not"] == "No"
    assert by_name["exp/0/output/0"]["Root Cause"] == LIKELY_ROOT_CAUSE
    assert by_name["mul/0/input/0"]["Accuracy Reached or Not"] == "No"
    assert by_name["sin/0"]["Accuracy Reached or Not"] == "Unmatched"   # listed, not dropped
    assert by_name["tanh/0"]["Accuracy Reached or Not"] == "Unmatched"
    html = open(result.html_path).read()
    assert "<table>" in html and "likely root cause: exp/0" in html and "tanh/0" in html


def test_cli_and_console_script(tmp_path, capsys):
    from torch_npu.tools.accucmp.__main__ import main

    x = np.ones(4, dtype=np.float32)
    _fake_dump(tmp_path / "a.h5", {("exp", 0): (0, [x], [np.exp(x)])})
    _fake_dump(tmp_path / "b.h5", {("exp", 0): (0, [x], [np.exp(x) + 3])})
    assert main(["compare", "-m", str(tmp_path / "a.h5"), "-g", str(tmp_path / "b.h5"), "-o", str(tmp_path / "r")]) == 0
    assert "likely root cause: exp/0" in capsys.readouterr().out
    assert len([f for f in os.listdir(tmp_path / "r") if f.endswith((".csv", ".html"))]) == 2
    script = os.path.join(os.path.dirname(sys.executable), "msaccucmp")  # the installed console script
    bad = subprocess.run([script, "compare", "-m", str(tmp_path / "missing.h5"), "-g", str(tmp_path / "b.h5")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "msaccucmp: error: dump file" in bad.stderr and "does not exist" in bad.stderr


def test_compare_with_cpu_on_a_correct_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                                torch.nn.Dropout(0.2), torch.nn.Linear(16, 3))
    before = [p.detach().clone() for p in model.parameters()]
    report = compare_with_cpu(model, torch.randn(4, 8), loss_fn=lambda out: out.pow(2).mean())
    assert report.likely_root_cause is None, report.summary()
    names = {op.name for op in report.ops}
    assert {"addmm", "native_layer_norm", "gelu", "gelu_backward", "native_layer_norm_backward"} <= names
    assert any("native_dropout" in s and "random op" in s for s in report.not_compared)
    assert all(p.grad is None for p in model.parameters())  # the model itself is untouched
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.fixture(scope="module")
def wrong_op_package(tmp_path_factory):
    """The example custom op package with a wrong aclnnGelu, built once."""
    sys.path.insert(0, EXAMPLE)
    try:
        import build_package
    finally:
        sys.path.pop(0)
    out = tmp_path_factory.mktemp("opp")
    build_package.build(str(out))
    return str(out)


def _run(args, opp, cwd):
    env = dict(os.environ, ASCEND_CUSTOM_OPP_PATH=opp)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable] + args, capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_wrong_op_is_named_first(wrong_op_package, tmp_path, capsys):
    """The walk-through of docs/accuracy.md: dump on the CPU, replay on npu with the wrong aclnnGelu,
    compare; also without replay (errors spread) and with compare_with_cpu."""
    sys.path.insert(0, EXAMPLE)
    try:
        import find_wrong_op
    finally:
        sys.path.pop(0)
    find_wrong_op.main("cpu", str(tmp_path))  # the reference needs no package: in this process
    code = f"""
import sys, torch, torch_npu
sys.path.insert(0, {EXAMPLE!r})
import find_wrong_op
from torch_npu.tools.accuracy import compare_with_cpu
find_wrong_op.main("npu", {str(tmp_path)!r})
find_wrong_op.main("free", {str(tmp_path)!r})
model, x, target = find_wrong_op.make_model_and_data()
report = compare_with_cpu(model, x, lambda out: torch.nn.functional.cross_entropy(out, target.npu()))
print("FIRST", report.likely_root_cause.key, [op.key for op in report.root_causes])
"""
    out = _run(["-c", code], wrong_op_package, tmp_path)
    assert "FIRST gelu/0 ['gelu/0', 'gelu/1']" in out, out
    replayed = compare_files(str(tmp_path / "model_npu.h5"), str(tmp_path / "model_cpu.h5"), progress=False)
    first = replayed.likely_root_cause
    assert first is not None and first.key == "gelu/0" and first.module == "Sequential.0.act", replayed.summary()
    # With replay every op sees the CPU's inputs: only the two gelu calls fail, nothing is contaminated.
    assert [op.key for op in replayed.root_causes] == ["gelu/0", "gelu/1"]
    assert not [op for op in replayed.ops if op.cause == CONTAMINATED]
    free = compare_files(str(tmp_path / "model_npu_free.h5"), str(tmp_path / "model_cpu.h5"), progress=False)
    assert free.likely_root_cause.key == "gelu/0"
    assert len([op for op in free.ops if op.cause == CONTAMINATED]) > 5
    from torch_npu.tools.accucmp.__main__ import main

    capsys.readouterr()
    main(["compare", "-m", str(tmp_path / "model_npu.h5"), "-g", str(tmp_path / "model_cpu.h5"),
          "-o", str(tmp_path / "report")])
    assert "likely root cause: gelu/0 (aten::gelu, forward) at find_wrong_op.py:" in capsys.readouterr().out


def test_accuracy_cli_over_a_script(wrong_op_package, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(f"""
import sys, torch, torch_npu
sys.path.insert(0, {EXAMPLE!r})
from find_wrong_op import make_model_and_data, step
model, x, target = make_model_and_data()
step(model.npu(), x.npu(), target.npu())
""")
    out = _run(["-m", "torch_npu.tools.accuracy", "-o", str(tmp_path / "r"), str(script)], wrong_op_package, tmp_path)
    assert "likely root cause: gelu/0 (aten::gelu, forward) at find_wrong_op.py:" in out, out
    assert any(f.endswith(".html") for f in os.listdir(tmp_path / "r"))
