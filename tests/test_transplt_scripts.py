"""CUDA training scripts of the kinds users bring (tests/transplt_fixtures/): the original runs on the CPU here
(no CUDA), its converted form and the original under transfer_to_npu run on npu, and the losses match."""

import contextlib
import importlib
import io
import json
import os
import runpy
import shutil
import subprocess
import sys

import pytest
import torch

from torch_npu.tools.transplt.cli import main as transplt

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transplt_fixtures")


def _run(script, *args, transfer=False):
    """Run a script in this process as `python script args` from its directory; returns its JSON result line."""
    saved = (sys.argv[:], sys.path[:], os.getcwd(), set(sys.modules))
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(script))
    os.chdir(os.path.dirname(script))
    t = importlib.import_module("torch_npu.contrib.transfer_to_npu") if transfer else None
    if t:
        t.apply()
    out = io.StringIO()
    # Scripts set cuDNN flags, which PyTorch's test utilities (imported by other tests) freeze in this process.
    allow_flags = getattr(torch.backends, "__allow_nonbracketed_mutation")
    benchmark = torch.backends.cudnn.benchmark
    try:
        with contextlib.redirect_stdout(out), allow_flags():
            runpy.run_path(script, run_name="__main__")
    finally:
        if t:
            t.undo()
        with allow_flags():
            torch.backends.cudnn.benchmark = benchmark
        sys.argv, sys.path[:] = saved[0], saved[1]
        os.chdir(saved[2])
        for name in set(sys.modules) - saved[3]:
            if name.split(".")[0] == "mylib":
                del sys.modules[name]
    return json.loads(out.getvalue().strip().splitlines()[-1])


def _fixture(tmp_path, name):
    return shutil.copytree(os.path.join(FIXTURES, name), tmp_path / name)


def _convert(src, out, *args):
    assert transplt(["-i", str(src), "-o", str(out), "--no-progress", *args]) == 0
    return out / (os.path.basename(src) + ("_msft_multi" if "distributed" in args else "_msft"))


def test_imagenet_ddp_amp_script(tmp_path):
    src = _fixture(tmp_path, "imagenet_ddp_amp")
    cpu = _run(str(src / "main.py"))
    assert cpu["device"] == "cpu" and not cpu["accelerated"]
    out = _convert(src, tmp_path / "out")
    converted = (out / "main.py").read_text()
    # The DDP / NCCL path is rewritten for hccl and npu devices.
    for expected in ('parser.add_argument("--dist-backend", default="hccl", type=str)',
                     "torch.npu.set_device(args.gpu)", "model.npu(args.gpu)",
                     "DistributedDataParallel(model, device_ids=[args.gpu])", 'torch.device("npu:{}".format(',
                     "torch.npu.amp.GradScaler(", "with torch.npu.amp.autocast(", "import torch_npu\n"):
        assert expected in converted, expected
    manual = [r for r in (out / "change_list.csv").read_text().splitlines() if ",Manual," in r]
    assert any("cuDNN flags" in r for r in manual)
    npu = _run(str(out / "main.py"))
    assert npu["device"] == "npu" and npu["accelerated"]
    assert npu["losses"] == pytest.approx(cpu["losses"], rel=1e-5)
    mixed = _run(str(out / "main.py"), "--amp")
    assert mixed["losses"] == pytest.approx(cpu["losses"], abs=0.02)
    # The unconverted script under transfer_to_npu: the same losses, on npu.
    moved = _run(str(src / "main.py"), transfer=True)
    assert moved["accelerated"] and moved["losses"] == pytest.approx(cpu["losses"], rel=1e-5)


def test_gpt_script_and_its_distributed_form(tmp_path):
    src = _fixture(tmp_path, "gpt_lm")
    cpu = _run(str(src / "train.py"))
    out = _convert(src, tmp_path / "out")
    npu = _run(str(out / "train.py"))
    assert npu["device"] == "npu" and npu["losses"] == pytest.approx(cpu["losses"], rel=1e-5)
    ops = (out / "unsupported_op.csv").read_text()
    assert "torch.tril,aten::tril" in ops
    multi = _convert(src, tmp_path / "out", "distributed", "-m", "train.py", "-t", "model")
    text = (multi / "train.py").read_text()
    assert "model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[MSFT_LOCAL_RANK])" in text
    assert _run(str(multi / "train.py"))["losses"] == pytest.approx(cpu["losses"], rel=1e-5)
    torch.npu.set_device(0)


def test_custom_rules_script(tmp_path):
    src = _fixture(tmp_path, "custom_rules")
    cpu = _run(str(src / "train.py"))
    assert cpu["backend"] == "cpu-kernels/2"
    # transfer_to_npu cannot reach into the project's CUDA kernel library; the rules can.
    with pytest.raises(RuntimeError, match="needs its CUDA build"):
        _run(str(src / "train.py"), transfer=True)
    out = _convert(src, tmp_path / "out", "-r", str(src / "rules.json"))
    text = (out / "train.py").read_text()
    assert "from mylib.npu_kernels import fused_bias_gelu\n" in text and 'mylib.setup("npu", 2)' in text
    npu = _run(str(out / "train.py"))
    assert npu["backend"] == "npu-kernels/2"
    assert npu["losses"] == pytest.approx(cpu["losses"], rel=1e-5)


def test_launcher_runs_the_converted_script(tmp_path):
    src = _fixture(tmp_path, "gpt_lm")
    multi = _convert(src, tmp_path / "out", "distributed", "-m", "train.py")
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_TRANSFER_TO_NPU", "PYTHONPATH")}
    env.update(NPUS="1", PYTHON=sys.executable, MASTER_PORT="29731")
    proc = subprocess.run(["bash", str(multi / "run_distributed_npu.sh"), "--steps", "2"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["device"] == "npu" and len(result["losses"]) == 2
