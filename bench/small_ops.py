"""Small-op host cost: N tiny ops launched back to back, one sync at the end, npu vs CPU eager.

Prints per-op microseconds for each op on both devices and the npu/CPU ratio (lower is better; the
target is <= 1.3). Run: .venv/bin/python bench/small_ops.py [--iters 10000] [--repeats 5]
"""

import argparse
import statistics
import time

import torch


def per_op_us(fn, device, iters, repeats):
    a = torch.randn(16, device=device)
    b = torch.randn(16, device=device)
    for _ in range(200):  # warm-up: allocator, Meta caches, stream threads
        fn(a, b)
    sync = torch.npu.synchronize if device == "npu" else (lambda: None)
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iters):
            fn(a, b)
        sync()
        times.append((time.perf_counter() - start) / iters * 1e6)
    return statistics.median(times), min(times), max(times)


def round_trip_us(repeats=2000):
    x = torch.randn(16, device="npu")
    torch.npu.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        (x + 1).cpu()
    return (time.perf_counter() - start) / repeats * 1e6


OPS = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "relu": lambda a, b: torch.relu(a),
    "cumsum (generic)": lambda a, b: torch.cumsum(a, 0),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iters", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import torch_npu  # noqa: F401

    print(f"torch {torch.__version__}, {args.iters} ops x {args.repeats} repeats, median (min..max)")
    print(f"{'op':<18}{'cpu us/op':>20}{'npu us/op':>20}{'npu/cpu':>9}")
    for name, fn in OPS.items():
        cpu = per_op_us(fn, "cpu", args.iters, args.repeats)
        npu = per_op_us(fn, "npu", args.iters, args.repeats)
        print(f"{name:<18}{cpu[0]:>8.2f} ({cpu[1]:.2f}..{cpu[2]:.2f}){npu[0]:>8.2f} "
              f"({npu[1]:.2f}..{npu[2]:.2f}){npu[0] / cpu[0]:>9.2f}")
    print(f"launch + sync round trip (add then .cpu()): {round_trip_us():.1f} us")


if __name__ == "__main__":
    main()
