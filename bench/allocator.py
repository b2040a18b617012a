"""Allocator: device allocations per training step after warm-up and peak reserved / peak allocated,
with the recommended PYTORCH_NPU_ALLOC_CONF=expandable_segments:True and with the default settings."""

import gc
import json
import os
import subprocess
import sys

import torch

from common import row, stats, sync
from models import SETUPS

SECTION = "allocator"
HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_ALLOCS_PER_STEP = 0.0
TARGET_RESERVED_OVER_ALLOCATED = 1.15
RECOMMENDED = "expandable_segments:True"
SETTINGS = {RECOMMENDED: "expandable segments", "": "default settings"}


def _delta(before: dict, after: dict, key: str) -> int:
    return after.get(key, 0) - before.get(key, 0)


def _measure(setup, quick: bool, warmup: int, steps: int, settings: str) -> dict:
    # Start from an empty cache so earlier sections' freed blocks do not count as this loop's reserve.
    gc.collect()
    torch.npu.synchronize()
    torch.npu.empty_cache()
    torch.npu.memory._set_allocator_settings(settings)
    torch.npu.reset_peak_memory_stats()
    # What earlier work still holds (live tensors and the segments they pin) is not this loop's.
    base = torch.npu.memory_stats()
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
        # nrtMalloc segments and, with expandable segments, page mappings alike.
        "segments_per_step": _delta(before, after, "num_device_alloc") / steps,
        "blocks_per_step": _delta(before, after, "allocation.all.allocated") / steps,
        "retries": _delta(before, after, "num_alloc_retries"),
        "reserved_peak": after["reserved_bytes.all.peak"] - base["reserved_bytes.all.current"],
        "allocated_peak": after["allocated_bytes.all.peak"] - base["allocated_bytes.all.current"],
    }


def _measure_in_child(name: str, quick: bool, warmup: int, steps: int, settings: str, repeats: int) -> list:
    """`repeats` runs of _measure in a fresh process. In this one, tensors that earlier sections keep
    alive (compiled steps' caches) pin segments whose free parts would serve the loop without
    counting as its reserve: peak reserved came out below peak allocated."""
    # Run from bench/: its modules import as top-level ones, and not the source tree's torch_npu.
    code = (f"import json; import allocator; from models import SETUPS; "
            f"print(json.dumps([allocator._measure(SETUPS[{name!r}], {quick!r}, {warmup}, {steps}, {settings!r}) "
            f"for _ in range({repeats})]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=HERE)
    if done.returncode != 0:
        raise RuntimeError(f"allocator measurement of {name} ({settings or 'defaults'}) failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> list:
    warmup, steps, repeats = (2, 2, 1) if quick else (3, 20, 3)
    rows = []
    try:
        for settings, label in SETTINGS.items():
            for name, setup in SETUPS.items():
                rows += _rows(name, setup, quick, warmup, steps, repeats, settings, label)
    finally:
        gc.collect()
        torch.npu.synchronize()
        torch.npu.empty_cache()
        torch.npu.memory._set_allocator_settings("")
    return rows


def _rows(name, setup, quick, warmup, steps, repeats, settings, label) -> list:
    recommended = settings == RECOMMENDED
    suffix = "" if recommended else "_default"
    runs = _measure_in_child(name, quick, warmup, steps, settings, repeats)
    pick = lambda k: stats(r[k] for r in runs)  # noqa: E731
    ratios = stats(r["reserved_peak"] / r["allocated_peak"] for r in runs)
    mib = lambda k: stats(r[k] / 2**20 for r in runs)  # noqa: E731
    segs = pick("segments_per_step")
    rows = [
        row(SECTION, f"{name}, {label}: device allocations per step after warm-up", "count", segs,
            ratio=segs["median"], target=TARGET_ALLOCS_PER_STEP,
            note=f"segments and page mappings; alloc retries: {sum(r['retries'] for r in runs)}",
            key=f"{SECTION}.{name}_segments{suffix}"),
        row(SECTION, f"{name}, {label}: peak reserved / peak allocated", "ratio", ratios,
            ratio=ratios["median"], target=TARGET_RESERVED_OVER_ALLOCATED if recommended else None,
            note=(f"peak reserved {mib('reserved_peak')['median']:.1f} MiB, "
                  f"peak allocated {mib('allocated_peak')['median']:.1f} MiB"
                  + ("" if recommended else "; informational: the recommended setting is "
                     f"PYTORCH_NPU_ALLOC_CONF={RECOMMENDED}")),
            key=f"{SECTION}.{name}_reserved_ratio{suffix}"),
    ]
    if recommended:
        rows.append(row(SECTION, f"{name}: caching-allocator blocks handed out per step", "count",
                        pick("blocks_per_step"), note="served from the cache; informational",
                        key=f"{SECTION}.{name}_blocks"))
    return rows


if __name__ == "__main__":
    from run import standalone
    standalone(run)
