"""Distributed: all_reduce bus bandwidth over hccl against Gloo on CPU tensors (2 ranks, the same
processes, nccl-tests' definition), and DDP steps/s of the training benchmark's CNN with 1 and 2 ranks.

The section starts its ranks as subprocesses (this file with --worker); rank 0 prints its samples as
one JSON line that the section turns into rows.
"""

import json
import os
import socket
import subprocess
import sys
import time

SECTION = "distributed"
TARGET_RATIO = 0.9  # hccl bus bandwidth at least 0.9x Gloo's on CPU tensors, from 1 MB up
HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]
QUICK_SIZES = [4 << 10, 64 << 10, 1 << 20]


def _label(size: int) -> str:
    return f"{size >> 20} MB" if size >= 1 << 20 else f"{size >> 10} KB"


def _iters(size: int) -> int:
    """Back-to-back all_reduces per timed sample: ~32 MB moved, between 2 and 200 calls."""
    return max(2, min(200, (32 << 20) // size))


# ---------------------------------------------------------------- worker (one rank)

def _bandwidth(sizes, repeats):
    import torch
    import torch.distributed as dist

    gloo = dist.new_group(backend="gloo")
    dev = torch.device("npu", torch.npu.current_device())
    out = {}
    for size in sizes:
        n = size // 4
        npu_t, cpu_t = torch.ones(n, device=dev), torch.ones(n)
        iters = _iters(size)

        def hccl_sample():
            dist.barrier()  # both ranks start together
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(npu_t)
            torch.npu.synchronize()
            return (time.perf_counter() - start) / iters

        def gloo_sample():
            dist.barrier(group=gloo)
            start = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(cpu_t, group=gloo)
            return (time.perf_counter() - start) / iters

        hccl_sample(), gloo_sample()  # warm-up
        samples = {"hccl": [], "gloo": []}
        for _ in range(repeats):  # alternate, so machine noise hits both alike
            samples["hccl"].append(hccl_sample())
            samples["gloo"].append(gloo_sample())
        out[size] = samples
        del npu_t, cpu_t
    return out


def _ddp_steps(quick, repeats, with_plain):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from models import cnn_setup

    dev = f"npu:{torch.npu.current_device()}"
    steps = 2 if quick else 8

    def window(step):
        def run():
            dist.barrier()
            start = time.perf_counter()
            loss = None
            for _ in range(steps):
                loss = step()
            loss.item()
            return steps / (time.perf_counter() - start)
        return run

    model, opt, _ = cnn_setup(dev, quick)
    ddp = DDP(model, device_ids=[torch.npu.current_device()])
    _, _, ddp_step = _setup_step(ddp, opt, dev, quick)
    cases = {"ddp": window(ddp_step)}
    if with_plain:
        _, _, plain_step = cnn_setup(dev, quick)
        cases["plain"] = window(plain_step)
    for fn in cases.values():
        fn()
    samples = {k: [] for k in cases}
    for _ in range(repeats):
        for k, fn in cases.items():
            samples[k].append(fn())
    return samples


def _setup_step(model, opt, dev, quick):
    """The training benchmark's CNN step (models.cnn_setup) for an already built (DDP) model."""
    import torch
    import torch.nn.functional as F

    batch, size = (4, 16) if quick else (16, 32)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 3, size, size, generator=gen).to(dev)
    y = torch.randint(0, 10, (batch,), generator=gen).to(dev)

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return model, opt, step


def worker(task: str, quick: bool) -> None:
    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    torch.npu.set_device(rank)
    dist.init_process_group("hccl")
    repeats = 3 if quick else 7
    if task == "bandwidth":
        result = {str(k): v for k, v in _bandwidth(QUICK_SIZES if quick else SIZES, repeats).items()}
    else:
        result = _ddp_steps(quick, repeats, with_plain=dist.get_world_size() == 1)
    if rank == 0:
        print("BENCH_RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


# ---------------------------------------------------------------- section (parent)

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(task: str, world: int, quick: bool) -> dict:
    port = _free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        argv = [sys.executable, os.path.abspath(__file__), "--worker", task] + (["--quick"] if quick else [])
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=1800))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outputs):
        if p.returncode != 0:
            raise RuntimeError(f"distributed benchmark rank failed ({task}, world {world}):\n{out}\n{err}")
    line = next(line for line in outputs[0][0].splitlines() if line.startswith("BENCH_RESULT "))
    return json.loads(line[len("BENCH_RESULT "):])


def run(quick: bool = False) -> list:
    from common import row, stats

    rows = []
    bandwidth = _launch("bandwidth", 2, quick)
    for size in (QUICK_SIZES if quick else SIZES):
        s = bandwidth[str(size)]
        # nccl-tests' bus bandwidth of all_reduce: size / time * 2 (n - 1) / n; n = 2 makes the factor 1.
        busbw = lambda samples: stats(size / t / 1e9 for t in samples)  # noqa: E731
        rows.append(row(SECTION, f"all_reduce {_label(size)}, 2 ranks: bus bandwidth", "GB/s",
                        busbw(s["hccl"]), busbw(s["gloo"]), ref_label="Gloo, CPU tensors", higher_is_better=True,
                        target=TARGET_RATIO if size >= 1 << 20 else None,
                        key=f"{SECTION}.all_reduce_{_label(size).replace(' ', '')}"))
    one = _launch("ddp", 1, quick)
    rows.append(row(SECTION, "DDP CNN, 1 rank: steps/s", "steps/s", stats(one["ddp"]), stats(one["plain"]),
                    ref_label="same model without DDP", higher_is_better=True, key=f"{SECTION}.ddp_1rank",
                    note="DDP's own cost: bucketing, an all_reduce of a 1-rank group, hooks"))
    two = _launch("ddp", 2, quick)
    rows.append(row(SECTION, "DDP CNN, 2 ranks: steps/s (per rank batch as 1 rank)", "steps/s", stats(two["ddp"]),
                    stats(one["ddp"]), ref_label="DDP, 1 rank", higher_is_better=True, key=f"{SECTION}.ddp_2ranks",
                    note="weak scaling: twice the samples per step; both ranks share this machine's cores"))
    return rows


if __name__ == "__main__":
    if "--worker" in sys.argv:
        sys.path.insert(0, HERE)
        worker(sys.argv[sys.argv.index("--worker") + 1], "--quick" in sys.argv)
    else:
        sys.path.insert(0, HERE)
        from run import standalone

        standalone(run)
