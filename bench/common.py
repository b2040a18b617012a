"""Shared pieces of the benchmark suite: synchronised timing, repeat statistics and result rows."""

import ctypes
import math
import statistics
import sys
import time

import torch


def sync(device: str) -> None:
    """Wait for queued device work; CPU eager work is already done when the call returns."""
    if device.startswith("npu"):
        torch.npu.synchronize()


def stats(samples) -> dict:
    """Median, min and max of repeated measurements (the median is the figure that is compared)."""
    samples = [float(s) for s in samples]
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "n": len(samples)}


def time_per_call(fn, device: str, inner: int) -> float:
    """Seconds per call of `fn`, over `inner` back-to-back calls followed by one synchronisation."""
    sync(device)
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    sync(device)
    return (time.perf_counter() - start) / inner


def calls_for(fn, device: str, min_seconds: float, max_calls: int = 1000) -> int:
    """How many back-to-back calls make one timed sample last at least `min_seconds`."""
    once = max(time_per_call(fn, device, 1), 1e-7)
    return max(1, min(max_calls, math.ceil(min_seconds / once)))


def quiesce() -> None:
    """Leaves no trace of npu work that could slow CPU work: no queued device work, and no OpenMP
    thread team kept by a stream worker (released once it is out of work) or by this thread."""
    if "torch_npu" in sys.modules:
        torch.npu.synchronize()
        time.sleep(0.003)
        _release_own_thread_team()


def _release_own_thread_team() -> None:
    try:
        ctypes.CDLL(None).omp_pause_resource_all(1)
    except (OSError, AttributeError):  # no OpenMP runtime loaded: no team to release
        pass


def interleaved(cases, repeats: int, warmup: int = 1, quiesce_all: bool = False) -> list:
    """Time several (fn, device, inner) cases, alternating between them on every repeat.

    Alternating makes slow phases of a noisy machine (other processes compiling), and the caches'
    state, hit every case alike instead of one side of a comparison. Every CPU sample starts from
    quiesce(): no npu work queued or running beside it, nothing left behind by earlier npu work
    (each section also runs in a fresh process, run.py). Returns the per-call seconds of each case
    as a list of samples, in the order of `cases`. With `quiesce_all`, npu samples start from
    quiesce() too: on a loaded host its sleep gives the next sample a woken task's scheduling head
    start, which both sides of a comparison must get alike.
    """
    for fn, device, _ in cases:
        if not device.startswith("npu"):
            quiesce()
        for _ in range(warmup):
            fn()
        sync(device)
    samples = [[] for _ in cases]
    for _ in range(repeats):
        for i, (fn, device, inner) in enumerate(cases):
            if quiesce_all or not device.startswith("npu"):
                quiesce()
            samples[i].append(time_per_call(fn, device, inner))
    return samples


def row(section: str, name: str, unit: str, npu, ref=None, *, ref_label: str = "CPU eager",
        higher_is_better: bool = False, target=None, ratio=None, note: str = "", key: str = "") -> dict:
    """One result line: npu figure, reference figure, their ratio and whether it meets its target.

    `npu` and `ref` are stats() dicts of the measured quantity in `unit`. The ratio is npu / reference
    of the medians (for times lower is better, for bandwidths and rates higher is better); rows
    without a reference (allocator counts) pass the value itself as `ratio`.
    """
    if ratio is None and ref is not None and ref["median"] > 0:
        ratio = npu["median"] / ref["median"]
    # The ratio of the best samples (least disturbed by other load) is given beside it for reading noisy runs.
    ratio_best = None
    if ref is not None and npu is not None:
        best = "max" if higher_is_better else "min"
        ratio_best = npu[best] / ref[best] if ref[best] > 0 else None
    met = None
    if target is not None and ratio is not None:
        met = ratio >= target if higher_is_better else ratio <= target
    return {"section": section, "key": key or f"{section}.{name}", "name": name, "unit": unit,
            "npu": npu, "ref": ref, "ref_label": ref_label if ref is not None else "",
            "ratio": ratio, "ratio_best": ratio_best, "target": target, "higher_is_better": higher_is_better, "met": met,
            "note": note}
