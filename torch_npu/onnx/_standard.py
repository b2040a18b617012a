"""Translations of npu ops into standard ONNX ops (opset 18) for the dynamo exporter.

Each function receives the op's arguments as the exporter passes them (ONNX values for tensors,
Python values for the rest) and computes what the op's npu kernel computes (csrc/custom/), so that
the exported model matches npu eager in onnxruntime.
"""

from __future__ import annotations

import math

import torch
from onnxscript import opset18 as op

_ONNX_DTYPES = {
    torch.float32: 1,
    torch.uint8: 2,
    torch.int8: 3,
    torch.int16: 5,
    torch.int32: 6,
    torch.int64: 7,
    torch.bool: 9,
    torch.float16: 10,
    torch.float64: 11,
    torch.bfloat16: 16,
}
_FLOAT = 1
_BOOL = 9


def onnx_dtype(dtype) -> int:
    """ONNX element type of a torch.dtype, or of the exporter's own dtype value (an int enum)."""
    if not isinstance(dtype, torch.dtype):
        return int(dtype)
    if dtype not in _ONNX_DTYPES:
        raise ValueError(f"dtype {dtype} has no ONNX equivalent; supported: {sorted(map(str, _ONNX_DTYPES))}")
    return _ONNX_DTYPES[dtype]


def _ints(values) -> object:
    return op.Constant(value_ints=[int(v) for v in values])


def _scalar_like(value: float, like):
    return op.CastLike(op.Constant(value_float=float(value)), like)


def _rank(x) -> int:
    return len(x.shape)


def npu_fast_gelu(self):
    # x * sigmoid(1.702 x), the closed form of x / (1 + e^(-1.702|x|)) * e^(0.851 (x - |x|)).
    return op.Mul(self, op.Sigmoid(op.Mul(self, _scalar_like(1.702, self))))


def npu_gelu(self, approximate: str = "none"):
    half = _scalar_like(0.5, self)
    one = _scalar_like(1.0, self)
    if approximate == "tanh":
        cube = op.Mul(op.Mul(self, self), self)
        inner = op.Mul(op.Add(self, op.Mul(cube, _scalar_like(0.044715, self))), _scalar_like(math.sqrt(2 / math.pi), self))
        return op.Mul(op.Mul(self, half), op.Add(op.Tanh(inner), one))
    return op.Mul(op.Mul(self, half), op.Add(op.Erf(op.Mul(self, _scalar_like(1 / math.sqrt(2), self))), one))


def npu_rms_norm(self, gamma, epsilon: float = 1e-6):
    # Computed in float32 like the kernel; rstd (float32) keeps the normalised dims as size 1.
    axes = _ints(range(_rank(self) - _rank(gamma), _rank(self)))
    x = op.Cast(self, to=_FLOAT)
    mean_square = op.ReduceMean(op.Mul(x, x), axes, keepdims=1)
    rstd = op.Reciprocal(op.Sqrt(op.Add(mean_square, op.Constant(value_float=float(epsilon)))))
    y = op.Mul(op.Mul(x, rstd), op.Cast(gamma, to=_FLOAT))
    return op.CastLike(y, self), rstd


def _rotate(x, rotary_mode: str):
    """cat(-x2, x1) of the halves of the last dim ("half"), or (-x_odd, x_even) per pair ("interleave")."""
    if rotary_mode == "half":
        first, second = op.Split(x, axis=-1, num_outputs=2)
        return op.Concat(op.Neg(second), first, axis=-1)
    if rotary_mode != "interleave":
        raise ValueError(f"npu_rotary_mul: rotary_mode must be 'half' or 'interleave', got '{rotary_mode}'")
    shape = op.Shape(x)
    pairs = op.Reshape(x, op.Concat(op.Shape(x, end=-1), _ints([-1, 2]), axis=0))
    even, odd = op.Split(pairs, axis=-1, num_outputs=2)
    return op.Reshape(op.Concat(op.Neg(odd), even, axis=-1), shape)


def npu_rotary_mul(self, r1, r2, rotary_mode: str = "half"):
    return op.Add(op.Mul(self, r1), op.Mul(_rotate(self, rotary_mode), r2))


def npu_swiglu(self, dim: int = -1):
    first, second = op.Split(self, axis=dim, num_outputs=2)
    return op.Mul(op.Mul(first, op.Sigmoid(first)), second)


def npu_linear(input, weight, bias=None):  # noqa: A002  (the op's argument name)
    out = op.MatMul(input, op.Transpose(weight, perm=[1, 0]))
    return out if bias is None else op.Add(out, bias)


def npu_confusion_transpose(self, perm, shape, transpose_first: bool):
    if transpose_first:
        return op.Reshape(op.Transpose(self, perm=list(perm)), _ints(shape))
    return op.Transpose(op.Reshape(self, _ints(shape)), perm=list(perm))


def npu_one_hot(self, num_classes: int = -1, depth: int = 1, on_value=1, off_value=0):
    # torch_npu's naming: num_classes is the new axis, depth its size. Negative indices match no
    # class (ONNX OneHot would count them from the end), so they are moved out of range first.
    indices = op.Where(op.Less(self, op.CastLike(op.Constant(value_int=0), self)),
                       op.CastLike(op.Constant(value_int=depth), self), self)
    values = op.Constant(value_floats=[float(off_value), float(on_value)])
    return op.OneHot(indices, op.Constant(value_ints=[depth]), values, axis=num_classes)


def npu_dtype_cast(self, dtype, input_dtype=None):
    # dtype is a torch dtype or one of torch_npu's codes (torch_npu.float16); input_dtype reinterprets the input's
    # bytes, which no ONNX op does.
    if input_dtype is not None:
        raise ValueError("npu_dtype_cast with input_dtype reinterprets the input's bytes, which ONNX has no op for; "
                         "export the cast without input_dtype")
    from torch_npu._dtypes import to_torch_dtype

    return op.Cast(self, to=onnx_dtype(dtype if isinstance(dtype, torch.dtype) else to_torch_dtype(int(dtype))))


def npu_format_cast(self, acl_format: int, customize_dtype=None, input_dtype=None):
    # Private formats are a storage layout of the device; the values are the same in ONNX's dense tensors.
    return op.Identity(self)


def npu_broadcast(self, size):
    return op.Expand(self, _ints(size))


def npu_scaled_masked_softmax(x, mask, scale=1, fixed_triu_mask: bool = False):
    scores = op.Mul(op.Cast(x, to=_FLOAT), op.Constant(value_float=float(scale)))
    if fixed_triu_mask:
        # Masked out: the strict upper triangle (column > row) of the last two dims.
        zero, one = op.Constant(value_int=0), op.Constant(value_int=1)
        rows = op.Range(zero, op.Squeeze(op.Shape(x, start=-2, end=-1)), one)
        cols = op.Range(zero, op.Squeeze(op.Shape(x, start=-1)), one)
        masked = op.Greater(op.Unsqueeze(cols, _ints([0])), op.Unsqueeze(rows, _ints([1])))
    else:
        masked = op.Cast(mask, to=_BOOL)
    # A large finite fill keeps fully masked rows finite (uniform), as the kernel does.
    filled = op.Where(masked, op.Constant(value_float=-10000.0), scores)
    return op.CastLike(op.Softmax(filled, axis=-1), x)


def npu_stride_add(self, other, offset1, offset2, c1_len):
    # Channel blocks of 16 (NC1HWC0's C0): self[:, o1*16:(o1+len)*16] + other[:, o2*16:(o2+len)*16].
    c0 = 16
    o1, o2, n = int(offset1), int(offset2), int(c1_len)
    a = op.Slice(self, _ints([o1 * c0]), _ints([(o1 + n) * c0]), _ints([1]))
    b = op.Slice(other, _ints([o2 * c0]), _ints([(o2 + n) * c0]), _ints([1]))
    return op.Add(a, b)
