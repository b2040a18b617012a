"""Allocator: device (arena) allocations per training step after warm-up, peak reserved / peak allocated."""

import gc

import torch

from common import row, stats, sync
from models import SETUPS

SECTION = "allocator"
TARGET_ALLOCS_PER_STEP = 0.0
TARGET_RESERVED_OVER_ALLOCATED = 1.15


def _delta(before: dict, after: dict, key: str) -> int:
    return after.get(key, 0) - before.get(key, 0)


def _measure(setup, quick: bool, warmup: int, steps: int) -> dict:
    # Start from an empty cache so earlier sections' freed blocks do not count as this loop's reserve.
    gc.collect()
    torch.npu.empty_cache()
    torch.npu.reset_peak_memory_stats()
    _, _, step = setup("npu", quick)
    for _ in range(warmup):
        step()
    sync("npu")
    before = torch.npu.memory_stats()
    for _ in range(steps):
        step()
    sync("npu")
    after = torch.npu.memory_stats()
    return {
        "segments_per_step": _delta(before, after, "segment.all.allocated") / steps,
        "blocks_per_step": _delta(before, after, "allocation.all.allocated") / steps,
        "retries": _delta(before, after, "num_alloc_retries"),
        "reserved_peak": after["reserved_bytes.all.peak"],
        "allocated_peak": after["allocated_bytes.all.peak"],
    }


def run(quick: bool = False) -> list:
    warmup, steps, repeats = (2, 2, 1) if quick else (3, 20, 3)
    rows = []
    for name, setup in SETUPS.items():
        runs = [_measure(setup, quick, warmup, steps) for _ in range(repeats)]
        pick = lambda k: stats(r[k] for r in runs)  # noqa: E731
        ratios = stats(r["reserved_peak"] / r["allocated_peak"] for r in runs)
        mib = lambda k: stats(r[k] / 2**20 for r in runs)  # noqa: E731
        segs = pick("segments_per_step")
        rows += [
            row(SECTION, f"{name}: device segment allocations per step after warm-up", "count", segs,
                ratio=segs["median"], target=TARGET_ALLOCS_PER_STEP,
                note=f"alloc retries: {sum(r['retries'] for r in runs)}", key=f"{SECTION}.{name}_segments"),
            row(SECTION, f"{name}: peak reserved / peak allocated", "ratio", ratios,
                ratio=ratios["median"], target=TARGET_RESERVED_OVER_ALLOCATED,
                note=(f"peak reserved {mib('reserved_peak')['median']:.1f} MiB, "
                      f"peak allocated {mib('allocated_peak')['median']:.1f} MiB"),
                key=f"{SECTION}.{name}_reserved_ratio"),
            row(SECTION, f"{name}: caching-allocator blocks handed out per step", "count",
                pick("blocks_per_step"), note="served from the cache; informational",
                key=f"{SECTION}.{name}_blocks"),
        ]
    return rows


if __name__ == "__main__":
    from run import standalone
    standalone(run)
