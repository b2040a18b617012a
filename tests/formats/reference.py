"""NumPy reference of the private storage formats (docs/formats.md), built from reshapes and
transposes of the padded logical array, independently of the C++ element mapping."""

import contextlib

import numpy as np
import torch

import torch_npu

NCHW, ND, NC1HWC0, FRACTAL_Z, FRACTAL_NZ, NCDHW, NDC1HWC0, FRACTAL_Z_3D = 0, 2, 3, 4, 29, 30, 32, 33
PRIVATE = (NC1HWC0, FRACTAL_Z, NDC1HWC0, FRACTAL_Z_3D, FRACTAL_NZ)
PRIVATE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16, torch.int32)


def up(a, b):
    return (a + b - 1) // b


def default_c0(fmt, dtype):
    if fmt != FRACTAL_NZ:
        return 16
    return 32 // min(torch.empty(0, dtype=dtype).element_size(), 2)


def as_nchw(shape):
    """Shapes of fewer than 4 dims as NCHW: [C] -> [1, C, 1, 1], [C, H] -> [1, C, H, 1], ..."""
    shape = tuple(shape)
    return shape if len(shape) == 4 else ((1,) + shape + (1, 1, 1))[:4]


def _pad(x, axis, multiple):
    extra = up(x.shape[axis], multiple) * multiple - x.shape[axis]
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return np.pad(x, widths)


def to_private(x, fmt, c0=None):
    """The storage array of logical array `x` in `fmt` (padding zero)."""
    c0 = c0 or 16
    if fmt == NC1HWC0:
        n, c, h, w = as_nchw(x.shape)
        y = _pad(x.reshape(n, c, h, w), 1, 16)
        return y.reshape(n, y.shape[1] // 16, 16, h, w).transpose(0, 1, 3, 4, 2)
    if fmt == FRACTAL_Z:
        n, c, h, w = as_nchw(x.shape)
        y = _pad(_pad(x.reshape(n, c, h, w), 0, 16), 1, 16)
        n1, c1 = y.shape[0] // 16, y.shape[1] // 16
        y = y.reshape(n1, 16, c1, 16, h, w).transpose(2, 4, 5, 0, 1, 3)
        return y.reshape(c1 * h * w, n1, 16, 16)
    if fmt == NDC1HWC0:
        n, c, d, h, w = x.shape
        y = _pad(x, 1, 16)
        return y.reshape(n, y.shape[1] // 16, 16, d, h, w).transpose(0, 3, 1, 4, 5, 2)
    if fmt == FRACTAL_Z_3D:
        n, c, d, h, w = x.shape
        y = _pad(_pad(x, 0, 16), 1, 16)
        n1, c1 = y.shape[0] // 16, y.shape[1] // 16
        y = y.reshape(n1, 16, c1, 16, d, h, w).transpose(4, 2, 5, 6, 0, 1, 3)
        return y.reshape(d * c1 * h * w, n1, 16, 16)
    if fmt == FRACTAL_NZ:
        *batch, m, k = x.shape
        y = _pad(_pad(x, -2, 16), -1, c0)
        m1, k1 = y.shape[-2] // 16, y.shape[-1] // c0
        y = y.reshape(*batch, m1, 16, k1, c0)
        b = len(batch)
        return y.transpose(*range(b), b + 2, b, b + 1, b + 3)
    raise ValueError(fmt)


def raw_storage(t, storage_shape):
    """The device storage of npu tensor `t` as a NumPy array of integers of its element size."""
    raw = torch_npu._C._npu_storage_bytes(t)
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[t.element_size()]
    return raw.numpy().view(bits)[: int(np.prod(storage_shape))].reshape(storage_shape)


def bits(cpu_tensor):
    """A CPU tensor's values as unsigned integers of the same width (bit-exact comparisons)."""
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[cpu_tensor.element_size()]
    arr = cpu_tensor.contiguous().view(width).numpy()
    return arr.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[cpu_tensor.element_size()])


def random_tensor(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 4).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -1000), min(info.max, 1000), shape, generator=g).to(dtype)


def transdata_count():
    return torch.npu.op_stats().get("aclnnTransData", {}).get("device_op", 0)


@contextlib.contextmanager
def internal_format(allow):
    old = torch.npu.config.allow_internal_format
    torch.npu.config.allow_internal_format = allow
    try:
        yield
    finally:
        torch.npu.config.allow_internal_format = old
