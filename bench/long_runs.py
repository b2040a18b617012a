"""Long runs: a 10k-step training loop keeps device memory at its baseline and host RSS within 1% after
warm-up; 100k stream/event create/destroy cycles leak no host memory, device memory or threads.

The figures are growths from the state after warm-up to the end of the run; the note of the RSS row gives
the same loop's growth on CPU eager (what PyTorch itself drifts by in the same process)."""

import ctypes
import gc
import os
import threading

import torch

from common import row, stats

SECTION = "long_runs"
TARGET_RSS_GROWTH_PCT = 1.0


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def os_threads() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def _settle(device: str) -> None:
    gc.collect()
    if device == "npu":
        torch.npu.synchronize()


def training_loop(device: str, steps: int, warmup: int) -> dict:
    """Trains a small MLP for `steps` steps; memory and threads after `warmup` steps and at the end."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(32, 128, device=device)
    y = torch.randint(0, 10, (32,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()
    out = {}
    for i in range(steps):
        if i == warmup:
            _settle(device)
            out["rss_warm"] = rss_bytes()
            out["threads_warm"] = os_threads()
            if device == "npu":
                out["allocated_warm"] = torch.npu.memory_allocated()
                out["reserved_warm"] = torch.npu.memory_reserved()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if i % 100 == 0:
            loss.item()  # a sync now and then, as a training loop logging its loss does
    _settle(device)
    out["rss_end"] = rss_bytes()
    out["threads_end"] = os_threads()
    if device == "npu":
        out["allocated_end"] = torch.npu.memory_allocated()
        out["reserved_end"] = torch.npu.memory_reserved()
    out["rss_growth_pct"] = 100.0 * (out["rss_end"] - out["rss_warm"]) / out["rss_warm"]
    return out


def _runtime():
    import torch_npu

    lib = os.path.join(os.path.dirname(torch_npu.__file__), "lib", "libnpu_runtime.so")
    rt = ctypes.CDLL(lib)
    for name in ("nrtStreamCreate", "nrtStreamDestroy", "nrtEventCreate", "nrtEventDestroy", "nrtEventRecord",
                 "nrtStreamSynchronize", "nrtMemGetInfo"):
        getattr(rt, name).restype = ctypes.c_int
    return rt


def stream_event_cycles(cycles: int, warmup: int) -> dict:
    """Creates a runtime stream (a worker thread) and an event, records the event on the stream,
    synchronises, destroys both; `cycles` times. Plus torch.npu.Event create/record/destroy."""
    rt = _runtime()
    stream, event = ctypes.c_void_p(), ctypes.c_void_p()
    free_bytes, total = ctypes.c_size_t(), ctypes.c_size_t()

    def cycle():
        codes = (rt.nrtStreamCreate(ctypes.byref(stream)), rt.nrtEventCreate(ctypes.byref(event)),
                 rt.nrtEventRecord(event, stream), rt.nrtStreamSynchronize(stream),
                 rt.nrtEventDestroy(event), rt.nrtStreamDestroy(stream))
        if any(codes):
            raise RuntimeError(f"stream/event cycle failed: {codes}")
        e = torch.npu.Event()
        e.record()
        e.synchronize()

    out = {}
    for i in range(cycles):
        if i == warmup:
            _settle("npu")
            rt.nrtMemGetInfo(ctypes.byref(free_bytes), ctypes.byref(total))
            out.update(rss_warm=rss_bytes(), threads_warm=os_threads(), free_warm=free_bytes.value)
        cycle()
    _settle("npu")
    rt.nrtMemGetInfo(ctypes.byref(free_bytes), ctypes.byref(total))
    out.update(rss_end=rss_bytes(), threads_end=os_threads(), free_end=free_bytes.value)
    out["rss_growth_pct"] = 100.0 * (out["rss_end"] - out["rss_warm"]) / out["rss_warm"]
    return out


def run(quick: bool = False) -> list:
    steps, cycles = (300, 2000) if quick else (10_000, 100_000)
    npu = training_loop("npu", steps, warmup=steps // 10)
    cpu = training_loop("cpu", steps, warmup=steps // 10)
    cyc = stream_event_cycles(cycles, warmup=cycles // 100)
    one = lambda v: stats([v])  # noqa: E731
    mib = 2**20
    return [
        row(SECTION, f"training {steps} steps: device memory allocated growth after warm-up", "bytes",
            one(npu["allocated_end"] - npu["allocated_warm"]), ratio=npu["allocated_end"] - npu["allocated_warm"],
            target=0, note=f"{npu['allocated_warm'] / mib:.2f} MiB at warm-up"),
        row(SECTION, f"training {steps} steps: device memory reserved growth after warm-up", "bytes",
            one(npu["reserved_end"] - npu["reserved_warm"]), ratio=npu["reserved_end"] - npu["reserved_warm"],
            target=0, note=f"{npu['reserved_warm'] / mib:.2f} MiB at warm-up"),
        # The growth itself is the figure (a ratio to the CPU run's near-zero growth would mean nothing).
        row(SECTION, f"training {steps} steps: host RSS growth after warm-up (%)", "%", one(npu["rss_growth_pct"]),
            ratio=npu["rss_growth_pct"], target=TARGET_RSS_GROWTH_PCT,
            note=f"npu {npu['rss_warm'] / mib:.0f} -> {npu['rss_end'] / mib:.0f} MiB; the same loop on CPU eager: "
                 f"{cpu['rss_growth_pct']:+.2f}%"),
        row(SECTION, f"training {steps} steps: OS threads added after warm-up", "count",
            one(npu["threads_end"] - npu["threads_warm"]), ratio=npu["threads_end"] - npu["threads_warm"], target=0),
        row(SECTION, f"{cycles} stream+event create/record/destroy cycles: host RSS growth (%)", "%",
            one(cyc["rss_growth_pct"]), ratio=cyc["rss_growth_pct"], target=TARGET_RSS_GROWTH_PCT,
            note=f"{cyc['rss_warm'] / mib:.0f} -> {cyc['rss_end'] / mib:.0f} MiB; runtime streams (one worker "
                 f"thread each) and events, plus torch.npu.Event"),
        row(SECTION, f"{cycles} stream+event cycles: device memory growth", "bytes",
            one(cyc["free_warm"] - cyc["free_end"]), ratio=cyc["free_warm"] - cyc["free_end"], target=0),
        row(SECTION, f"{cycles} stream+event cycles: OS threads added", "count",
            one(cyc["threads_end"] - cyc["threads_warm"]), ratio=cyc["threads_end"] - cyc["threads_warm"],
            target=0, note=f"{cyc['threads_end']} threads at the end; Python threads: {threading.active_count()}"),
    ]


if __name__ == "__main__":
    from run import standalone
    standalone(run)
