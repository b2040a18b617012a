"""Tensor.npu / Tensor.to / Module.to / storage .npu(): an npu index the caller wrote is checked before
torch.device sees it, since torch.device keeps indices in 8 bits (999 would become -25, 256 npu:0)."""

import re

import torch
from torch.overrides import handle_torch_function, has_torch_function_unary

from torch_npu.npu.device import _check_index

_NPU_INDEX = re.compile(r"\s*npu\s*:\s*(-?\d+)\s*")


def _check_written(device) -> None:
    """Raise naming what was written if `device` (an int or "npu:N") is an npu index that does not exist."""
    kind = type(device)
    if kind is int:
        if device >= 0:  # PyTorch refuses negative integers itself
            _check_index(device, device)
    elif kind is str:
        match = _NPU_INDEX.fullmatch(device)
        if match:
            _check_index(int(match.group(1)), device)


def _npu_target(device) -> torch.device:
    """The device Tensor.npu(device) moves to: None is the current device."""
    if device is None:
        return torch.device("npu", torch.npu.current_device())
    if isinstance(device, bool) or not isinstance(device, (int, str, torch.device)):
        raise TypeError(f"npu(): expected a device index, 'npu:N' or torch.device, got {device!r}")
    if isinstance(device, int):
        if device < 0:
            raise RuntimeError(f"npu({device}): a device index must not be negative; "
                               f"use an index in [0, {torch.npu.device_count()})")
        _check_written(device)
        return torch.device("npu", device)
    if isinstance(device, str):
        _check_written(device)
        device = torch.device(device)
    if device.type != "npu":
        raise RuntimeError(f"npu(): invalid device {str(device)!r}, must be an npu device")
    # A torch.device whose index already wrapped goes to .to(), whose check explains the wrap.
    return torch.device("npu", torch.npu.current_device()) if device.index is None else device


def _tensor_npu(self, device=None, non_blocking=False, **kwargs):
    """Copy of this tensor in npu memory (this tensor if it is already there): Tensor.cuda's npu twin."""
    if has_torch_function_unary(self):
        return handle_torch_function(_tensor_npu, (self,), self, device=device, non_blocking=non_blocking,
                                     **kwargs)
    return self.to(device=_npu_target(device), non_blocking=non_blocking, **kwargs)


def _checking_to(original):
    def to(self, *args, **kwargs):
        if args:
            _check_written(args[0])
        if kwargs:
            _check_written(kwargs.get("device"))
        return original(self, *args, **kwargs)

    to.__name__, to.__qualname__, to.__doc__ = original.__name__, original.__qualname__, original.__doc__
    to.__wrapped__ = original
    return to


def _storage_npu(original):
    def npu(self, device=None, non_blocking=False):
        if device is not None:
            _check_written(device)
        return original(self, device, non_blocking)

    npu.__name__, npu.__doc__ = original.__name__, original.__doc__
    return npu


def install() -> None:
    """Replace the methods PyTorch generated for the backend and wrap .to (after generation)."""
    _tensor_npu.__name__ = "npu"
    torch.Tensor.npu = _tensor_npu
    torch.Tensor.to = _checking_to(torch.Tensor.to)
    torch.nn.Module.to = _checking_to(torch.nn.Module.to)
    torch.storage._StorageBase.npu = _storage_npu(torch.storage._StorageBase.npu)
