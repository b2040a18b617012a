"""Training throughput: small CNN and transformer steps/s on npu vs CPU eager, and optimizer-step time
of the NpuFused optimizers vs torch.optim on a model with many small parameters.

Run: .venv/bin/python bench/fused_optim.py [--steps 20]
"""

import argparse
import os
import statistics
import sys
import time

import torch

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples")
sys.path.insert(0, os.path.join(EXAMPLES, "imagenet"))
sys.path.insert(0, os.path.join(EXAMPLES, "gpt"))
import main as imagenet_main  # noqa: E402
import train_gpt  # noqa: E402


def model_throughput(steps):
    cnn = ["--arch", "resnet_tiny", "--epochs", "1", "--steps-per-epoch", str(steps), "--batch-size", "32",
           "--train-size", str(32 * steps), "--val-size", "32", "--print-freq", "0", "--no-progress"]
    gpt = ["--steps", str(steps), "--print-freq", "0", "--no-progress", "--sample", "0"]
    rows = []
    for name, run, args, unit, key in (
        ("resnet_tiny fp32", imagenet_main.run, cnn, "images/s", "images_per_sec"),
        ("resnet_tiny amp O2 bf16", imagenet_main.run,
         cnn + ["--amp", "--opt-level", "O2", "--amp-dtype", "bfloat16", "--loss-scale", "-1"], "images/s",
         "images_per_sec"),
        ("tiny GPT fp32", train_gpt.run, gpt, "tokens/s", "tokens_per_sec"),
        ("tiny GPT autocast fp16", train_gpt.run, gpt + ["--amp"], "tokens/s", "tokens_per_sec"),
    ):
        # Automatic mixed precision is an npu feature here; the CPU column runs the same settings.
        cpu = run(args + ["--device", "cpu"])[key]
        npu = run(args + ["--device", "npu"])[key]
        rows.append((name, cpu, npu, unit))
    return rows


def optimizer_step_ms(opt_cls, layers, repeats=20, **kwargs):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(layers)]).npu()
    opt = opt_cls(model.parameters(), **kwargs)
    model(torch.randn(4, 16, device="npu")).sum().backward()
    for _ in range(3):  # warm-up (the fused optimizers combine their buffers on the first step)
        opt.step()
    torch.npu.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        opt.step()
        torch.npu.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--layers", type=int, default=100, help="Linear layers in the optimizer benchmark")
    args = parser.parse_args()
    import torch_npu  # noqa: F401
    from torch_npu.optim import NpuFusedAdamW, NpuFusedSGD

    rows = model_throughput(args.steps)
    print(f"\n{'model':<26} {'cpu':>10} {'npu':>10}  unit       npu/cpu")
    for name, cpu, npu, unit in rows:
        print(f"{name:<26} {cpu:>10.1f} {npu:>10.1f}  {unit:<9} {npu / cpu:>7.2f}")
    print(f"\noptimizer.step() on npu, {args.layers} Linear(16, 16) layers ({2 * args.layers} parameters), ms:")
    for name, ref_cls, fused_cls, kwargs in (
        ("SGD momentum", torch.optim.SGD, NpuFusedSGD, dict(lr=0.1, momentum=0.9)),
        ("AdamW", torch.optim.AdamW, NpuFusedAdamW, dict(lr=1e-3)),
    ):
        ref = optimizer_step_ms(ref_cls, args.layers, **kwargs)
        ref_single = optimizer_step_ms(ref_cls, args.layers, foreach=False, **kwargs)
        fused = optimizer_step_ms(fused_cls, args.layers, **kwargs)
        print(f"  {name:<13} torch.optim foreach {ref:7.2f}   torch.optim per-tensor {ref_single:7.2f}   "
              f"NpuFused {fused:7.2f}")
    print(f"\ntorch {torch.__version__}, {torch.get_num_threads()} CPU threads")


if __name__ == "__main__":
    main()
