"""create_common_tensor: random (cpu, npu) input pairs for operator tests."""

import numpy as np
import torch

# npu_format codes accepted today: the plain layouts. Private formats (3 NC1HWC0, 4 FRACTAL_Z,
# 29 FRACTAL_NZ) need npu_format_cast, which the software NPU does not provide yet.
_PLAIN_FORMATS = {-1: "plain", 0: "NCHW", 1: "NHWC", 2: "ND"}
_PRIVATE_FORMATS = {3: "NC1HWC0", 4: "FRACTAL_Z", 29: "FRACTAL_NZ"}


def create_common_tensor(item, minValue, maxValue, device="npu"):
    """item = [numpy dtype, npu_format, shape]; returns (cpu_tensor, npu_tensor) with equal values.

    Values are uniform in [minValue, maxValue) (integers: randint; bool: random True/False).
    """
    if not isinstance(item, (list, tuple)) or len(item) != 3:
        raise ValueError("create_common_tensor expects item = [np_dtype, npu_format, shape], got "
                         f"{item!r}")
    dtype, npu_format, shape = item
    if npu_format in _PRIVATE_FORMATS:
        raise ValueError(
            f"npu_format {npu_format} ({_PRIVATE_FORMATS[npu_format]}) is not supported yet: private "
            f"storage formats are not implemented. Use one of {sorted(_PLAIN_FORMATS)} "
            "(0 NCHW, 2 ND, -1 plain)."
        )
    if npu_format not in _PLAIN_FORMATS:
        raise ValueError(f"unknown npu_format {npu_format!r}; use 0 (NCHW), 2 (ND) or -1 (plain)")
    dtype = np.dtype(dtype)
    shape = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    if dtype == np.bool_:
        data = np.random.randint(0, 2, size=shape).astype(np.bool_)
    elif dtype.kind in "iu":
        data = np.random.randint(int(minValue), int(maxValue), size=shape).astype(dtype)
    else:
        data = np.random.uniform(minValue, maxValue, size=shape).astype(dtype)
        if maxValue > minValue:  # rounding to a narrow dtype must not reach maxValue
            top = np.nextafter(dtype.type(maxValue), dtype.type(minValue))
            data = np.minimum(data, top)
    cpu_input = torch.from_numpy(np.ascontiguousarray(data))
    return cpu_input, cpu_input.to(device)
