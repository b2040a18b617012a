"""npu streams and events: thin subclasses of torch.Stream / torch.Event (the device guard does the work)."""

import weakref

import torch

from torch_npu.npu.device import _index


class Stream(torch.Stream):
    """An in-order queue of device work on one npu (a runtime stream with its own worker)."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if kwargs:  # wrapping an existing stream (stream_id, device_index, device_type)
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, torch.device("npu", _index(device)), priority=priority)

    def wait_event(self, event):
        event.wait(self)

    def wait_stream(self, stream):
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = event if event is not None else Event()
        event.record(self)
        return event

    @property
    def npu_stream(self) -> int:
        """The runtime stream's handle (the value torch_npu extensions pass to their kernels)."""
        from torch_npu import _C

        return _C._stream_handle(self.stream_id, self.device_index, self.device_type)

    def __repr__(self):
        return f"<torch_npu.npu.Stream device=npu:{self.device_index} npu_stream={self.npu_stream:#x}>"

    def __eq__(self, other):
        return isinstance(other, torch.Stream) and super().__eq__(other)

    def __hash__(self):
        return hash((self.stream_id, self.device_index))


class SyncLaunchStream(Stream):
    """A stream whose op launches are synchronous: every op launched while it is current has finished
    (and raised its error, if any) when the call returns, as with TASK_QUEUE_ENABLE=0 for that stream
    only; the other streams stay asynchronous. For debugging: an error points at the line that
    caused it. Every SyncLaunchStream of a device is the device's one sync-launch stream."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if kwargs:
            return super().__new__(cls, **kwargs)
        from torch_npu import _C

        stream_id, device_index, device_type = _C._sync_launch_stream(_index(device))
        return super().__new__(cls, stream_id=stream_id, device_index=device_index, device_type=device_type)


class Event(torch.Event):
    """A marker on a stream: query / synchronize / wait, and timing between two events."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        event = super().__new__(cls, torch.device("npu"), enable_timing=enable_timing,
                                blocking=blocking, interprocess=interprocess)
        event.enable_timing = enable_timing
        return event

    def elapsed_time(self, end_event) -> float:
        """Milliseconds from this event to `end_event` (both recorded, completed, with timing)."""
        if not (self.enable_timing and getattr(end_event, "enable_timing", False)):
            raise RuntimeError("both events must be created with enable_timing=True")
        from torch_npu import _C

        return _C._event_elapsed_time(self.event_id, end_event.event_id)

    def recorded_time(self) -> int:
        """When the event's last record completed, in microseconds of the host's monotonic clock
        (aclrtEventGetTimestamp's unit); waits for it first."""
        from torch_npu import _C

        self.synchronize()
        return _C._event_recorded_time(self.event_id)

    def record(self, stream=None):
        super().record(stream if stream is not None else current_stream())

    def __repr__(self):
        state = f"{self.event_id:#x}" if self.event_id else "uninitialized"
        return f"<torch_npu.npu.Event {state}>"

    def wait(self, stream=None):
        super().wait(stream if stream is not None else current_stream())


class ExternalEvent:
    """A flag that streams set (record), clear (reset) and wait for (wait), all in stream order and
    all capturable: a graph that captured ``wait`` blocks on each replay until the flag is set, e.g. by
    a stream that updates the graph's task groups first (ACL's external events)."""

    def __init__(self):
        from torch_npu import _C

        self._handle = _C._npu_external_event_create()
        self._finalizer = weakref.finalize(self, _C._npu_external_event_destroy, self._handle)

    @staticmethod
    def _where(stream):
        s = stream if stream is not None else current_stream()
        return s.stream_id, s.device_index, s.device_type

    def record(self, stream=None):
        from torch_npu import _C

        _C._npu_external_event_record(self._handle, *self._where(stream))

    def wait(self, stream=None):
        from torch_npu import _C

        _C._npu_external_event_wait(self._handle, *self._where(stream))

    def reset(self, stream=None):
        from torch_npu import _C

        _C._npu_external_event_reset(self._handle, *self._where(stream))

    def query(self) -> bool:
        from torch_npu import _C

        return _C._npu_external_event_query(self._handle)


def _wrap(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device=None) -> Stream:
    return _wrap(torch.accelerator.current_stream(torch.device("npu", _index(device))))


def default_stream(device=None) -> Stream:
    idx = _index(device)
    return Stream(stream_id=0, device_index=idx, device_type=current_stream(idx).device_type)


def set_stream(stream: torch.Stream) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes `stream_ctx` current on its device (and that device current) inside a with block; None
    does nothing."""

    def __init__(self, stream_ctx):
        self.stream = stream_ctx
        self.prev_stream = None
        self.prev_device = None

    def __enter__(self):
        if self.stream is None:
            return self
        from torch_npu import _C

        self.prev_device = _C._current_device()
        if self.stream.device_index != self.prev_device:
            _C._set_device(self.stream.device_index)
        self.prev_stream = current_stream(self.stream.device_index)
        torch.accelerator.set_stream(self.stream)
        return self

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        from torch_npu import _C

        torch.accelerator.set_stream(self.prev_stream)
        _C._set_device(self.prev_device)
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)


def erase_stream(tensor: torch.Tensor, stream: torch.Stream) -> None:
    """Undoes tensor.record_stream(stream): when the tensor is freed, its memory is reused without waiting
    for the work queued on `stream` so far. For code that has already made the tensor's stream wait for
    `stream` (an event, wait_stream) and wants the memory back at once (torch_npu.erase_stream)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"erase_stream takes a tensor, got {type(tensor).__name__}")
    if not isinstance(stream, torch.Stream):
        raise TypeError(f"erase_stream takes a torch.npu.Stream, got {type(stream).__name__}")
    from torch_npu import _C

    _C._erase_stream(tensor, stream.stream_id, stream.device_index, int(stream.device_type))


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode) -> None:
    """What happens when an operation makes the host wait for the npu (a blocking copy: .cpu(), .item(),
    .tolist(), a copy from pageable memory): "default" / 0 nothing, "warn" / 1 a warning naming it,
    "error" / 2 a RuntimeError instead. Explicit torch.npu.synchronize() is never reported."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError(f'invalid value of debug_mode {debug_mode!r}, expected one of "default", "warn", '
                               '"error"')
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    from torch_npu import _C

    _C._set_sync_debug_mode(int(debug_mode))


def get_sync_debug_mode() -> int:
    """The mode set_sync_debug_mode set: 0, 1 or 2."""
    from torch_npu import _C

    return _C._get_sync_debug_mode()
