"""Copies: H2D (pageable and pinned), D2H (pageable and pinned) and D2D bandwidth vs a plain host memcpy, on a
quiet host and with every core busy with other processes."""

import os
import subprocess
import sys

import numpy as np
import torch

from common import interleaved, row, stats

SECTION = "copies"
TARGET_RATIO = 0.8  # npu copy bandwidth at least 0.8x a plain memcpy of the same size
# With the cores taken by other processes a copy gets its share of a core, as the memcpy does; its helper threads
# must not make it wait for them (a copy that waited a scheduler time slice per call ran at 0.006x).
TARGET_BUSY_RATIO = 0.5


def _gbps(nbytes: int, samples) -> dict:
    return stats(nbytes / s / 1e9 for s in samples)


def _size_label(nbytes: int) -> str:
    return f"{nbytes >> 20} MB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KB"


def _rows_for_size(nbytes: int, repeats: int, copies_per_sample: int) -> list:
    n = nbytes // 4
    host = torch.randn(n)
    pinned = host.pin_memory()
    host_out = torch.empty(n)
    pinned_out = torch.empty(n).pin_memory()
    dev = host.to("npu")
    dev_out = torch.empty(n, device="npu")
    # The reference: numpy.copyto between two preallocated host buffers is a single memcpy.
    ref_src, ref_dst = host.numpy().copy(), np.empty(n, dtype=np.float32)

    copies = {
        "H2D pageable": (lambda: dev_out.copy_(host), "npu"),
        "H2D pinned, non_blocking": (lambda: dev_out.copy_(pinned, non_blocking=True), "npu"),
        "D2H pageable": (lambda: host_out.copy_(dev), "npu"),
        "D2H pinned, non_blocking": (lambda: pinned_out.copy_(dev, non_blocking=True), "npu"),
        "D2D": (lambda: dev_out.copy_(dev), "npu"),
    }
    memcpy = (lambda: np.copyto(ref_dst, ref_src), "cpu", copies_per_sample)
    cases = [memcpy] + [(fn, device, copies_per_sample) for fn, device in copies.values()]
    ref, *measured = interleaved(cases, repeats, warmup=3)
    ref_stats = _gbps(nbytes, ref)
    label = _size_label(nbytes)
    return [row(SECTION, f"{name} {label}: GB/s", "GB/s", _gbps(nbytes, samples), ref_stats,
                ref_label="host memcpy", higher_is_better=True, target=TARGET_RATIO,
                key=f"{SECTION}.{name.split(',')[0].replace(' ', '_')}_{label.replace(' ', '')}")
            for name, samples in zip(copies, measured)]


def _busy_host_rows(repeats: int, copies_per_sample: int) -> list:
    """1 MB pageable copies vs memcpy while one busy process per core competes for the CPU."""
    nbytes = 1 << 20
    n = nbytes // 4
    host, host_out = torch.randn(n), torch.empty(n)
    dev, dev_out = host.to("npu"), torch.empty(n, device="npu")
    ref_src, ref_dst = host.numpy().copy(), np.empty(n, dtype=np.float32)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        ref, h2d, d2h = interleaved([(lambda: np.copyto(ref_dst, ref_src), "cpu", copies_per_sample),
                                     (lambda: dev_out.copy_(host), "npu", copies_per_sample),
                                     (lambda: host_out.copy_(dev), "npu", copies_per_sample)], repeats, warmup=3,
                                    quiesce_all=True)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    note = f"{os.cpu_count()} busy processes (one per core) run beside both sides"
    ref_stats = _gbps(nbytes, ref)
    return [row(SECTION, f"{name} 1 MB, every core busy: GB/s", "GB/s", _gbps(nbytes, samples), ref_stats,
                ref_label="host memcpy, cores busy", higher_is_better=True, target=TARGET_BUSY_RATIO, note=note,
                key=f"{SECTION}.{name.replace(' ', '_')}_1MB_busy")
            for name, samples in (("H2D pageable", h2d), ("D2H pageable", d2h))]


def run(quick: bool = False) -> list:
    if quick:
        plan = [(1 << 20, 2, 5), (4 << 20, 2, 2)]
    else:
        # 1 MB copies are dominated by per-copy cost, so a sample is 200 of them and one sync.
        plan = [(1 << 20, 7, 200), (256 << 20, 5, 2)]
    rows = []
    for nbytes, repeats, per_sample in plan:
        rows += _rows_for_size(nbytes, repeats, per_sample)
        torch.npu.empty_cache()
    # Under load a sample must span many scheduler time slices (500 copies take ~50 ms), or it measures
    # where the slices happened to fall; and every side starts its samples alike (quiesce_all): with
    # only the CPU side starting after quiesce()'s sleep, it alone got a woken task's head start.
    rows += _busy_host_rows(2, 5) if quick else _busy_host_rows(5, 500)
    return rows


if __name__ == "__main__":
    from run import standalone
    standalone(run)
