"""torch_npu's dtype codes: torch_npu.float16, torch_npu.hifloat8, ... (also as torch_npu._C._cd.DType.<name>).

Each is an int, the dtype's aclDataType + 256, so that it cannot be mistaken for a torch ScalarType index. Ops'
`int` dtype arguments (npu_dtype_cast's dtype, npu_quant_matmul's x1_dtype, ...) take these codes as well as torch
dtypes; the codes also name number formats torch has no dtype for (hifloat8, int4, float6, float4_e1m2), which the
software NPU refuses by name (docs/quantization.md).
"""

import sys
import types

import torch

NPU_DTYPE_OFFSET = 256

# name -> aclDataType, in torch_npu's order.
_ACL_CODES = {
    "float32": 0, "float16": 1, "int8": 2, "int32": 3, "uint8": 4, "int16": 6, "uint16": 7, "uint32": 8,
    "int64": 9, "uint64": 10, "float64": 11, "bool": 12, "string": 13, "complex64": 16, "complex128": 17,
    "bfloat16": 27, "int4": 29, "uint1": 30, "complex32": 33, "hifloat8": 34, "float8_e5m2": 35,
    "float8_e4m3fn": 36, "float8_e8m0fnu": 37, "float6_e3m2": 38, "float6_e2m3": 39, "float4_e2m1fn_x2": 40,
    "float4_e1m2fn_x2": 41,
}

# The torch dtype each code stands for; the names missing here are formats torch has no dtype for.
_TORCH_NAMES = {
    "float32": "float32", "float16": "float16", "int8": "int8", "int32": "int32", "uint8": "uint8",
    "int16": "int16", "uint16": "uint16", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
    "float64": "float64", "bool": "bool", "complex64": "complex64", "complex128": "complex128",
    "bfloat16": "bfloat16", "complex32": "complex32", "float8_e5m2": "float8_e5m2",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e8m0fnu": "float8_e8m0fnu", "float4_e2m1fn_x2": "float4_e2m1fn_x2",
}


# torch dtypes in c10::ScalarType order: the index an `int` dtype argument receives for a torch dtype (the order is
# part of torch's ABI; new types are appended).
_SCALAR_TYPES = (
    "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32", "complex64",
    "complex128", "bool", "qint8", "quint8", "qint32", "bfloat16", "quint4x2", "quint2x4", "bits1x8", "bits2x4",
    "bits4x2", "bits8", "bits16", "float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz", "uint16",
    "uint32", "uint64", "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7", "int1", "int2", "int3",
    "int4", "int5", "int6", "int7", "float8_e8m0fnu", "float4_e2m1fn_x2",
)


class DType:
    """torch_npu's dtype codes as class attributes (torch_npu._C._cd.DType)."""


for _name, _acl in _ACL_CODES.items():
    setattr(DType, _name, _acl + NPU_DTYPE_OFFSET)

_NAME_OF_CODE = {acl + NPU_DTYPE_OFFSET: name for name, acl in _ACL_CODES.items()}
_TORCH_OF_CODE = {acl + NPU_DTYPE_OFFSET: getattr(torch, _TORCH_NAMES[name])
                  for name, acl in _ACL_CODES.items() if hasattr(torch, _TORCH_NAMES.get(name, "-"))}


def is_npu_dtype_code(value) -> bool:
    """True for one of torch_npu's dtype codes (an int >= 256 that names a dtype)."""
    return isinstance(value, int) and not isinstance(value, bool) and value in _NAME_OF_CODE


def dtype_name(code: int) -> str:
    """'torch_npu.hifloat8' for a code, as error messages spell it."""
    return f"torch_npu.{_NAME_OF_CODE[code]}" if code in _NAME_OF_CODE else str(code)


def to_torch_dtype(value) -> torch.dtype:
    """The torch dtype a torch dtype, ScalarType index or torch_npu code names; ValueError for a chip-only format."""
    if isinstance(value, torch.dtype):
        return value
    if is_npu_dtype_code(value):
        if value not in _TORCH_OF_CODE:
            raise ValueError(f"{dtype_name(value)} is a chip number format torch has no dtype for; the software NPU "
                             "keeps tensors in torch dtypes (torch.float16, torch.float8_e4m3fn, torch.int8, ...)")
        return _TORCH_OF_CODE[value]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(_SCALAR_TYPES):
        dtype = getattr(torch, _SCALAR_TYPES[value], None)
        if dtype is not None:
            return dtype
    raise ValueError(f"{value!r} names no dtype; pass a torch dtype (torch.float16) or a torch_npu dtype "
                     "(torch_npu.float16, torch_npu.float8_e4m3fn, ...)")


def scalar_type_arg(op: str, arg: str, value):
    """A `ScalarType` argument of a torch_npu op: torch_npu's codes become the torch dtype they name (the
    dispatcher would otherwise wrap 257, torch_npu.float16, round to torch.int8)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < NPU_DTYPE_OFFSET:
        return value
    try:
        return to_torch_dtype(value)
    except ValueError as e:
        raise ValueError(f"{op}: {arg}: {e}") from None


def install(module) -> None:
    """torch_npu.<name> for every code, and torch_npu._C._cd.DType, as torch_npu has them."""
    for name, acl in _ACL_CODES.items():
        setattr(module, name, acl + NPU_DTYPE_OFFSET)
    cd = types.ModuleType(f"{module.__name__}._C._cd", "torch_npu's dtype codes")
    cd.DType = DType
    setattr(module._C, "_cd", cd)
    sys.modules[cd.__name__] = cd
