"""Profiling overhead: a training step of the benchmark's small CNN profiled at Level0 (torch_npu.profiler,
CPU + NPU activity) against the same step unprofiled, and a small op with the profiler on against off.
With the profiler off the device activity hooks cost one relaxed load per task: section 1 measures that.

Run alone: .venv/bin/python bench/profiling.py [--quick]
"""

import time

import torch

import torch_npu
from common import row, stats, sync
from models import SETUPS

SECTION = "profiling"
TARGET_RATIO = 1.3  # a profiled step costs at most 1.3x an unprofiled one


def _profiler():
    level0 = torch_npu.profiler._ExperimentalConfig(profiler_level=torch_npu.profiler.ProfilerLevel.Level0)
    acts = [torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU]
    return torch_npu.profiler.profile(activities=acts, experimental_config=level0)


def _timed(fn, inner: int) -> float:
    sync("npu")
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    sync("npu")
    return (time.perf_counter() - start) / inner


def _compare(fn, inner: int, repeats: int, warmup: int):
    """Per-call seconds of `fn` unprofiled and profiled, alternating; the profiler's stop (collection and
    post-processing, done once per window) is outside the timed part."""
    for _ in range(warmup):
        fn()
    off, on = [], []
    for _ in range(repeats):
        off.append(_timed(fn, inner))
        prof = _profiler()
        prof.start()
        fn()  # the first profiled call pays the session's start-up
        on.append(_timed(fn, inner))
        prof.stop()
    return off, on


def run(quick: bool = False) -> list:
    steps, repeats, ops = (2, 2, 200) if quick else (6, 5, 3000)
    _, _, step = SETUPS["CNN"]("npu", quick)
    off, on = _compare(step, steps, repeats, warmup=3)
    ms = lambda samples: stats(s * 1e3 for s in samples)  # noqa: E731
    rows = [row(SECTION, "training step (small CNN) profiled at Level0: ms per step", "ms", ms(on), ms(off),
                ref_label="unprofiled", target=TARGET_RATIO, key=f"{SECTION}.train_step_level0")]
    a, b = torch.randn(16, device="npu"), torch.randn(16, device="npu")
    off, on = _compare(lambda: a + b, ops, repeats, warmup=200)
    us = lambda samples: stats(s * 1e6 for s in samples)  # noqa: E731
    rows.append(row(SECTION, f"add, 16 elements, profiled at Level0: us per op ({ops} ops, 1 sync)", "us", us(on),
                    us(off), ref_label="unprofiled", note="host-bound worst case: every op is recorded on the "
                    "host and on the device", key=f"{SECTION}.small_op_level0"))
    return rows


if __name__ == "__main__":
    from run import standalone
    standalone(run)
