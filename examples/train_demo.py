"""Train a small classifier on the software NPU and on the CPU from the same seed; print both curves.

Run with `make demo`. Every op runs on `npu` (named kernels or the CPU fallback) with npu semantics:
separate device memory, streams, and a per-device random generator.
"""

import time
import warnings

import torch
import torch.nn as nn


def make_data(n=512, features=20, classes=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    w = torch.randn(features, classes, generator=g)
    y = (x @ w + 0.1 * torch.randn(n, classes, generator=g)).argmax(dim=1)
    return x, y


def train(device, steps=60, batch=64):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = make_data()
    x, y = x.to(device), y.to(device)
    losses = []
    start = time.perf_counter()
    for step in range(steps):
        i = (step * batch) % x.shape[0]
        xb, yb = x[i:i + batch], y[i:i + batch]
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    elapsed = time.perf_counter() - start
    return losses, steps / elapsed


def main():
    import torch_npu  # noqa: F401  (also loaded automatically by `import torch`)

    # Ops without an npu kernel yet run through the CPU fallback, which warns once per op.
    warnings.filterwarnings("ignore", message=".*is not supported on npu")

    cpu_losses, cpu_rate = train("cpu")
    npu_losses, npu_rate = train("npu")
    print(f"{'step':>4}  {'cpu loss':>10}  {'npu loss':>10}")
    for step in range(0, len(cpu_losses), 5):
        print(f"{step:>4}  {cpu_losses[step]:>10.5f}  {npu_losses[step]:>10.5f}")
    worst = max(abs(a - b) for a, b in zip(cpu_losses, npu_losses))
    print(f"max |cpu - npu| loss difference: {worst:.2e}")
    print(f"throughput: cpu {cpu_rate:.1f} steps/s, npu {npu_rate:.1f} steps/s "
          f"(npu/cpu = {npu_rate / cpu_rate:.2f})")
    if worst > 1e-3:
        raise SystemExit("npu and cpu loss curves disagree")
    print(f"peak npu memory allocated: {torch.npu.max_memory_allocated() / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
