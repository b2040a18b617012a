"""create_common_tensor: random (cpu, npu) input pairs for operator tests."""

import numpy as np
import torch

# npu_format -1 keeps the tensor as .to(device) made it; any other code goes through
# torch_npu.npu_format_cast (docs/formats.md lists the formats and what each can hold).


def create_common_tensor(item, minValue, maxValue, device="npu"):
    """item = [numpy dtype, npu_format, shape]; returns (cpu_tensor, npu_tensor) with equal values,
    the npu tensor in storage format npu_format (-1: as created).

    Values are uniform in [minValue, maxValue) (integers: randint; bool: random True/False).
    """
    if not isinstance(item, (list, tuple)) or len(item) != 3:
        raise ValueError("create_common_tensor expects item = [np_dtype, npu_format, shape], got "
                         f"{item!r}")
    dtype, npu_format, shape = item
    if isinstance(npu_format, bool) or not isinstance(npu_format, (int, np.integer)):
        raise ValueError(f"npu_format must be an int format code (e.g. 0 NCHW, 2 ND, 3 NC1HWC0, "
                         f"29 FRACTAL_NZ), got {npu_format!r}")
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
    npu_input = cpu_input.to(device)
    if npu_format != -1:
        import torch_npu

        npu_input = torch_npu.npu_format_cast(npu_input, int(npu_format))
    return cpu_input, npu_input
