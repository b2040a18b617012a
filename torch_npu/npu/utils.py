"""torch_npu.npu.utils: what the device is (SoC, CANN version, numeric capabilities)."""

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
