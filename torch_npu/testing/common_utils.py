"""Helpers of torch_npu's operator tests: (cpu, npu) input pairs, device choice and skip decorators."""

import os
import sys
import tempfile
import unittest
from contextlib import contextmanager
from functools import wraps
from itertools import product
from typing import List

import numpy as np
import torch

from torch_npu.testing import op_trace

op_trace.track()  # profiled regions record which npu ops ran, for check_operators_in_prof

IS_WINDOWS = sys.platform == "win32"
PERF_TEST_ENABLE = os.getenv("PERF_TEST_ENABLE", "").upper() in ("ON", "1", "YES", "TRUE", "Y")

# npu_format -1 keeps the tensor as .to(device) made it; any other code goes through
# torch_npu.npu_format_cast, which names the formats a dtype and shape can take (docs/formats.md).


# ---------------------------------------------------------------------------------------------
# devices
# ---------------------------------------------------------------------------------------------

def get_npu_device() -> str:
    """The device tests run on: "npu:N" with N from SET_NPU_DEVICE (default "npu:0")."""
    index = os.environ.get("SET_NPU_DEVICE")
    return "npu:0" if index is None else f"npu:{index}"


def set_npu_device() -> str:
    """Make get_npu_device() the current device and return it."""
    device = get_npu_device()
    torch.npu.set_device(device)
    return device


# ---------------------------------------------------------------------------------------------
# input pairs
# ---------------------------------------------------------------------------------------------

def _random_array(dtype, shape, min_value, max_value):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.random.randint(0, 2, size=shape).astype(np.bool_)
    data = np.random.uniform(min_value, max_value, size=shape)
    if dtype.kind in "iu":
        return data.astype(dtype)  # truncated toward zero, as numpy's astype does
    data = data.astype(dtype)
    if max_value > min_value:  # rounding to a narrow dtype must not reach max_value
        data = np.minimum(data, np.nextafter(dtype.type(max_value), dtype.type(min_value)))
    return data


def _check_format(npu_format):
    if isinstance(npu_format, bool) or not isinstance(npu_format, (int, np.integer)):
        raise ValueError(f"npu_format must be an int format code (e.g. 0 NCHW, 2 ND, 3 NC1HWC0, "
                         f"29 FRACTAL_NZ, -1 as created), got {npu_format!r}")


def _npu_pair(data, npu_format, device):
    """(cpu, npu) tensors holding `data`; the npu one cast to `npu_format` unless it is -1."""
    import torch_npu

    _check_format(npu_format)
    cpu_input = torch.from_numpy(np.ascontiguousarray(data))
    npu_input = cpu_input.to(get_npu_device() if device is None else device)
    if npu_format != -1:
        npu_input = torch_npu.npu_format_cast(npu_input, int(npu_format))
    return cpu_input, npu_input


def create_common_tensor(item, minValue, maxValue, device=None):
    """item = [numpy dtype, npu_format, shape, ...]; returns (cpu_tensor, npu_tensor) with equal values.

    Values are uniform in [minValue, maxValue) (integers: truncated; bool: random True/False). The
    npu tensor is cast to `npu_format` unless it is -1. Items past the third (test parameters that
    shape lists carry along) are ignored.
    """
    if not isinstance(item, (list, tuple)) or len(item) < 3:
        raise ValueError("create_common_tensor expects item = [np_dtype, npu_format, shape], got "
                         f"{item!r}")
    dtype, npu_format, shape = item[:3]
    _check_format(npu_format)
    shape = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    return _npu_pair(_random_array(dtype, shape, minValue, maxValue), npu_format, device)


def create_dtype_tensor(shape, dtype, npu_format=-1, min_value=-5, max_value=5, no_zero=False,
                        device=None):
    """(cpu, npu) pair of a torch dtype: bool, half and float are uniform in [min, max); every other
    dtype gives int32 integers in [min, max]. `no_zero=True` replaces zeros by ones; `npu_format`
    applies to the floating types only."""
    if dtype == torch.bool:
        x = np.random.randint(0, 2, size=shape).astype(np.bool_)
    elif dtype == torch.half:
        x = np.random.uniform(min_value, max_value, shape).astype(np.float16)
    elif dtype == torch.float:
        x = np.random.uniform(min_value, max_value, shape).astype(np.float32)
    else:
        x = np.random.randint(min_value, max_value + 1, size=shape).astype(np.int32)
    if no_zero:
        x = np.where(x != 0, x, np.ones_like(x))
    return _npu_pair(x, npu_format if dtype in (torch.float, torch.half) else -1, device)


def _broadcast_cases(device):
    """(x, y) shape pairs that broadcast: a size-1 y over every dim, and y over the last two dims."""
    for x_shape, y_shape in (((2, 3, 4, 5), (1, 1, 1)), ((2, 3, 4, 5), (4, 5))):
        x = np.random.rand(*x_shape).astype(np.float32)
        y = np.random.rand(*y_shape).astype(np.float32)
        yield (torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(x).to(device),
               torch.from_numpy(y).to(device))


def test_2args_broadcast(fn):
    """[[cpu_result, npu_result], ...] (numpy arrays) of fn(x, y) over broadcasting input pairs."""
    results = []
    for cpu_x, cpu_y, npu_x, npu_y in _broadcast_cases(get_npu_device()):
        results.append([fn(cpu_x, cpu_y).numpy(), fn(npu_x, npu_y).to("cpu").numpy()])
    return results


test_2args_broadcast.__test__ = False  # a helper, not a test, for pytest's collection


# ---------------------------------------------------------------------------------------------
# profiling
# ---------------------------------------------------------------------------------------------

def check_operators_in_prof(expected_operators, prof, unexpected_operators=None):
    """True when every name in `expected_operators` ran inside the profiled region and none of
    `unexpected_operators` did (names as the profiler reports them: `aclnnAdd`, `aten::add`).

    `prof` is the finished profiler (`torch.autograd.profiler.profile` / `torch.profiler.profile`).
    Names come from its events and, for the named device ops the npu ran in that region, from the
    per-op counters (`torch.npu.op_stats()`) recorded by `torch_npu.testing.op_trace`.
    """
    names = op_trace.operators_in(prof)
    if not names:
        print("torch profiling is empty, please check it")
        return None
    if any(name in names for name in (unexpected_operators or ())):
        return False
    return all(name in names for name in expected_operators)


# ---------------------------------------------------------------------------------------------
# skip decorators
# ---------------------------------------------------------------------------------------------

def _device_family(name: str) -> str:
    """The SoC family SupportedDevices matches: "Ascend910B" for Ascend910B1..B4, "Ascend910_93"
    for the Ascend910_93xx parts, "Ascend950" for Ascend950 variants, "Ascend310P" for 310P parts."""
    if name.startswith("Ascend950"):
        return name[:9]
    family = name[:10]
    return name[:12] if family == "Ascend910_" else family


class SupportedDevices:
    """Run the test only on the listed SoC families (e.g. ['Ascend910B']); skip elsewhere.

    The software NPU reports the SoC set by NPU_SIM_SOC_VERSION (torch.npu.get_device_name()).
    """

    def __init__(self, supported_devices: List[str]) -> None:
        self.supported_devices = supported_devices

    def __call__(self, fn):
        @wraps(fn)
        def run_if_supported(slf, *args, **kwargs):
            family = _device_family(torch.npu.get_device_name(0))
            if family not in self.supported_devices:
                raise unittest.SkipTest(
                    f"Only run on {self.supported_devices!r}, current device is {family}.")
            return fn(slf, *args, **kwargs)

        return run_if_supported


class SkipIfNotGteCANNVersion:
    """Run the test only when the reported CANN version is >= base_version (e.g. "8.1.RC1")."""

    def __init__(self, base_version, module="CANN"):
        self.base_version = base_version
        self.module = module

    def __call__(self, fn):
        @wraps(fn)
        def run_if_new_enough(slf, *args, **kwargs):
            from torch_npu.npu import utils

            if not utils._is_gte_cann_version(self.base_version, module=self.module):
                current = utils.get_cann_version(module=self.module)
                raise unittest.SkipTest(f"Only run on {self.base_version} or greater, current "
                                        f"{self.module.lower()} version is {current}.")
            return fn(slf, *args, **kwargs)

        return run_if_new_enough


class SkipIfNoLapack:
    def __call__(self, fn):
        @wraps(fn)
        def run_if_lapack(*args, **kwargs):
            if not torch._C.has_lapack:
                raise unittest.SkipTest("PyTorch compiled without Lapack")
            return fn(*args, **kwargs)

        return run_if_lapack


# ---------------------------------------------------------------------------------------------
# small utilities the tests import
# ---------------------------------------------------------------------------------------------

@contextmanager
def freeze_rng_state():
    state = torch.get_rng_state()
    try:
        yield
    finally:
        torch.set_rng_state(state)


@contextmanager
def TemporaryFileName():
    with tempfile.NamedTemporaryFile() as f:
        yield f.name


def iter_indices(tensor):
    if tensor.dim() == 0:
        return range(0)
    if tensor.dim() == 1:
        return range(tensor.size(0))
    return product(*(range(s) for s in tensor.size()))


def is_iterable(obj) -> bool:
    try:
        iter(obj)
        return True
    except TypeError:
        return False
