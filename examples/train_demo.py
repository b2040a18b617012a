"""`make demo`: train the ImageNet-style ResNet (examples/imagenet/main.py) on the software NPU and on
the CPU from the same seed for the same steps, print both loss curves side by side (they must agree),
an npu run with apex-style O2 mixed precision next to them, and the npu/cpu throughput ratio.
"""

import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "imagenet"))
import main as imagenet_main  # noqa: E402

STEPS = int(os.environ.get("TRAIN_DEMO_STEPS", "30"))  # CI runs it with a few steps
COMMON = ["--arch", "resnet_tiny", "--epochs", "1", "--steps-per-epoch", str(STEPS), "--batch-size", "32",
          "--train-size", str(32 * STEPS), "--val-size", "64", "--print-freq", "0", "--no-progress", "--seed", "0"]
FP32_TOLERANCE = 1e-3  # npu runs the same float32 math as the CPU: the curves agree to rounding
AMP_TOLERANCE = 0.1    # bfloat16 compute with float32 master weights tracks the float32 curve closely


def main():
    import torch
    import torch_npu  # noqa: F401  (also loaded automatically by `import torch`)

    # With NPU_SIM_STRICT=1 ops without a named device op run on the CPU and warn once each.
    warnings.filterwarnings("ignore", message=".*is not supported on npu")

    print(f"training resnet_tiny on synthetic 32x32 images, {STEPS} steps of 32, seed 0 "
          f"(torch {torch.__version__}, {torch.get_num_threads()} CPU threads)\n")
    print("-- cpu, float32");               cpu = imagenet_main.run(COMMON + ["--device", "cpu"])  # noqa: E702
    print("-- npu, float32");               npu = imagenet_main.run(COMMON + ["--device", "npu"])  # noqa: E702
    # bfloat16: the software NPU runs CPU kernels, and the CPU's float16 convolution is a slow
    # reference loop (about 80x slower than float32) while its bfloat16 one is fast.
    print("-- npu, amp O2 in bfloat16 (dynamic loss scale, combined grads, NpuFusedSGD)")
    npu_amp = imagenet_main.run(COMMON + ["--device", "npu", "--amp", "--opt-level", "O2", "--loss-scale", "-1",
                                          "--amp-dtype", "bfloat16", "--combine-grad", "--optimizer", "npu_fused_sgd"])

    print(f"\n{'step':>4}  {'cpu fp32':>10}  {'npu fp32':>10}  {'npu amp O2':>10}")
    for step, (c, n, a) in enumerate(zip(cpu["losses"], npu["losses"], npu_amp["losses"])):
        print(f"{step:>4}  {c:>10.5f}  {n:>10.5f}  {a:>10.5f}")
    fp32_diff = max(abs(c - n) for c, n in zip(cpu["losses"], npu["losses"]))
    amp_diff = max(abs(c - a) for c, a in zip(cpu["losses"], npu_amp["losses"]))
    print(f"\nmax |cpu - npu| loss difference (float32): {fp32_diff:.2e} (tolerance {FP32_TOLERANCE:g})")
    print(f"max |cpu - npu amp O2| loss difference:     {amp_diff:.2e} (tolerance {AMP_TOLERANCE:g})")
    print(f"throughput: cpu {cpu['images_per_sec']:.1f} images/s, npu {npu['images_per_sec']:.1f} images/s, "
          f"npu amp O2 {npu_amp['images_per_sec']:.1f} images/s")
    # The software NPU runs the same CPU kernels, asynchronously on a stream worker thread (host work
    # overlaps kernels, plus copy and launch costs): the ratio says how the simulator compares with
    # CPU eager on this machine and load, not how NPU hardware would.
    print(f"throughput ratio npu/cpu = {npu['images_per_sec'] / cpu['images_per_sec']:.2f} "
          f"(software NPU vs CPU eager with {torch.get_num_threads()} threads)")
    print(f"peak npu memory allocated: {torch.npu.max_memory_allocated() / 2**20:.1f} MiB")
    if len(cpu["losses"]) != STEPS or len(npu["losses"]) != STEPS:
        raise SystemExit("a run stopped early")
    if fp32_diff > FP32_TOLERANCE:
        raise SystemExit("npu and cpu loss curves disagree")
    if amp_diff > AMP_TOLERANCE:
        raise SystemExit("the amp O2 loss curve strays from the float32 one")
    print("npu and cpu loss curves agree.")


if __name__ == "__main__":
    main()
