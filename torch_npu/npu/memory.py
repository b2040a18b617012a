"""npu memory management: statistics come from the caching allocator through torch.accelerator."""

import collections
import pickle
import sys
import weakref

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from torch_npu import _C
from torch_npu.npu.device import _index


def _dev(device):
    idx = _index(device)
    _C._check_device(idx)
    return idx


def memory_stats(device=None) -> "collections.OrderedDict[str, int]":
    """Allocator statistics, torch.cuda.memory_stats()' keys plus torch_npu's num_oom_rejections
    (requests refused at once under PYTORCH_NPU_ALLOC_CONF's throw_on_npumalloc_oom:True)."""
    idx = _dev(device)
    stats = torch.accelerator.memory_stats(idx)
    stats["num_oom_rejections"] = _C._npu_oomRejections(idx)
    return stats


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


# The names torch.cuda kept from before the caching allocator's statistics had their present names.
def memory_cached(device=None) -> int:
    """Deprecated name of memory_reserved()."""
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """Deprecated name of max_memory_reserved()."""
    return max_memory_reserved(device)


def reset_max_memory_allocated(device=None) -> None:
    """Resets the peak of memory_allocated() (and, as on CUDA, every other peak): reset_peak_memory_stats()."""
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None) -> None:
    """Resets the peak of memory_reserved() (and every other peak): reset_peak_memory_stats()."""
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_dev(device))


def mem_get_info(device=None) -> tuple:
    """(free, total) bytes of the device (total is NPU_SIM_MEMORY)."""
    return torch.accelerator.get_memory_info(_dev(device))


def empty_cache() -> None:
    """Return cached, unused blocks of every npu to the runtime."""
    torch.accelerator.empty_cache()


def empty_virt_addr_cache() -> None:
    """A lighter empty_cache(): unmaps the free pages of expandable segments (their memory goes back,
    their address ranges stay reserved for later growth) and keeps every other cached block. Without
    expandable segments (PYTORCH_NPU_ALLOC_CONF=expandable_segments:True) there is nothing to unmap."""
    from torch_npu import _C

    if torch.npu.is_initialized():
        _C._npu_emptyVirtAddrCache()


_fractions = {}  # device index -> the fraction set_per_process_memory_fraction() last set


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    """Cap this process's reserved memory on `device` at fraction * capacity."""
    # torch.cuda's checks and messages: a float in [0, 1] (0 lets nothing be allocated).
    if not isinstance(fraction, float):
        raise TypeError(f"Invalid type for fraction argument, must be `float`, got {type(fraction).__name__}")
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    idx = _dev(device)
    _C._set_memory_fraction(float(fraction), idx)
    _fractions[idx] = float(fraction)


def get_per_process_memory_fraction(device=None) -> float:
    """The cap set_per_process_memory_fraction() put on `device` (1.0: the whole device)."""
    return _fractions.get(_dev(device), 1.0)


def memory_stats_as_nested_dict(device=None) -> dict:
    """memory_stats() nested at its dots: {"allocated_bytes": {"all": {"current": ...}}, ...}."""
    nested = {}
    for key, value in memory_stats(device).items():
        *path, leaf = key.split(".")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


# The pinned host allocator (pin_memory(), DataLoader(pin_memory=True)): PyTorch's caching host
# allocator over the runtime's pinned memory.
def host_empty_cache() -> None:
    """Returns the pinned host memory that no tensor and no pending copy uses."""
    _C._host_empty_cache()


def host_memory_stats_as_nested_dict() -> dict:
    """The pinned host allocator's statistics, nested as torch.cuda.host_memory_stats_as_nested_dict()."""
    return _C._host_memory_stats()


def host_memory_stats() -> "collections.OrderedDict[str, int]":
    """The pinned host allocator's statistics with dotted keys ("allocated_bytes.current", ...), as
    torch.cuda.host_memory_stats()."""
    flat = []

    def walk(prefix, obj):
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            flat.append((prefix, obj))

    walk("", host_memory_stats_as_nested_dict())
    return collections.OrderedDict(sorted(flat))


def reset_accumulated_host_memory_stats() -> None:
    """Zeroes the pinned host allocator's "allocated" / "freed" totals and timing counts."""
    _C._host_reset_accumulated_stats()


def reset_peak_host_memory_stats() -> None:
    """Resets the pinned host allocator's peaks to the current values."""
    _C._host_reset_peak_stats()


_raw_blocks = {}  # data pointer -> the tensor whose memory caching_allocator_alloc() handed out


def caching_allocator_alloc(size, device=None, stream=None) -> int:
    """`size` bytes from the caching allocator on `device` for `stream` (default: the current stream);
    returns the address. Free it with caching_allocator_delete()."""
    from torch_npu.npu.streams import current_stream, stream as use_stream

    if not isinstance(size, int) or size < 0:
        raise ValueError(f"caching_allocator_alloc: size must be a non-negative int, got {size!r}")
    idx = _dev(device)
    if stream is None:
        stream = current_stream(idx)
    elif isinstance(stream, int):
        raise TypeError("caching_allocator_alloc: pass a torch.npu.Stream, not a raw stream handle")
    with use_stream(stream):
        block = torch.empty(max(size, 1), dtype=torch.uint8, device=f"npu:{idx}")
    _raw_blocks[block.data_ptr()] = block
    return block.data_ptr()


def caching_allocator_delete(mem_ptr) -> None:
    """Returns memory caching_allocator_alloc() handed out to the caching allocator."""
    block = _raw_blocks.pop(int(mem_ptr), None)
    if block is None:
        raise ValueError(f"caching_allocator_delete: {mem_ptr:#x} was not allocated by caching_allocator_alloc")
    del block


def ipc_collect() -> None:
    """Frees npu memory held only for other processes' IPC handles. The software NPU does not share
    device memory between processes, so there is none: this only empties the unused cache."""
    empty_cache()


def _fmt(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def _size_cell(n: int) -> str:
    """A byte count in a 10-character cell: whole units, switching unit below 2048 of the next one."""
    for unit in ("B  ", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 2048 or unit == "TiB":
            return f"{int(n):6d} {unit}"
        n /= 1024
    return f"{int(n):6d} TiB"


def _count_cell(n: int) -> str:
    return f"{int(n):7d}   "


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """The allocator statistics of `device` as a table, laid out as torch.cuda.memory_summary() lays out
    CUDA's (the same rows and columns, NPU in the names)."""
    idx = _dev(device)
    stats = memory_stats(idx)
    width = 75
    rows = [("Allocated memory", "allocated_bytes", _size_cell), ("Active memory", "active_bytes", _size_cell),
            ("Requested memory", "requested_bytes", _size_cell), ("NPU reserved memory", "reserved_bytes", _size_cell),
            ("Non-releasable memory", "inactive_split_bytes", _size_cell), ("Allocations", "allocation", _count_cell),
            ("Active allocs", "active", _count_cell), ("NPU reserved segments", "segment", _count_cell),
            ("Non-releasable allocs", "inactive_split", _count_cell)]
    pools = [("all", "")] if abbreviated else [("all", ""), ("large_pool", "      from large pool"),
                                               ("small_pool", "      from small pool")]
    lines = ["=" * width,
             f" {'':16} PyTorch NPU memory summary, device ID {idx:<18d} ",
             "-" * width,
             f"  {'':9} NPU OOMs: {stats.get('num_ooms', 0):<13d} | {'':6} npuMalloc retries: "
             f"{stats.get('num_alloc_retries', 0):<9d}  ",
             "=" * width,
             "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  "]
    for title, key, cell in rows:
        lines.append("-" * width)
        for pool, label in pools:
            values = [cell(stats.get(f"{key}.{pool}.{k}", 0)) for k in ("current", "peak", "allocated", "freed")]
            lines.append(f" {label or title:<21} | " + " | ".join(values) + " ")
    lines.append("-" * width)
    lines.append(f" Oversize allocations  | {_count_cell(stats.get('oversize_allocations.current', 0))} | "
                 f"{_count_cell(stats.get('oversize_allocations.peak', 0))} | "
                 f"{_count_cell(stats.get('oversize_allocations.allocated', 0))} | "
                 f"{_count_cell(stats.get('oversize_allocations.freed', 0))} ")
    lines.append("-" * width)
    free, total = mem_get_info(idx)
    lines.append(f" npu:{idx} capacity {_fmt(total)}, free {_fmt(free)}".ljust(width))
    lines.append("=" * width)
    return "|" + "|\n|".join(lines) + "|\n"


def memory_snapshot() -> list:
    """The caching allocator's segments on every npu (as torch.cuda.memory_snapshot())."""
    return _C._memory_snapshot()["segments"]


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                           device=None, clear_history=False, **kwargs) -> None:
    """Record where npu memory is allocated, for _snapshot() and torch.cuda._memory_viz.

    As torch.cuda.memory._record_memory_history: `enabled` None (off), "state" (stacks of live
    blocks) or "all" (also the last `max_entries` alloc/free/segment events); `context` which events
    keep a stack ("state", "alloc", "all" or None); `stacks` "python" or "all" (with C++ frames).
    The older form `_record_memory_history(True, trace_alloc_max_entries=N, ...)` is accepted too.
    """
    if isinstance(enabled, bool):  # the legacy signature
        record_context = context if context != "all" else kwargs.get("record_context", True)
        entries = kwargs.get("trace_alloc_max_entries", 1)
        trace_context = kwargs.get("trace_alloc_record_context", False)
        if not enabled:
            _C._record_memory_history(None, None, "python", 0, bool(clear_history))
            return
        ctx = "alloc" if trace_context else ("state" if record_context else None)
        cpp = kwargs.get("record_context_cpp", False)
        _C._record_memory_history("all" if entries > 1 else "state", ctx, "all" if cpp else "python",
                                  int(entries), bool(clear_history))
        return
    if device is not None:
        _dev(device)
    _C._record_memory_history(enabled, context, stacks, int(max_entries), bool(clear_history))


def _snapshot(device=None) -> dict:
    """The allocator state and recorded history, in the format torch.cuda.memory._snapshot() gives:
    {"segments": [...], "device_traces": [[...] per device], "allocator_settings": {...}}."""
    return _C._memory_snapshot()


def _dump_snapshot(filename="dump_snapshot.pickle") -> None:
    """Pickle _snapshot() to `filename`; `python -m torch.cuda._memory_viz` and pytorch.org/memory_viz
    read it."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def _set_allocator_settings(settings: str) -> None:
    """Replace the caching allocator's settings (PYTORCH_NPU_ALLOC_CONF syntax) from now on."""
    _C._set_allocator_settings(settings)


def _end_training_step() -> None:
    """The end of a training step. With expandable segments the allocator plans the next steps'
    addresses from the step just ended; a loop that repeats them is then served from the plan."""
    _C._end_training_step()


_pacer = None  # weak reference to the optimizer whose steps delimit training steps


def _on_npu(optimizer) -> bool:
    return any(p.device.type == "npu" for group in optimizer.param_groups for p in group["params"])


def _after_optimizer_step(optimizer, args, kwargs) -> None:
    """Global optimizer post-hook. A loop may step several optimizers (a GAN's two, or a CPU one
    alongside): the first one with npu parameters to step paces the steps, until it is collected."""
    global _pacer
    if torch.compiler.is_compiling():
        return  # traced into a compiled step, a call here would break its graph: no step ends there
    pacer = _pacer() if _pacer is not None else None
    if pacer is None:
        if not _on_npu(optimizer):
            return
        _pacer = weakref.ref(optimizer)
        pacer = optimizer
    if optimizer is pacer:
        _end_training_step()


register_optimizer_step_post_hook(_after_optimizer_step)


def _step_plan_stats(device=None) -> dict:
    """What the expandable segments' step planner did on `device`: step boundaries seen, plans
    built, steps served entirely from a plan, requests placed as planned, planned requests missed."""
    return _C._step_plan_stats(_dev(device))


def get_allocator_backend() -> str:
    return "native"


class MemPool:
    """A private memory pool (torch.cuda.MemPool's shape): allocations made inside
    ``use_mem_pool(pool)`` come from this pool's own segments, which nothing else reuses; graphs
    may capture into it too (``torch.npu.graph(g, pool=mem_pool.id)``). The pool's free memory
    goes back to the device once the pool has no users and the cache is emptied."""

    def __init__(self, allocator=None, use_on_oom=False, no_split=False):
        if allocator is not None:
            raise ValueError(
                "MemPool(allocator=...): the software NPU has one device allocator (the caching allocator); "
                "pass allocator=None")
        from torch_npu.npu.device import current_device

        self._device = current_device()
        self._id = tuple(_C._graph_pool_handle())
        _C._npu_retainPool(self._device, self._id)
        self._finalizer = weakref.finalize(self, _C._npu_releasePool, self._device, self._id)

    @property
    def id(self):
        return self._id

    @property
    def allocator(self):
        return None

    def use_count(self) -> int:
        return _C._npu_poolUseCount(self._device, self._id)

    def snapshot(self):
        """The allocator snapshot's segments that belong to this pool."""
        return [s for s in _snapshot()["segments"] if s.get("segment_pool_id") == self._id]


class use_mem_pool:
    """Routes this thread's npu allocations to ``pool`` while active (torch.cuda.use_mem_pool)."""

    def __init__(self, pool: MemPool, device=None):
        if not isinstance(pool, MemPool):
            raise TypeError(f"use_mem_pool expects a torch.npu.MemPool, got {type(pool).__name__}")
        self._pool = pool
        self._device = pool._device if device is None else _dev(device)

    def __enter__(self):
        _C._npu_beginAllocateCurrentThreadToPool(self._device, self._pool.id)
        return self._pool

    def __exit__(self, *exc):
        _C._npu_endAllocateToPool(self._device, self._pool.id)
        _C._npu_releasePool(self._device, self._pool.id)
        return False
