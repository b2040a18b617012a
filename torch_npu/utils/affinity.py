"""Pinning the calling thread to CPU cores (torch_npu.utils.set_thread_affinity): a training process keeps
its launching thread off the cores its data-loader workers or other ranks use."""

import os
import threading

__all__ = ["set_thread_affinity", "reset_thread_affinity"]

_original = {}  # native thread id -> its affinity before the first set_thread_affinity


def _cores(core_range):
    if isinstance(core_range, list) and len(core_range) == 2 and all(isinstance(x, int) for x in core_range):
        ranges = [core_range]
    elif isinstance(core_range, list) and core_range and all(isinstance(x, list) and len(x) == 2 for x in core_range):
        ranges = core_range
    else:
        raise ValueError(f"set_thread_affinity: core_range must be [start, end] or [[start, end], ...], got "
                         f"{core_range!r}")
    cores = set()
    for start, end in ranges:
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
            raise ValueError(f"set_thread_affinity: invalid core range [{start}, {end}] (need 0 <= start <= end)")
        cores.update(range(start, end + 1))
    available = os.sched_getaffinity(0) | set(range(os.cpu_count() or 0))
    missing = sorted(cores - available)
    if missing:
        raise ValueError(f"set_thread_affinity: cores {missing} do not exist on this host "
                         f"({os.cpu_count()} cores)")
    return cores


def set_thread_affinity(core_range=None) -> None:
    """Binds the calling thread to the cores of `core_range`: [start, end] (inclusive) or several such
    ranges; None puts back the affinity the thread had before."""
    tid = threading.get_native_id()
    if core_range is None:
        reset_thread_affinity()
        return
    cores = _cores(core_range)
    _original.setdefault(tid, os.sched_getaffinity(tid))
    os.sched_setaffinity(tid, cores)


def reset_thread_affinity() -> None:
    """Gives the calling thread back the affinity it had before set_thread_affinity."""
    tid = threading.get_native_id()
    original = _original.pop(tid, None)
    if original is not None:
        os.sched_setaffinity(tid, original)
