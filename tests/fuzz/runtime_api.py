"""Fuzz target: the runtime C API through ctypes; random call sequences over live, destroyed and
made-up handles, freed and out-of-range device pointers, bad sizes and memcpy kinds.

Every call must return a defined nrtError_t, and every failure must leave a message in
nrtGetRecentErrMsg() (the adapter quotes it in the Python exception)."""

import ctypes
import importlib.util
import os

from hypothesis import given, strategies as st

from fuzz.common import HUGE_INTS, hypothesis_settings

MAX_ERROR = 10  # NRT_ERROR_EVENT_NOT_RECORDED, the last code in runtime.h
HOST_BYTES = 1 << 21  # every device allocation is smaller: a bad count is caught on the device side
DEVICE_SIZES = [0, 1, 8, 4096, 1 << 20]
COUNTS = [0, 1, 8, 4096, 4097, 1 << 20, (1 << 20) + 1] + HUGE_INTS + [2**64 - 1]


def load_runtime() -> ctypes.CDLL:
    spec = importlib.util.find_spec("torch_npu")
    lib = os.path.join(os.path.dirname(spec.origin), "lib", "libnpu_runtime.so")
    rt = ctypes.CDLL(lib)
    P, S, I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int32
    sigs = {
        "nrtSetDevice": [I], "nrtGetDevice": [P], "nrtGetDeviceCount": [P], "nrtDeviceSynchronize": [],
        "nrtMalloc": [P, S], "nrtFree": [P], "nrtMemGetInfo": [P, P], "nrtPointerGetDevice": [P, P],
        "nrtMallocHost": [P, S], "nrtFreeHost": [P],
        "nrtMemcpy": [P, P, S, ctypes.c_int], "nrtMemcpyAsync": [P, P, S, ctypes.c_int, P],
        "nrtMemsetAsync": [P, ctypes.c_int, S, P],
        "nrtStreamCreate": [P], "nrtStreamDestroy": [P], "nrtStreamSynchronize": [P],
        "nrtStreamQuery": [P], "nrtStreamGetDevice": [P, P], "nrtStreamWaitEvent": [P, P],
        "nrtEventCreate": [P], "nrtEventDestroy": [P], "nrtEventRecord": [P, P],
        "nrtEventSynchronize": [P], "nrtEventQuery": [P], "nrtEventElapsedTime": [P, P, P],
        "nrtGetDeviceProperties": [I, P], "nrtMemGetAllocationGranularity": [P],
        "nrtReserveMemAddress": [P, S], "nrtReleaseMemAddress": [P], "nrtMapMem": [P, S],
        "nrtUnmapMem": [P, S],
    }
    for name, args in sigs.items():
        fn = getattr(rt, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    rt.nrtGetRecentErrMsg.restype = ctypes.c_char_p
    rt.nrtGetRecentErrMsg.argtypes = []
    return rt


class World:
    """Handles and pointers of one case: live, destroyed and made up, for the calls to pick from."""

    def __init__(self, rt, journal):
        self.rt = rt
        self.journal = journal
        self.host = ctypes.create_string_buffer(HOST_BYTES)
        self.streams, self.events, self.ptrs, self.reserved = [None], [None], [None], []
        self.dead_streams, self.dead_events, self.dead_ptrs = [], [], []
        self.problems = []

    def call(self, name, *args):
        self.journal.note(f"runtime_api: {name}{args!r}")
        rc = getattr(self.rt, name)(*args)
        message = self.rt.nrtGetRecentErrMsg() or b""
        if not 0 <= rc <= MAX_ERROR:
            self.problems.append(f"{name}{args!r} returned undefined code {rc}")
        elif rc not in (0, 7) and len(message) < 8:  # 7: NOT_READY is an answer, not a failure
            self.problems.append(f"{name}{args!r} failed with code {rc} but no error message")
        return rc

    def out(self):
        return ctypes.c_void_p()

    def cleanup(self):
        self.rt.nrtSetDevice(0)
        self.rt.nrtDeviceSynchronize()
        for s in self.streams[1:]:
            self.rt.nrtStreamDestroy(s)
        for e in self.events[1:]:
            self.rt.nrtEventDestroy(e)
        for p in self.ptrs[1:]:
            self.rt.nrtFree(p)
        for p in self.reserved:
            self.rt.nrtReleaseMemAddress(p)
        self.rt.nrtGetRecentErrMsg()


def _pick(draw, live, dead, made_up=(1, 2**40, 2**64 - 1)):
    pool = list(live) + list(dead) + list(made_up)
    return pool[draw(st.integers(0, len(pool) - 1))]


def _device_ptr(draw, w):
    base = _pick(draw, w.ptrs[1:], w.dead_ptrs, (None, 0x10, 2**47))
    if base is not None and draw(st.booleans()):
        base += draw(st.sampled_from([1, 4095, 4096, 1 << 20, 1 << 30]))
    return base


def _create(w, api: str, live: list) -> None:
    """Create a stream or event; a created handle joins the live ones."""
    handle = w.out()
    if w.call(api, ctypes.byref(handle)) == 0:
        live.append(handle.value)


def _destroy(w, api: str, handle, owned, live: list, dead: list) -> None:
    """Destroy `handle`; one the fuzzer created (in `owned`) moves from live to dead."""
    if w.call(api, handle) == 0 and handle in owned:
        live.remove(handle)
        dead.append(handle)


@st.composite
def steps(draw, w):
    op = draw(st.sampled_from([
        "malloc", "free", "memcpy", "memcpy_async", "memset", "stream_create", "stream_destroy",
        "stream_sync", "stream_query", "stream_device", "event_create", "event_destroy", "event_record",
        "event_sync", "event_query", "event_elapsed", "wait_event", "set_device", "properties",
        "pointer_device", "reserve", "map", "null_out",
    ]))
    return op


def step(draw, w: World, op: str) -> str:
    stream = lambda: _pick(draw, w.streams, w.dead_streams)  # noqa: E731
    event = lambda: _pick(draw, w.events[1:], w.dead_events, (None, 3, 2**63))  # noqa: E731
    count = draw(st.sampled_from(COUNTS))
    if op == "malloc":
        p = w.out()
        if w.call("nrtMalloc", ctypes.byref(p), draw(st.sampled_from(DEVICE_SIZES + HUGE_INTS))) == 0:
            w.ptrs.append(p.value)
    elif op == "free":
        p = _device_ptr(draw, w)
        if w.call("nrtFree", p) == 0 and p in w.ptrs:
            w.ptrs.remove(p)
            w.dead_ptrs.append(p)
    elif op in ("memcpy", "memcpy_async"):
        kind = draw(st.sampled_from([0, 1, 2, 3, -1, 4, 99]))
        # A host-side slot gets the host buffer or, to check the kind is enforced, a live device
        # pointer; a made-up or freed host address cannot be validated by any runtime.
        host = lambda: _pick(draw, [ctypes.addressof(w.host)] * 3, w.ptrs[1:], ())  # noqa: E731
        dst = host() if kind in (0, 2) else _device_ptr(draw, w)
        src = host() if kind in (0, 1) else _device_ptr(draw, w)
        if kind in (0, 1, 2) and count > HOST_BYTES:
            count = HOST_BYTES  # a host buffer overrun is the caller's bug, not the runtime's
        args = (dst, src, count, kind) + ((stream(),) if op == "memcpy_async" else ())
        w.call("nrtMemcpy" if op == "memcpy" else "nrtMemcpyAsync", *args)
    elif op == "memset":
        w.call("nrtMemsetAsync", _device_ptr(draw, w), draw(st.integers(-1, 300)), count, stream())
    elif op == "stream_create":
        _create(w, "nrtStreamCreate", w.streams)
    elif op == "stream_destroy":
        _destroy(w, "nrtStreamDestroy", stream(), w.streams[1:], w.streams, w.dead_streams)
    elif op == "stream_sync":
        w.call("nrtStreamSynchronize", stream())
    elif op == "stream_query":
        w.call("nrtStreamQuery", stream())
    elif op == "stream_device":
        d = ctypes.c_int32()
        w.call("nrtStreamGetDevice", stream(), ctypes.byref(d))
    elif op == "event_create":
        _create(w, "nrtEventCreate", w.events)
    elif op == "event_destroy":
        _destroy(w, "nrtEventDestroy", event(), w.events, w.events, w.dead_events)
    elif op == "event_record":
        w.call("nrtEventRecord", event(), stream())
    elif op == "event_sync":
        w.call("nrtEventSynchronize", event())
    elif op == "event_query":
        w.call("nrtEventQuery", event())
    elif op == "event_elapsed":
        ms = ctypes.c_float()
        w.call("nrtEventElapsedTime", ctypes.byref(ms), event(), event())
    elif op == "wait_event":
        w.call("nrtStreamWaitEvent", stream(), event())
    elif op == "set_device":
        w.call("nrtSetDevice", draw(st.sampled_from([0, 1, -1, 7, 999, 2**31 - 1, -(2**31)])))
    elif op == "properties":
        buf = ctypes.create_string_buffer(4096)
        w.call("nrtGetDeviceProperties", draw(st.sampled_from([0, -1, 999])), buf)
    elif op == "pointer_device":
        d = ctypes.c_int32()
        w.call("nrtPointerGetDevice", _device_ptr(draw, w), ctypes.byref(d))
    elif op == "reserve":
        p = w.out()
        if w.call("nrtReserveMemAddress", ctypes.byref(p), count) == 0:
            w.reserved.append(p.value)
    elif op == "map":
        base = w.reserved[-1] if w.reserved and draw(st.booleans()) else _device_ptr(draw, w)
        name = draw(st.sampled_from(["nrtMapMem", "nrtUnmapMem"]))
        w.call(name, base, count)
    elif op == "null_out":
        name = draw(st.sampled_from(["nrtMalloc", "nrtStreamCreate", "nrtEventCreate", "nrtGetDevice",
                                     "nrtGetDeviceCount", "nrtMallocHost"]))
        args = (None, 64) if name in ("nrtMalloc", "nrtMallocHost") else (None,)
        w.call(name, *args)
    return op


def run(examples: int, journal, seed=None) -> list[str]:
    rt = load_runtime()
    problems: list[str] = []

    @hypothesis_settings(examples, seed)
    @given(st.data())
    def case(data):
        w = World(rt, journal)
        ops = data.draw(st.lists(steps(w), min_size=1, max_size=12))
        journal.case(f"runtime_api: {ops}")
        try:
            for op in ops:
                step(data.draw, w, op)
        finally:
            w.cleanup()
        for p in w.problems:
            problems.append(f"{p} (sequence {ops})")

    case()
    return problems
