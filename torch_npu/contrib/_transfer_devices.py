"""Argument rewriting for transfer_to_npu: "cuda" devices -> npu, nccl -> hccl, the CUDA profiler activity -> npu.

Only values that are certainly CUDA devices are touched ("cuda", "cuda:N", torch.device("cuda", N) and dicts /
lists of them); integer ids already mean the current accelerator (npu) in torch.
"""

from __future__ import annotations

import functools
import inspect

import torch

_DEVICE_KWARGS = ("device", "device_type", "device_id", "device_ids", "output_device", "pin_memory_device",
                  "map_location")


def _cuda_string(s: str) -> bool:
    if s == "cuda":
        return True
    head, sep, tail = s.partition(":")
    return head == "cuda" and sep == ":" and tail.isdigit()


def to_npu(value):
    """The npu counterpart of a CUDA device (string, torch.device, or a dict / list / tuple of them);
    anything else unchanged."""
    if isinstance(value, str):
        return "npu" + value[4:] if _cuda_string(value) else value
    if isinstance(value, torch.device):
        return torch.device("npu", value.index) if value.type == "cuda" else value
    if isinstance(value, dict):
        return {to_npu(k): to_npu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_npu(v) for v in value)
    return value


def _is_device_like(value) -> bool:
    return (isinstance(value, str) and _cuda_string(value)) or \
        (isinstance(value, torch.device) and value.type == "cuda") or \
        (isinstance(value, (list, tuple)) and any(_is_device_like(v) for v in value))


def mapping_device_kwargs(fn):
    """Wrap fn so that CUDA devices among its device keywords (and positional CUDA devices) become npu."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        if any(_is_device_like(a) for a in args):
            args = tuple(to_npu(a) if _is_device_like(a) else a for a in args)
        for k in _DEVICE_KWARGS:
            if k in kwargs:
                kwargs[k] = to_npu(kwargs[k])
        return fn(*args, **kwargs)

    return wrapped


def mapping_to(fn):
    """Tensor.to / Module.to: the device may be the first positional argument (after self)."""

    @functools.wraps(fn)
    def wrapped(self, *args, **kwargs):
        if args and _is_device_like(args[0]):
            args = (to_npu(args[0]),) + args[1:]
        if "device" in kwargs:
            kwargs["device"] = to_npu(kwargs["device"])
        return fn(self, *args, **kwargs)

    return wrapped


def mapping_map_location(fn):
    """torch.load: map_location's CUDA devices become npu; without one, CUDA-saved tensors load onto npu."""

    @functools.wraps(fn)
    def wrapped(f, map_location=None, *args, **kwargs):
        cuda_to_npu = {"cuda": "npu", **{f"cuda:{i}": f"npu:{i}" for i in range(torch.npu.device_count())}}
        if map_location is None:
            map_location = cuda_to_npu
        elif isinstance(map_location, dict):
            # Keys are the locations saved in the file: keep "cuda:N" keys (and add their npu spelling).
            mapped = dict(cuda_to_npu)
            for key, value in map_location.items():
                mapped[key] = mapped[to_npu(key)] = to_npu(value)
            map_location = mapped
        else:
            map_location = to_npu(map_location)
        return fn(f, map_location, *args, **kwargs)

    return wrapped


def backend_name(name):
    """nccl -> hccl, also inside "cpu:gloo,cuda:nccl" device:backend lists."""
    if not isinstance(name, str):
        return name
    parts = []
    for part in name.split(","):
        dev, sep, backend = part.partition(":")
        if sep:
            parts.append(f"{to_npu(dev.strip())}:{'hccl' if backend.strip().lower() == 'nccl' else backend}")
        else:
            parts.append("hccl" if part.strip().lower() == "nccl" else part)
    return ",".join(parts)


def mapping_bound(*device_params: str, backend_params: tuple[str, ...] = ()):
    """Wrap fn so that the named parameters (given or defaulted) are mapped: devices to npu, backends to hccl."""

    def wrapper(fn):
        sig = inspect.signature(fn)
        params = {p: to_npu for p in device_params} | {p: backend_name for p in backend_params}
        defaults = {p: sig.parameters[p].default for p in params if p in sig.parameters}

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError:
                return fn(*args, **kwargs)  # let fn raise its own message
            for p, convert in params.items():
                if p in bound.arguments:
                    bound.arguments[p] = convert(bound.arguments[p])
                elif p in defaults and defaults[p] is not inspect.Parameter.empty:
                    mapped = convert(defaults[p])
                    if mapped is not defaults[p] and mapped != defaults[p]:
                        bound.arguments[p] = mapped
            return fn(*bound.args, **bound.kwargs)

        return wrapped

    return wrapper


def mapping_backend(fn):
    """init_process_group / new_group: backend nccl -> hccl, device_id cuda -> npu."""
    return mapping_bound("device_id", backend_params=("backend",))(fn)


def mapping_activities(fn):
    """torch.profiler.profile(activities=[ProfilerActivity.CUDA]) records npu activity instead."""
    from torch.profiler import ProfilerActivity

    @functools.wraps(fn)
    def wrapped(self, *args, **kwargs):
        acts = kwargs.get("activities")
        if acts is not None:
            kwargs["activities"] = [ProfilerActivity.PrivateUse1 if a == ProfilerActivity.CUDA else a for a in acts]
        return fn(self, *args, **kwargs)

    return wrapped


def mapping_use_cuda(fn):
    """torch.autograd.profiler.profile(use_cuda=True) profiles npu instead."""

    @functools.wraps(fn)
    def wrapped(self, *args, **kwargs):
        if kwargs.get("use_cuda"):
            kwargs["use_cuda"] = False
            kwargs.setdefault("use_device", "npu")
        elif kwargs.get("use_device") == "cuda":
            kwargs["use_device"] = "npu"
        return fn(self, *args, **kwargs)

    return wrapped


class _MappedClassMeta(type):
    """The metaclass of a class stand-in: isinstance / issubclass and attribute reads answer as the
    original class does, so code that checks `isinstance(g, torch.Generator)` or reads
    `torch.Generator.manual_seed` keeps working."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls._original)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, cls._original)

    def __getattr__(cls, name):
        return getattr(cls._original, name)


def mapping_class(original):
    """A stand-in for a device-taking class (torch.Generator, torch.Event) whose construction maps CUDA
    devices (positional or `device=`) to npu and returns an instance of the original class."""
    construct = mapping_device_kwargs(original)
    return _MappedClassMeta(original.__name__, (), {
        "_original": original,
        "__new__": staticmethod(lambda cls, *args, **kwargs: construct(*args, **kwargs)),
        "__module__": original.__module__, "__qualname__": original.__qualname__, "__doc__": original.__doc__})
