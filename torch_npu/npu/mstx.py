"""torch.npu.mstx: markers and ranges from user code, recorded into the profile of a torch_npu.profiler
that runs with `_ExperimentalConfig(mstx=True)` (or msprof_tx=True), filtered by its
mstx_domain_include / mstx_domain_exclude. They appear on the host timeline as user annotations named
by their message (a marker as a zero-length one); when no such profile records, the calls cost a check.

    torch.npu.mstx.mark("data loaded")
    rid = torch.npu.mstx.range_start("forward"); ...; torch.npu.mstx.range_end(rid)
    with torch.npu.mstx.mstx_range("step"): ...
    @torch.npu.mstx.annotate("loss")
    def compute_loss(...): ...

`stream` is accepted for torch_npu's signature; the software NPU records the marker on the host
timeline, next to the device tasks the same thread launched."""

import functools
import itertools
import threading

import torch

__all__ = ["mstx", "mark", "range_start", "range_end", "range_push", "range_pop", "mstx_range", "annotate"]

_ids = itertools.count(1)
_open = {}  # range id -> record_function handle (a range may end on another thread)
_lock = threading.Lock()
_stacks = threading.local()  # per thread: domain -> [range ids] of range_push


def _recording(domain: str) -> bool:
    from torch_npu.profiler.profiler import _mstx_records

    return _mstx_records(domain)


def _check(message, domain):
    if not isinstance(message, str):
        raise TypeError(f"mstx: message must be a str, got {type(message).__name__}")
    if not isinstance(domain, str):
        raise TypeError(f"mstx: domain must be a str, got {type(domain).__name__}")


def _begin(message, domain):
    return torch.ops.profiler._record_function_enter_new(message, f"mstx domain={domain}")


def _end(handle):
    torch.ops.profiler._record_function_exit._RecordFunction(handle)


def mark(message: str, stream=None, domain: str = "default") -> None:
    """An instant marker named `message`."""
    _check(message, domain)
    if _recording(domain):
        _end(_begin(message, domain))


def range_start(message: str, stream=None, domain: str = "default") -> int:
    """Opens a range named `message`; returns its id for range_end (0 when nothing records)."""
    _check(message, domain)
    if not _recording(domain):
        return 0
    rid = next(_ids)
    with _lock:
        _open[rid] = _begin(message, domain)
    return rid


def range_end(range_id: int, domain: str = "default") -> None:
    """Closes the range range_start returned `range_id` for (any thread may close it)."""
    if range_id == 0:
        return
    with _lock:
        handle = _open.pop(range_id, None)
    if handle is None:
        raise ValueError(f"mstx.range_end: range {range_id} is not open (ended twice, or not from range_start)")
    _end(handle)


def range_push(message: str, stream=None, domain: str = "default") -> int:
    """Opens a nested range on this thread's stack for `domain`; returns its depth (0 for the outermost).
    The stack is kept whether or not a profile records, so that depths stay the same."""
    rid = range_start(message, stream, domain)
    stack = _stacks.__dict__.setdefault(domain, [])
    stack.append(rid)
    return len(stack) - 1


def range_pop(domain: str = "default") -> int:
    """Closes this thread's innermost range_push range of `domain`; returns its depth (-1 when none is open)."""
    stack = _stacks.__dict__.get(domain)
    if not stack:
        return -1
    range_end(stack.pop(), domain)
    return len(stack)


class mstx_range:
    """A range around a with block, or around each call of a decorated function."""

    def __init__(self, message: str, stream=None, domain: str = "default"):
        _check(message, domain)
        self.message, self.stream, self.domain = message, stream, domain
        self._ids = []

    def __enter__(self):
        self._ids.append(range_start(self.message, self.stream, self.domain))
        return self

    def __exit__(self, *exc):
        range_end(self._ids.pop(), self.domain)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with mstx_range(self.message, self.stream, self.domain):
                return fn(*args, **kwargs)
        return wrapped


def annotate(message: str = "", stream=None, domain: str = "default"):
    """A decorator (or with-block) range; the message defaults to the decorated function's name."""
    class _Annotate(mstx_range):
        def __call__(self, fn):
            if not self.message:
                self.message = getattr(fn, "__qualname__", getattr(fn, "__name__", "function"))
            return super().__call__(fn)
    return _Annotate(message, stream, domain)


class mstx:
    """torch.npu.mstx as torch_npu has it: the functions of this module as static methods."""

    mark = staticmethod(mark)
    range_start = staticmethod(range_start)
    range_end = staticmethod(range_end)
    range_push = staticmethod(range_push)
    range_pop = staticmethod(range_pop)
    mstx_range = mstx_range
    annotate = staticmethod(annotate)
