"""npu memory management: statistics come from the caching allocator through torch.accelerator."""

import collections

import torch

from torch_npu import _C
from torch_npu.npu.device import _index


def _dev(device):
    idx = _index(device)
    _C._check_device(idx)
    return idx


def memory_stats(device=None) -> "collections.OrderedDict[str, int]":
    """Allocator statistics, same keys as torch.cuda.memory_stats()."""
    return torch.accelerator.memory_stats(_dev(device))


def memory_allocated(device=None) -> int:
    return torch.accelerator.memory_allocated(_dev(device))


def max_memory_allocated(device=None) -> int:
    return torch.accelerator.max_memory_allocated(_dev(device))


def memory_reserved(device=None) -> int:
    return torch.accelerator.memory_reserved(_dev(device))


def max_memory_reserved(device=None) -> int:
    return torch.accelerator.max_memory_reserved(_dev(device))


def reset_peak_memory_stats(device=None) -> None:
    torch.accelerator.reset_peak_memory_stats(_dev(device))


def reset_accumulated_memory_stats(device=None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_dev(device))


def mem_get_info(device=None) -> tuple:
    """(free, total) bytes of the device (total is NPU_SIM_MEMORY)."""
    return torch.accelerator.get_memory_info(_dev(device))


def empty_cache() -> None:
    """Return cached, unused blocks of every npu to the runtime."""
    torch.accelerator.empty_cache()


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    """Cap this process's reserved memory on `device` at fraction * capacity."""
    if not isinstance(fraction, (int, float)):
        raise TypeError(f"fraction must be a float, got {type(fraction).__name__}")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    _C._set_memory_fraction(float(fraction), _dev(device))


def _fmt(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A human-readable table of the allocator statistics of `device`."""
    idx = _dev(device)
    stats = memory_stats(idx)
    rows = [
        ("Allocated memory", "allocated_bytes", True),
        ("Active memory", "active_bytes", True),
        ("Requested memory", "requested_bytes", True),
        ("Reserved memory", "reserved_bytes", True),
        ("Non-releasable memory", "inactive_split_bytes", True),
        ("Allocations", "allocation", False),
        ("Active allocs", "active", False),
        ("Reserved segments", "segment", False),
        ("Non-releasable allocs", "inactive_split", False),
    ]
    pools = ["all"] if abbreviated else ["all", "large_pool", "small_pool"]
    width = 78
    lines = ["=" * width, f" npu:{idx} memory summary".ljust(width), "-" * width]
    lines.append(f"{'Metric':<28}{'Cur Usage':>12}{'Peak Usage':>12}{'Tot Alloc':>13}{'Tot Freed':>13}")
    for title, key, is_bytes in rows:
        lines.append("-" * width)
        for pool in pools:
            vals = [stats.get(f"{key}.{pool}.{k}", 0) for k in ("current", "peak", "allocated", "freed")]
            text = [_fmt(v) if is_bytes else str(v) for v in vals]
            label = title if pool == "all" else f"  from {pool.replace('_', ' ')}"
            lines.append(f"{label:<28}{text[0]:>12}{text[1]:>12}{text[2]:>13}{text[3]:>13}")
    lines.append("-" * width)
    free, total = mem_get_info(idx)
    lines.append(f"Device capacity {_fmt(total)}, free {_fmt(free)}; "
                 f"OOMs {stats.get('num_ooms', 0)}, retries {stats.get('num_alloc_retries', 0)}")
    lines.append("=" * width)
    return "\n".join(lines) + "\n"
