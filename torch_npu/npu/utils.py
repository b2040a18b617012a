"""torch_npu.npu.utils: what the device is (SoC, CANN version, numeric capabilities) and the
overflow flag (float status) as torch_npu names its helpers.

The software NPU raises a per-device flag when an op produces inf/nan from finite inputs. Checking
costs time, so it starts with the first use of the flag (the overflow functions here, or the
npu_*_float_status ops) or with NPU_SIM_OVERFLOW_CHECK=1, and overflows before that are not seen.
"""

import torch

from torch_npu import _C
from torch_npu.npu.device import (  # noqa: F401  (torch_npu.npu.utils re-exports the device functions)
    current_device,
    device,
    device_of,
    get_device_name,
    set_device,
    synchronize,
)
from torch_npu.npu.streams import current_stream, default_stream, set_stream, stream  # noqa: F401

_CANN_MODULES = ("CANN", "RUNTIME", "COMPILER", "HCCL", "TOOLKIT", "OPP", "OPP_KERNEL", "DRIVER")


def _check_module(module):
    if module not in _CANN_MODULES:
        raise ValueError(f"unknown CANN module {module!r}; use one of {', '.join(_CANN_MODULES)}")


def get_cann_version(module="CANN") -> str:
    """The CANN version the device reports ("8.5.0"; NPU_SIM_CANN_VERSION sets it). Every module
    (RUNTIME, COMPILER, OPP...) of the software NPU reports the same version."""
    _check_module(module)
    return _C._get_cann_version()


def _is_gte_cann_version(version, module="CANN") -> bool:
    """True when the reported version is >= `version` ("8.0.RC1" < "8.0.RC2" < "8.0.0" < "8.1.RC1")."""
    _check_module(module)
    return bool(_C._is_gte_cann_version(str(version)))


def get_soc_version() -> int:
    """torch_npu's number of the SoC (Ascend910B1 is 220, Ascend910B3 223, Ascend910_9391 250...)."""
    return _C._get_soc_version()


def is_support_inf_nan() -> bool:
    """Whether the SoC computes with IEEE inf/nan (Ascend910B and later) rather than saturating."""
    return _C._is_support_inf_nan()


def is_bf16_supported(including_emulation: bool = False) -> bool:
    """Whether the SoC computes bfloat16 (Ascend910B and later)."""
    return _C._is_bf16_supported()


def _device(device=None) -> torch.device:
    if device is None:
        return torch.device("npu", current_device())
    device = torch.device(device)
    return device if device.index is not None else torch.device("npu", current_device())


def enable_overflow_detection(enabled: bool = True) -> None:
    """Turns the overflow check of every op on (or off) for the process."""
    from torch_npu import _C

    _C._set_overflow_detection(bool(enabled))


def is_overflow_detection_enabled() -> bool:
    from torch_npu import _C

    return _C._overflow_detection_enabled()


def get_npu_overflow_flag(device=None) -> bool:
    """True if an op on `device` produced inf/nan from finite inputs since the flag was cleared
    (waits for the work queued on the current stream)."""
    status = torch.ops.npu.npu_get_float_status(torch.zeros(8, device=_device(device)))
    return bool(status.cpu()[0] != 0)


def clear_npu_overflow_flag(device=None) -> None:
    """Clears the flag of `device`, in order with the work queued on the current stream."""
    torch.ops.npu.npu_clear_float_status(torch.zeros(8, device=_device(device)))


def npu_check_overflow(grad=None, device=None) -> bool:
    """Whether `grad` (a tensor) holds inf/nan; without one, the device's overflow flag."""
    if isinstance(grad, torch.Tensor):
        return not bool(torch.isfinite(grad).all())
    if isinstance(grad, float):
        return grad != grad or grad in (float("inf"), float("-inf"))
    return get_npu_overflow_flag(device)
