"""Skip decorators of torch_npu's multi-device tests."""

import unittest
from functools import wraps

import torch


def skipIfUnsupportMultiNPU(npu_number_needed):
    """Skip the test unless at least `npu_number_needed` npu devices exist (the software NPU has
    NPU_SIM_DEVICES of them, 8 by default)."""

    def decorate(func):
        @wraps(func)
        def run_if_enough_devices(*args, **kwargs):
            if not torch.npu.is_available() or torch.npu.device_count() < npu_number_needed:
                raise unittest.SkipTest(f"Multi-NPU {npu_number_needed} condition not satisfied")
            return func(*args, **kwargs)

        return run_if_enough_devices

    return decorate


def skip_if_lt_x_npu(x):
    """Same as skipIfUnsupportMultiNPU(x), in PyTorch's skip_if_lt_x_gpu spelling."""
    return skipIfUnsupportMultiNPU(x)
