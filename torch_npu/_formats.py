"""Storage formats of npu tensors (docs/formats.md): torch_npu.Format, get_npu_format,
npu_format_cast / npu_format_cast_ (also as Tensor methods) and get_storage_size."""

from enum import IntEnum

import torch


class Format(IntEnum):
    """npu storage formats (aclFormat codes). The software NPU lays tensors out in NCHW, NHWC, ND,
    NCDHW, NDHWC (plain) and NC1HWC0, FRACTAL_Z, NDC1HWC0, FRACTAL_Z_3D, FRACTAL_NZ (private);
    the other codes are named for reference and rejected by npu_format_cast."""

    UNDEFINED = -1
    NCHW = 0
    NHWC = 1
    ND = 2
    NC1HWC0 = 3
    FRACTAL_Z = 4
    NC1HWC0_C04 = 12
    HWCN = 16
    NDHWC = 27
    FRACTAL_NZ = 29
    NCDHW = 30
    NDC1HWC0 = 32
    FRACTAL_Z_3D = 33
    NC = 35
    NCL = 47

    def __str__(self):
        return self.name


def _format_code(acl_format, what="acl_format"):
    if isinstance(acl_format, torch.Tensor):
        return int(get_npu_format(acl_format))
    if isinstance(acl_format, bool) or not isinstance(acl_format, int):
        raise TypeError(f"npu_format_cast: {what} must be a format code (int or torch_npu.Format) or a "
                        f"tensor whose format to take, got {type(acl_format).__name__}")
    return int(acl_format)


def _dtype_code(dtype, what):
    """torch_npu passes dtypes as ScalarType codes; torch.dtype objects are accepted too."""
    if dtype is None:
        return None
    if isinstance(dtype, torch.dtype):
        if dtype not in _SCALAR_TYPE_CODES:
            raise ValueError(f"npu_format_cast: {what} {dtype} is not a dtype formats are laid out for")
        return _SCALAR_TYPE_CODES[dtype]
    if isinstance(dtype, bool) or not isinstance(dtype, int):
        raise TypeError(f"npu_format_cast: {what} must be a dtype code (int) or torch.dtype, got "
                        f"{type(dtype).__name__}")
    return int(dtype)


# c10::ScalarType codes of the dtypes torch_npu's format casts take.
_SCALAR_TYPE_CODES = {
    torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4, torch.float16: 5,
    torch.float32: 6, torch.float64: 7, torch.bool: 11, torch.bfloat16: 15,
}


def get_npu_format(tensor):
    """The storage format of an npu tensor (a torch_npu.Format): NCHW for a fresh 4-d tensor, NCDHW
    for 5-d, ND otherwise, or the format npu_format_cast gave its storage."""
    from torch_npu import _C

    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"get_npu_format expects a tensor, got {type(tensor).__name__}")
    return Format(_C._npu_get_format(tensor))


def npu_format_cast(self, acl_format, customize_dtype=None, input_dtype=None):
    """A new tensor with self's values in storage format `acl_format` (a code, a torch_npu.Format or
    a tensor whose format to take). customize_dtype sets the FRACTAL_NZ block width as for that dtype
    (e.g. int8: 32 lanes). Differentiable; the gradient passes through unchanged."""
    return torch.ops.npu.npu_format_cast(self, _format_code(acl_format),
                                         customize_dtype=_dtype_code(customize_dtype, "customize_dtype"),
                                         input_dtype=_dtype_code(input_dtype, "input_dtype"))


def npu_format_cast_(self, acl_format, customize_dtype=None, input_dtype=None):
    """Converts self's storage to `acl_format` in place (every tensor sharing the storage sees it)
    and returns self. A view of part of a storage gets a storage of its own instead."""
    from torch_npu import _C

    code = _dtype_code(input_dtype, "input_dtype")
    if code is not None and code != _SCALAR_TYPE_CODES.get(self.dtype):
        raise ValueError("npu_format_cast_: input_dtype reinterprets packed 4-bit data, which the software NPU "
                         "does not have; leave it None")
    with torch.no_grad():
        return _C._npu_format_cast_(self, _format_code(acl_format),
                                    _dtype_code(customize_dtype, "customize_dtype"))


def get_storage_size(tensor):
    """Elements of the tensor's physical storage: the padded storage shape's product for a private
    format (untyped_storage().nbytes() is this times the element size)."""
    from torch_npu import _C

    return _C._get_storage_size(tensor)


def install(module):
    """Puts the format API on torch_npu and the Tensor methods on torch.Tensor."""
    for name in ("Format", "get_npu_format", "npu_format_cast", "npu_format_cast_", "get_storage_size"):
        setattr(module, name, globals()[name])
    torch.Tensor.npu_format_cast = npu_format_cast
    torch.Tensor.npu_format_cast_ = npu_format_cast_
