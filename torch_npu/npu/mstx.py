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
import types
import warnings

import torch

__all__ = ["mstx", "mark", "range_start", "range_end", "range_push", "range_pop", "mstx_range", "annotate"]

_ids = itertools.count(1)
_open = {}  # range id -> record_function handle (a range may end on another thread)
_lock = threading.Lock()
_stacks = threading.local()  # per thread: domain -> [range ids] of range_push


def _recording(domain: str) -> bool:
    from torch_npu.profiler.profiler import _mstx_records

    return _mstx_records(domain)


def _begin(message, domain):
    return torch.ops.profiler._record_function_enter_new(message, f"mstx domain={domain}")


def _end(handle):
    torch.ops.profiler._record_function_exit._RecordFunction(handle)


# The recording layer, at torch_npu._C._mstx as upstream lays it out (tests replace its functions):
# "_on_host" forms take no stream; the others take the stream's id, device index and device type.
def _native_mark(message, stream_id=0, device_index=0, device_type=0, domain="default"):
    if _recording(domain):
        _end(_begin(message, domain))


def _native_mark_on_host(message, domain="default"):
    _native_mark(message, domain=domain)


def _native_range_start(message, stream_id=0, device_index=0, device_type=0, domain="default"):
    if not _recording(domain):
        return 0
    rid = next(_ids)
    with _lock:
        _open[rid] = _begin(message, domain)
    return rid


def _native_range_start_on_host(message, domain="default"):
    return _native_range_start(message, domain=domain)


def _native_range_end(range_id, domain="default"):
    if range_id == 0:
        return
    with _lock:
        handle = _open.pop(range_id, None)
    if handle is None:
        warnings.warn(f"mstx.range_end: range {range_id} is not open (ended twice, or not from range_start)")
        return
    _end(handle)


def _native_range_push(message, stream_id=0, device_index=0, device_type=0, domain="default"):
    rid = _native_range_start(message, stream_id, device_index, device_type, domain)
    stack = _stacks.__dict__.setdefault(domain, [])
    stack.append(rid)
    return len(stack) - 1


def _native_range_push_on_host(message, domain="default"):
    return _native_range_push(message, domain=domain)


def _native_range_pop(domain="default"):
    stack = _stacks.__dict__.get(domain)
    if not stack:
        return -1
    _native_range_end(stack.pop(), domain)
    return len(stack)


_native = types.ModuleType("torch_npu._C._mstx", "mstx's recording layer")
for _name in ("mark", "mark_on_host", "range_start", "range_start_on_host", "range_end", "range_push",
              "range_push_on_host", "range_pop"):
    setattr(_native, "_" + _name, globals()["_native_" + _name])


def _layer():
    from torch_npu import _C

    if not hasattr(_C, "_mstx"):
        _C._mstx = _native
    return _C._mstx


def _invalid(what, reason):
    warnings.warn(f"mstx.{what}: {reason}; the call is ignored", stacklevel=3)


def _valid(what, message, stream, domain) -> bool:
    """Upstream's rule: bad arguments are warned about and ignored (the program goes on)."""
    if not isinstance(message, str) or not message:
        _invalid(what, f"message must be a non-empty str, got {message!r}")
        return False
    if not isinstance(domain, str) or not domain:
        _invalid(what, f"domain must be a non-empty str, got {domain!r}")
        return False
    if stream is not None and not (isinstance(stream, torch.Stream) and stream.device.type == "npu"):
        _invalid(what, f"stream must be None or a torch.npu.Stream, got {stream!r}")
        return False
    return True


def _where(stream):
    return stream.stream_id, stream.device_index, int(stream.device_type)


def mark(message: str, stream=None, domain: str = "default") -> None:
    """An instant marker named `message` (on `stream`'s timeline when given)."""
    if not _valid("mark", message, stream, domain):
        return
    if stream is None:
        _layer()._mark_on_host(message, domain)
    else:
        _layer()._mark(message, *_where(stream), domain)


def range_start(message: str, stream=None, domain: str = "default") -> int:
    """Opens a range named `message`; returns its id for range_end (0 when nothing records or the
    arguments are invalid)."""
    if not _valid("range_start", message, stream, domain):
        return 0
    if stream is None:
        return _layer()._range_start_on_host(message, domain)
    return _layer()._range_start(message, *_where(stream), domain)


def range_end(range_id: int, domain: str = "default") -> None:
    """Closes the range range_start returned `range_id` for (any thread may close it)."""
    if not isinstance(range_id, int) or isinstance(range_id, bool):
        _invalid("range_end", f"range_id must be an int from range_start, got {range_id!r}")
        return
    if not isinstance(domain, str) or not domain:
        _invalid("range_end", f"domain must be a non-empty str, got {domain!r}")
        return
    _layer()._range_end(range_id, domain)


def range_push(message: str, stream=None, domain: str = "default") -> int:
    """Opens a nested range on this thread's stack for `domain`; returns its depth (0 for the outermost,
    -1 for invalid arguments). The stack is kept whether or not a profile records."""
    if not _valid("range_push", message, stream, domain):
        return -1
    if stream is None:
        return _layer()._range_push_on_host(message, domain)
    return _layer()._range_push(message, *_where(stream), domain)


def range_pop(domain: str = "default") -> int:
    """Closes this thread's innermost range_push range of `domain`; returns its depth (-1 when none is
    open or the domain is invalid)."""
    if not isinstance(domain, str) or not domain:
        _invalid("range_pop", f"domain must be a non-empty str, got {domain!r}")
        return -1
    return _layer()._range_pop(domain)


class mstx_range:
    """A range around a with block, or around each call of a decorated function."""

    def __init__(self, message: str, stream=None, domain: str = "default"):
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


_layer()  # torch_npu._C._mstx exists from import on, as upstream's native module does
