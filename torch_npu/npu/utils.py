"""torch_npu.npu.utils: what the device is (SoC, CANN version, numeric capabilities), the overflow
flag (float status) as torch_npu names its helpers, and the device's health controls (the op timeout,
stress detection, memory error checks).

The software NPU raises a per-device flag when an op produces inf/nan from finite inputs. Checking
costs time, so it starts with the first use of the flag (the overflow functions here, or the
npu_*_float_status ops) or with NPU_SIM_OVERFLOW_CHECK=1, and overflows before that are not seen.
"""

import warnings

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
from torch_npu.npu.streams import StreamContext, current_stream, default_stream, set_stream, stream  # noqa: F401

_CANN_MODULES = ("CANN", "RUNTIME", "COMPILER", "HCCL", "TOOLKIT", "OPP", "OPP_KERNEL", "DRIVER")


def _check_module(module):
    if module not in _CANN_MODULES:
        raise ValueError(f"unknown CANN module {module!r}; use one of {', '.join(_CANN_MODULES)}")


def get_cann_version(module="CANN") -> str:
    """The CANN version the device reports ("8.5.0"; NPU_SIM_CANN_VERSION sets it). Every module
    (RUNTIME, COMPILER, OPP...) of the software NPU reports the same version."""
    _check_module(module)
    return _C._get_cann_version()


def npurt():
    """The runtime's own calls, as torch.cuda.cudart() gives CUDA's: npuHostRegister(ptr, size, flags)
    pins existing host memory (flags 0x10000000 pinned, 0x2 mapped), npuHostUnregister(ptr),
    npuStreamCreate(address of a stream handle), npuStreamDestroy(stream). Pointers are integers
    (tensor.data_ptr(), ctypes addresses); each returns the runtime's error code, 0 on success."""
    return _C._npurt


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


def set_op_timeout_ms(timeout) -> None:
    """Bounds how long one op may run, in milliseconds (0: no bound). A synchronising call (synchronize,
    .cpu(), .item(), ...) that waits for an op running longer raises a RuntimeError naming the op; the
    software NPU's watchdog, which NPU_SIM_TASK_TIMEOUT also sets (docs/reliability.md)."""
    if isinstance(timeout, bool) or not isinstance(timeout, int):
        raise TypeError(f"set_op_timeout_ms: timeout must be an int (milliseconds), got {type(timeout).__name__}")
    if timeout < 0:
        raise ValueError(f"set_op_timeout_ms: can't convert negative value to unsigned int: {timeout} "
                         "(milliseconds; 0 turns the timeout off)")
    if timeout >= 2 ** 32:
        raise OverflowError(f"set_op_timeout_ms: Overflow when unpacking {timeout}: the timeout is an unsigned "
                            "32-bit count of milliseconds")
    _C._npu_set_op_timeout_ms(timeout)


def current_blas_handle():
    """None, with a warning: NPUs (and the software NPU) have no BLAS handle to hand out."""
    warnings.warn("NPU does not use blas handle.")
    return None


def check_uce_in_memory(device_id) -> int:
    """Whether npu:`device_id`'s memory holds uncorrectable ECC errors (UCE): 0 for none. The software
    NPU's memory is host memory, whose uncorrectable errors stop the machine rather than being
    reported to the process, so it always answers 0."""
    from torch_npu.npu.npu_config import _check_device_id

    _check_device_id(device_id)
    return 0


def _aic_check(device) -> bool:
    """The device computes a known workload (matmul, convolution, reduction) as the CPU does."""
    gen = torch.Generator().manual_seed(2024)
    a, b = torch.randn(96, 80, generator=gen), torch.randn(80, 64, generator=gen)
    x, w = torch.randn(2, 3, 12, 12, generator=gen), torch.randn(4, 3, 3, 3, generator=gen)
    expected = [a @ b, torch.nn.functional.conv2d(x, w, padding=1), (a * a).sum(1)]
    got = [a.to(device) @ b.to(device), torch.nn.functional.conv2d(x.to(device), w.to(device), padding=1),
           (a.to(device) * a.to(device)).sum(1)]
    return all(torch.allclose(g.cpu(), e, rtol=1e-4, atol=1e-4) for g, e in zip(got, expected))


def _hccs_check(device) -> bool:
    """Every rank of the default process group sums a known tensor over the group and gets the sum."""
    import torch.distributed as dist

    world, rank = dist.get_world_size(), dist.get_rank()
    t = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(t)
    return bool((t.cpu() == world * (world + 1) / 2).all())


def stress_detect(detect_type="aic") -> int:
    """Checks that the current device computes correctly: "aic" runs a known workload (matmul,
    convolution, reduction) on it and compares with the CPU; "hccs" (needs torch.distributed
    initialised) sums a known tensor over the default process group. 0 when the check passes, 1 when
    it fails or cannot run (with a warning saying why), as torch_npu answers."""
    if detect_type not in ("aic", "hccs"):
        warnings.warn("Detect_type should be `aic` or `hccs`. For details, `aic` is for `Online aicore detect`, "
                      "and `hccs` is for `Online p2p detect`.")
        return 1
    device = torch.device("npu", torch.npu.current_device())
    if detect_type == "hccs":
        import torch.distributed as dist

        if not dist.is_initialized():
            warnings.warn("torch.distributed should be initialized for p2p detection.")
            return 1
    try:
        ok = _aic_check(device) if detect_type == "aic" else _hccs_check(device)
    except RuntimeError as e:
        warnings.warn(f"stress_detect({detect_type!r}): the check failed on {device}: {e}")
        return 1
    if not ok:
        warnings.warn(f"stress_detect({detect_type!r}): {device} computed a known workload wrongly")
    return 0 if ok else 1
