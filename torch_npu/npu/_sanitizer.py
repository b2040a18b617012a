"""The stream-race checker: reports device memory accessed from two npu streams without a sync between.

Enabled by `TORCH_NPU_SANITIZER=1` (at import) or `torch_npu.npu._sanitizer.enable_npu_sanitizer()`.
As PyTorch's CUDA sanitizer does, a TorchDispatchMode sees every op with the tensors it reads and
writes and the stream it runs on, and the adapter's trace hooks (csrc/core/NPUTrace.*) report event
record / wait, stream / event / device synchronisation and allocations. The happens-before
bookkeeping is PyTorch's own (torch.cuda._sanitizer.EventHandler, which is device-neutral); what is
npu's here is where accesses and syncs come from and how a race is reported: both ops, the arguments
involved, both Python stack traces and where the tensor was allocated.
"""

import io
import os
import re
import sys
import traceback

import torch
from torch.cuda import _sanitizer as _csan
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from torch_npu import _C
from torch_npu.npu import _gpu_trace

__all__ = ["NPUSanitizerErrors", "enable_npu_sanitizer", "disable_npu_sanitizer", "is_enabled"]

_aten = torch.ops.aten
_FACTORY = re.compile("(new_.*|.*_like)")
_THIS_FILE = os.path.abspath(__file__)
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


class NPUSanitizerErrors(RuntimeError):
    """Raised by the op that completed a race; `errors` holds each unsynchronised access pair."""

    def __init__(self, errors):
        self.errors = errors
        super().__init__(
            f"npu stream-race checker: {len(errors)} unsynchronized access(es) between npu streams; "
            "order them with an event (stream.wait_event / wait_stream) or a synchronize\n"
            + "\n".join(_format_error(e) for e in errors)
        )


def _stream_name(key: int) -> str:
    device, stream_id = key >> 32, key & 0xFFFFFFFF
    return f"npu:{device} {'default stream' if stream_id == 0 else f'stream {stream_id}'}"


def _user_frames(stack: traceback.StackSummary) -> str:
    # PyTorch's own frames (dispatch, the trace callbacks) and this module's say nothing about the race.
    frames = [f for f in stack if os.path.abspath(f.filename) != _THIS_FILE
              and not os.path.abspath(f.filename).startswith(_TORCH_DIR)]
    return "".join(traceback.StackSummary.from_list(frames).format())


def _format_access(out: io.StringIO, access) -> None:
    what = "writing to" if access.type is _csan.AccessType.WRITE else "reading from"
    args = f" argument(s) {', '.join(access.aliases)}" if access.aliases else ""
    output = (" and" if args else "") + " the output" if access.is_output else ""
    out.write(f"  op: {access.operator}\n  {what}{args}{output}\n  Python stack trace:\n")
    out.write(_user_frames(access.stack_trace))


def _format_error(error) -> str:
    out = io.StringIO()
    cur, prev = error.current_access, error.previous_access
    out.write("============================\n")
    out.write(f"Possible data race on npu tensor memory at {hex(error.data_ptr)}\n")
    out.write(f"Access on {_stream_name(cur.stream)}:\n")
    _format_access(out, cur)
    out.write(f"Previous access on {_stream_name(prev.stream)}, with no event or sync in between:\n")
    _format_access(out, prev)
    if error.allocation_stack_trace:
        out.write("Tensor allocated at:\n" + _user_frames(error.allocation_stack_trace))
    else:
        out.write("Tensor allocation site unknown (allocated before the checker was enabled).\n")
    return out.getvalue()


class _NpuArguments(_csan.ArgumentHandler):
    """PyTorch's argument classifier, for npu tensors; also notes the device the op runs on."""

    def __init__(self):
        super().__init__()
        self.device_index = None

    def _handle_argument(self, value, is_write, metadata_only, name=None, is_output=False):
        if not (isinstance(value, torch.Tensor) and value.device.type == "npu"):
            return
        if self.device_index is None:
            self.device_index = value.device.index
        data_ptr = value.data_ptr() or id(value)  # two empty tensors must not look aliased
        if is_write:
            self.dataptrs_written.add(data_ptr)
        elif not metadata_only:
            self.dataptrs_read.add(data_ptr)
        self.tensor_aliases.setdefault(data_ptr, [])
        if name is not None:
            self.tensor_aliases[data_ptr].append(name)
        if is_output:
            self.outputs.add(data_ptr)


class _NpuSanitizerMode(TorchDispatchMode):
    def __init__(self, handler):
        super().__init__()
        self.handler = handler

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _aten.record_stream.default:  # bookkeeping, not device work
            return func(*args, **kwargs)
        is_factory = bool(_FACTORY.match(func._schema.name))
        arguments = _NpuArguments()
        arguments.parse_inputs(func._schema, args, kwargs, is_factory=is_factory)
        outputs = func(*args, **kwargs)
        arguments.parse_outputs(func._schema, outputs, is_factory=is_factory)
        if not (arguments.dataptrs_read or arguments.dataptrs_written):
            return outputs
        device = arguments.device_index
        stream = torch.npu.current_stream(device)
        errors = self.handler._handle_kernel_launch(
            _gpu_trace.stream_key(stream),
            arguments.dataptrs_read - arguments.dataptrs_written,
            arguments.dataptrs_written,
            arguments.outputs,
            func._schema,
            arguments.tensor_aliases,
        )
        if errors:
            error = NPUSanitizerErrors(errors)
            print(str(error), file=sys.stderr)
            raise error
        return outputs


class _Sanitizer:
    """One per process: the trace callbacks are registered once and feed the handler while enabled."""

    def __init__(self):
        self.handler = _csan.EventHandler()
        self.mode = None
        h = self.handler
        hooks = {
            "event_creation": h._handle_event_creation,
            "event_deletion": h._handle_event_deletion,
            "event_record": h._handle_event_record,
            "event_wait": h._handle_event_wait,
            "memory_allocation": h._handle_memory_allocation,
            "memory_deallocation": h._handle_memory_deallocation,
            "stream_creation": h._handle_stream_creation,
            "device_synchronization": h._handle_device_synchronization,
            "stream_synchronization": h._handle_stream_synchronization,
            "event_synchronization": h._handle_event_synchronization,
        }
        for kind, fn in hooks.items():
            getattr(_gpu_trace, f"register_callback_for_{kind}")(self._while_enabled(fn))
        torch._C._activate_gpu_trace()

    def _while_enabled(self, fn):
        def callback(*args):
            if self.mode is not None:
                fn(*args)
        return callback

    def enable(self):
        if self.mode is None:
            self.handler.__init__()  # a fresh history: nothing before enabling is known
            self.mode = _NpuSanitizerMode(self.handler)
            self.mode.__enter__()
            _C._set_npu_trace_enabled(True)

    def disable(self):
        if self.mode is not None:
            _C._set_npu_trace_enabled(False)
            mode, self.mode = self.mode, None
            mode.__exit__(None, None, None)


_sanitizer = None


def enable_npu_sanitizer() -> None:
    """Start checking: every later npu op is checked against the accesses of other streams."""
    global _sanitizer
    if _sanitizer is None:
        _sanitizer = _Sanitizer()
    _sanitizer.enable()


def disable_npu_sanitizer() -> None:
    if _sanitizer is not None:
        _sanitizer.disable()


def is_enabled() -> bool:
    return _sanitizer is not None and _sanitizer.mode is not None


def _from_env() -> None:
    if os.environ.get("TORCH_NPU_SANITIZER", "0") not in ("", "0"):
        enable_npu_sanitizer()
