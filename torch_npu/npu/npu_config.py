"""torch.npu options: set_option, set_compile_mode, use_compatible_impl, matmul / conv flags, and the
cube / vector core limits of a device or stream (set_device_limit, set_stream_limit).

Options are stored process-wide (readable from C++ through c10_npu::option::GetOption) under
torch_npu's names. The software NPU compiles nothing and computes every op as PyTorch's CPU kernels
do, so compile modes, precision modes and HF32 switches do not change results; they are kept so that
scripts written for torch_npu run and can read back what they set.
"""

import inspect
import warnings
from enum import IntEnum

from torch_npu import _C

# option -> accepted values (None: any string; callable: a check).
_OPTION_VALUES = {
    "ACL_PRECISION_MODE": ("allow_fp32_to_fp16", "must_keep_origin_dtype"),
    "ACL_OP_SELECT_IMPL_MODE": ("high_performance", "high_precision"),
    "ACL_AICORE_NUM": lambda v: v.isdigit() and 1 <= int(v) <= 32,
    "ACL_OPTYPELIST_FOR_IMPLMODE": None,
    "ACL_OP_DEBUG_LEVEL": ("0", "1", "2", "3", "4"),
    "ACL_DEBUG_DIR": None,
    "ACL_OP_COMPILER_CACHE_MODE": ("disable", "enable", "force"),
    "ACL_OP_COMPILER_CACHE_DIR": None,
    "ACL_OP_DEBUG_OPTION": None,
}
_DEPRECATED_OPTIONS = {"ACL_OP_SELECT_IMPL_MODE", "ACL_OPTYPELIST_FOR_IMPLMODE"}


def _get(name):
    return _C._get_option(name)


def _npu_get_option(name):
    """torch_npu._C._npu_getOption: an option's value as bytes (b"enable"), or None when it was never set."""
    if not isinstance(name, str):
        raise TypeError(f"_npu_getOption: the option name must be a str, got {type(name).__name__}")
    if name == "ALLOW_INTERNAL_FORMAT":  # kept by the format layer (format_config.py), not the option table
        return b"enable" if _C._get_allow_internal_format() else b"disable"
    value = _C._get_option(name)
    return None if value is None else str(value).encode()


_C._npu_getOption = _npu_get_option


def set_option(option):
    """Set named options, e.g. {"ACL_PRECISION_MODE": "must_keep_origin_dtype"}; bad values raise."""
    if not isinstance(option, dict):
        raise TypeError(f"npu option must be a dict, got {type(option).__name__}")
    if option.get("MM_BMM_ND_ENABLE") in ("enable", "disable"):
        set_mm_bmm_format_nd(option["MM_BMM_ND_ENABLE"] == "enable")
    if "ALLOW_INTERNAL_FORMAT" in option:
        value = option["ALLOW_INTERNAL_FORMAT"]
        if value not in ("enable", "disable"):
            raise ValueError(f"value of ALLOW_INTERNAL_FORMAT should be in ['enable', 'disable'], but got {value}")
        _C._set_allow_internal_format(value == "enable")
    for name, value in option.items():
        value = str(value)
        accepted = _OPTION_VALUES.get(name)
        if callable(accepted) and not accepted(value):
            raise ValueError(f"value of {name} should satisfy {inspect.getsource(accepted).strip()}, "
                             f"but got {value}")
        if isinstance(accepted, tuple) and value not in accepted:
            raise ValueError(f"value of {name} should be in {list(accepted)}, but got {value}")
        if name in _DEPRECATED_OPTIONS:
            warnings.warn(f"{name} will be deprecated in a future version. The accuracy or performance "
                          "may not be optimal when configuring this option. We do not recommend setting it.")
        _C._set_option(name, value)


def set_compile_mode(jit_compile=False):
    """Choose online compilation of ops (jit_compile=True) or precompiled binaries (False). The
    software NPU has no op compiler, so both run the same kernels; is_jit_compile_false() reads it."""
    if not isinstance(jit_compile, bool):
        raise TypeError(f"set_compile_mode: jit_compile must be a bool, got {type(jit_compile).__name__}")
    _C._set_option("jitCompile", "enable" if jit_compile else "disable")


def is_jit_compile_false() -> bool:
    return _get("jitCompile") == "disable"


def set_aoe(dump_path):
    """Record an AOE (auto-tuning) dump path; the software NPU has no tuner, so nothing is dumped."""
    _C._set_option("autotune", "enable")
    _C._set_option("autotunegraphdumppath", str(dump_path))


_MM_BMM_ND_ENABLE = True


def set_mm_bmm_format_nd(is_nd=True):
    """Keep mm / bmm (and Linear) in ND format rather than FRACTAL_NZ."""
    global _MM_BMM_ND_ENABLE
    _MM_BMM_ND_ENABLE = bool(is_nd)


def get_mm_bmm_format_nd() -> bool:
    return _MM_BMM_ND_ENABLE


def use_compatible_impl(is_enable):
    """Ask ops to compute exactly as PyTorch's native kernels do where torch_npu's own differ. The
    software NPU always computes with PyTorch's kernels, so results are the same either way."""
    _C._set_option("TORCH_NPU_USE_COMPATIBLE_IMPL", "1" if is_enable else "0")


def are_compatible_impl_enabled() -> bool:
    return _get("TORCH_NPU_USE_COMPATIBLE_IMPL") == "1"


def _check_device_id(device) -> int:
    # torch_npu's checks and messages.
    from torch_npu.npu.device import device_count

    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"device must be an int, but got {type(device).__name__}")
    if device < 0 or device >= device_count():
        raise AssertionError(f"Invalid device id {device}: this process sees {device_count()} npu devices")
    return device


def _check_stream(stream):
    from torch_npu.npu.streams import Stream

    if stream is None:
        raise AssertionError("stream cannot be None")
    if not isinstance(stream, Stream):
        raise AssertionError(f"stream should be torch_npu.npu.Stream, could not be {type(stream)}")
    return dict(stream_id=stream.stream_id, device_index=stream.device_index, device_type=stream.device_type)


def _limits(get):
    return {"cube_core_num": get(0), "vector_core_num": get(1)}


def set_device_limit(device, cube_num=-1, vector_num=-1):
    """Limits the cube / vector cores that work on npu:`device` may use (-1 leaves a limit as it is).

    The software NPU computes on host threads: a vector-core limit gives the device's streams that
    share of the intra-op threads (at least one), e.g. 24 of 48 vector cores half of them. The cube
    limit is kept and reported (the software NPU has no separate matrix units). Streams with a limit
    of their own (set_stream_limit) follow theirs."""
    _check_device_id(device)
    if cube_num != -1:
        _C._npu_set_device_res_limit(device, 0, cube_num)
    if vector_num != -1:
        _C._npu_set_device_res_limit(device, 1, vector_num)


def get_device_limit(device):
    """{"cube_core_num": ..., "vector_core_num": ...}: npu:`device`'s limits (its core counts if unset)."""
    _check_device_id(device)
    return _limits(lambda kind: _C._npu_get_device_res_limit(device, kind))


def set_stream_limit(stream, cube_num=-1, vector_num=-1):
    """Limits the cores of the work launched on `stream` from now on (in stream order); -1 leaves a limit
    as it is. Overrides the device's limit for this stream (see set_device_limit)."""
    where = _check_stream(stream)
    if cube_num != -1:
        _C._npu_set_stream_res_limit(**where, type=0, value=cube_num)
    if vector_num != -1:
        _C._npu_set_stream_res_limit(**where, type=1, value=vector_num)


def reset_stream_limit(stream):
    """Drops `stream`'s own limits: its later work follows the device's again."""
    _C._npu_reset_stream_res_limit(**_check_stream(stream))


def get_stream_limit(stream):
    """{"cube_core_num": ..., "vector_core_num": ...}: `stream`'s limits (its device's where it has none)."""
    where = _check_stream(stream)
    return _limits(lambda kind: _C._npu_get_stream_res_limit(**where, type=kind))


class CubeMathType(IntEnum):
    KEEP_DTYPE = 0
    ALLOW_FP32_DOWN_PRECISION = 1
    USE_FP16 = 2
    USE_HF32 = 3
    USE_FP32_ADD = 4


class _Flags:
    """Attribute-style switches backed by named options: torch.npu.matmul.allow_hf32 = True."""

    def __init__(self, **attrs):
        object.__setattr__(self, "_attrs", attrs)  # attribute -> (option name, default)

    def __getattr__(self, name):
        attrs = object.__getattribute__(self, "_attrs")
        if name not in attrs:
            raise AttributeError(f"no option {name!r}; known: {', '.join(attrs)}")
        option, default = attrs[name]
        value = _get(option)
        if name == "cube_math_type":
            return CubeMathType(int(value)) if value else default
        return default if value is None else value == "enable"

    def __setattr__(self, name, value):
        attrs = object.__getattribute__(self, "_attrs")
        if name not in attrs:
            raise AttributeError(f"no option {name!r}; known: {', '.join(attrs)}")
        option = attrs[name][0]
        if name == "cube_math_type":
            if not isinstance(value, CubeMathType):
                raise TypeError(f"cube_math_type must be a torch.npu.CubeMathType, got {type(value).__name__}")
            _C._set_option(option, str(int(value)))
            return
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, but got {type(value).__name__}")
        _C._set_option(option, "enable" if value else "disable")


matmul = _Flags(allow_hf32=("ALLOW_MATMUL_HF32", False), cube_math_type=("CUBE_MATH_TYPE", None))
conv = _Flags(allow_hf32=("ALLOW_CONV_HF32", True))
# torch.npu.config (allow_internal_format) is in format_config.py: it switches the format handling in C++.
