"""torch.npu.utils: the overflow flag (float status) as torch_npu names its helpers.

The software NPU raises a per-device flag when an op produces inf/nan from finite inputs. Checking
costs time, so it starts with the first use of the flag (any function here, or the
npu_*_float_status ops) or with NPU_SIM_OVERFLOW_CHECK=1, and overflows before that are not seen.
"""

import torch


def _device(device=None) -> torch.device:
    from torch_npu.npu import current_device

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
    import torch_npu

    status = torch_npu.npu_get_float_status(torch.zeros(8, device=_device(device)))
    return bool(status.cpu()[0] != 0)


def clear_npu_overflow_flag(device=None) -> None:
    """Clears the flag of `device`, in order with the work queued on the current stream."""
    import torch_npu

    torch_npu.npu_clear_float_status(torch.zeros(8, device=_device(device)))


def npu_check_overflow(grad=None, device=None) -> bool:
    """Whether `grad` (a tensor) holds inf/nan; without one, the device's overflow flag."""
    if isinstance(grad, torch.Tensor):
        return not bool(torch.isfinite(grad).all())
    if isinstance(grad, float):
        return grad != grad or grad in (float("inf"), float("-inf"))
    return get_npu_overflow_flag(device)
