"""Every script under examples/ runs on tiny sizes: the ImageNet-style trainer (ResNet, ShuffleNetV2
with each channel-shuffle form, amp, fused SGD, checkpoint resume), the GPT language model, ShuffleNetV2 on
the affinity library, and the `make demo` script. npu runs are compared with the same run on CPU."""

import importlib.util
import math
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples")
TINY = ["--epochs", "1", "--steps-per-epoch", "3", "--batch-size", "8", "--train-size", "32", "--val-size", "16",
        "--no-progress", "--print-freq", "1"]


def _load(relpath, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, relpath))
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(spec.origin))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    return module


@pytest.fixture(scope="module")
def imagenet_main():
    return _load("imagenet/main.py", "imagenet_main")


@pytest.fixture(scope="module")
def shufflenet():
    return _load("shufflenetv2/train_shufflenetv2.py", "train_shufflenetv2")


@pytest.fixture(scope="module")
def gpt():
    return _load("gpt/train_gpt.py", "train_gpt")


@pytest.mark.parametrize("arch,extra", [
    ("resnet_tiny", []),
    ("shufflenet_v2_tiny", ["--shuffle-impl", "index_select"]),
    ("shufflenet_v2_tiny", ["--shuffle-impl", "fused"]),
])
def test_imagenet_trainer_npu_matches_cpu(imagenet_main, arch, extra, capsys):
    npu = imagenet_main.run(TINY + ["--arch", arch, "--device", "npu"] + extra)
    # The CPU run uses the original channel shuffle: every rewrite must compute the same thing.
    cpu = imagenet_main.run(TINY + ["--arch", arch, "--device", "cpu"])
    assert len(npu["losses"]) == 3
    assert npu["losses"] == pytest.approx(cpu["losses"], rel=1e-5)
    assert npu["images_per_sec"] > 0
    out = capsys.readouterr().out
    assert "Epoch [0][  0/3] loss" in out and "img/s" in out


@pytest.mark.parametrize("amp_args", [
    ["--opt-level", "O1", "--loss-scale", "-1"],
    ["--opt-level", "O2", "--loss-scale", "128", "--combine-grad", "--optimizer", "npu_fused_sgd"],
])
def test_imagenet_trainer_amp_tracks_fp32(imagenet_main, amp_args):
    args = TINY + ["--arch", "resnet_tiny", "--device", "npu"]
    fp32 = imagenet_main.run(args)
    mixed = imagenet_main.run(args + ["--amp", "--amp-dtype", "bfloat16"] + amp_args)
    assert all(math.isfinite(v) for v in mixed["losses"])
    assert mixed["losses"] == pytest.approx(fp32["losses"], abs=0.05)


def test_imagenet_trainer_checkpoint_resume(imagenet_main, tmp_path, capsys):
    args = TINY + ["--arch", "resnet_tiny", "--device", "npu", "--amp", "--opt-level", "O2", "--amp-dtype",
                   "bfloat16", "--checkpoint-dir", str(tmp_path)]
    first = imagenet_main.run(args)
    assert os.path.isfile(first["checkpoint"]) and os.path.isfile(tmp_path / "model_best.pth.tar")
    resumed = imagenet_main.run(args + ["--epochs", "2", "--resume", first["checkpoint"]])
    assert "=> loaded checkpoint" in capsys.readouterr().out
    assert len(resumed["losses"]) == 3  # only the second epoch ran
    with pytest.raises(SystemExit, match="no checkpoint"):
        imagenet_main.run(args + ["--resume", str(tmp_path / "missing.pth")])


def test_gpt_npu_matches_cpu_and_amp_trains(gpt, capsys):
    tiny = ["--steps", "4", "--batch-size", "4", "--block-size", "16", "--embed", "32", "--heads", "2",
            "--layers", "1", "--no-progress", "--print-freq", "1", "--sample", "20"]
    npu = gpt.run(tiny + ["--device", "npu"])
    cpu = gpt.run(tiny + ["--device", "cpu"])
    assert npu["losses"] == pytest.approx(cpu["losses"], rel=1e-5)
    assert npu["sample"] == cpu["sample"] and len(npu["sample"]) == 21
    mixed = gpt.run(tiny + ["--device", "npu", "--amp", "--optimizer", "npu_fused_adamw"])
    assert mixed["losses"] == pytest.approx(cpu["losses"], abs=0.05)
    assert "tokens/s" in capsys.readouterr().out


def test_shufflenetv2_affinity_modules_match_the_plain_network(shufflenet, capsys):
    tiny = ["--steps", "3", "--batch-size", "8", "--print-freq", "1"]
    affinity = shufflenet.run(tiny + ["--device", "npu"])  # ChannelShuffle, Prefetcher, LabelSmoothingCrossEntropy
    plain = shufflenet.run(tiny + ["--device", "cpu", "--plain"])
    assert len(affinity["losses"]) == 3
    assert affinity["losses"] == pytest.approx(plain["losses"], rel=1e-5)
    out = capsys.readouterr().out
    assert "affinity ShuffleNetV2-tiny on npu" in out and "plain ShuffleNetV2-tiny on cpu" in out


def test_make_demo_script_runs():
    env = dict(os.environ, TRAIN_DEMO_STEPS="4")
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, "train_demo.py")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "npu and cpu loss curves agree" in proc.stdout
    assert "throughput ratio npu/cpu" in proc.stdout


def test_imagenet_trainer_multi_device_hccl():
    """Seed 003's multi-device path: one process per device of --device-list, DDP over hccl, a
    DistributedSampler with drop_last; DDP keeps the two replicas identical."""
    from dist_launch import base_env, free_port, run_processes

    argv = [sys.executable, os.path.join(EXAMPLES, "imagenet", "main.py"), "--multiprocessing-distributed",
            "--device-list", "0,1", "--dist-backend", "hccl", "--world-size", "1", "--rank", "0", "--addr",
            "127.0.0.1", "--port", str(free_port()), "--arch", "resnet_tiny", "--epochs", "1", "--steps-per-epoch", "3",
            "--batch-size", "16", "--train-size", "64", "--val-size", "32", "--no-progress", "--print-freq", "1"]
    (proc,) = run_processes([(argv, base_env())], timeout=300)
    assert proc.returncode == 0, repr(proc)
    lines = [line for line in proc.out.splitlines() if " parameter checksum " in line]
    assert len(lines) == 2 and {line.split()[1] for line in lines} == {"0/2", "1/2"}, proc.out
    checksums = {line.rsplit(" ", 1)[1] for line in lines}
    assert len(checksums) == 1, lines
    assert "trained 3 steps on npu:0" in proc.out
