"""The demo's model (`make demo`: examples/imagenet resnet_tiny, 32x32 images, batch 32) on npu vs pristine
CPU eager, and CPU eager in a process after npu work vs pristine CPU eager.

Every run is a fresh process: the pristine CPU reference never imports torch_npu (autoload off), so
nothing of the npu (its stream workers' OpenMP teams, its allocator front) can touch it. Runs of the
three kinds alternate, so that a slow phase of a noisy machine hits each kind alike.
"""

import json
import os
import subprocess
import sys

from common import row, stats

SECTION = "demo"
TARGET_DEMO = 0.95  # npu images/s at least 0.95x pristine CPU eager's
TARGET_CPU_AFTER_NPU = 0.95  # CPU work after npu work within 5% of its pristine speed
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import json, os, sys
sys.path.insert(0, os.path.join({root!r}, "examples", "imagenet"))
import torch
mode, steps = sys.argv[1], int(sys.argv[2])
if mode != "cpu":
    import torch_npu
if mode == "cpu_after_npu":
    # One npu convolution forward and backward, as the issue that found the slowdown did.
    conv = torch.nn.Conv2d(3, 8, 3).npu()
    x = torch.randn(4, 3, 16, 16, device="npu", requires_grad=True)
    conv(x).sum().backward()
    torch.npu.synchronize()
import main as trainer
args = ["--arch", "resnet_tiny", "--epochs", "1", "--steps-per-epoch", str(steps), "--batch-size", "32",
        "--train-size", str(32 * steps), "--val-size", "32", "--print-freq", "0", "--no-progress", "--seed", "0",
        "--device", "npu" if mode == "npu" else "cpu"]
result = trainer.run(args)
print("RESULT " + json.dumps({{"images_per_sec": result["images_per_sec"]}}))
"""


def _one(mode: str, steps: int) -> float:
    env = dict(os.environ)
    if mode == "cpu":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # pristine: torch_npu is never imported
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(root=ROOT), mode, str(steps)], env=env,
                          capture_output=True, text=True, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])["images_per_sec"]
    raise RuntimeError(f"demo run ({mode}) failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def run(quick: bool = False) -> list:
    steps, repeats = (3, 1) if quick else (30, 5)
    samples = {"cpu": [], "npu": [], "cpu_after_npu": []}
    for _ in range(repeats):
        for mode in samples:
            samples[mode].append(_one(mode, steps))
    note = (f"{steps} steps per run, each run a fresh process ({repeats} of each kind, alternating); "
            "pristine CPU runs never import torch_npu")
    return [
        row(SECTION, "demo model (resnet_tiny, 32x32, batch 32), npu vs pristine CPU eager: images/s", "images/s",
            stats(samples["npu"]), stats(samples["cpu"]), ref_label="pristine CPU eager", higher_is_better=True,
            target=TARGET_DEMO, note=note, key=f"{SECTION}.npu_vs_cpu"),
        row(SECTION, "CPU eager after one npu convolution vs pristine CPU eager: images/s", "images/s",
            stats(samples["cpu_after_npu"]), stats(samples["cpu"]), ref_label="pristine CPU eager",
            higher_is_better=True, target=TARGET_CPU_AFTER_NPU, note=note, key=f"{SECTION}.cpu_after_npu"),
    ]


if __name__ == "__main__":
    from run import standalone
    standalone(run)
