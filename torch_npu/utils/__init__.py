"""torch_npu.utils: helpers for npu users (combined tensor buffers, C++ extensions, ...)."""

import os as _os

from torch_npu.utils.combine_tensors import (
    combined_grad_buffer,
    get_part_combined_tensor,
    is_combined_tensor_valid,
    npu_combine_tensors,
)

# For CMake projects building against torch_npu (find_package(TorchNpu): custom op packages).
from torch_npu.utils.affinity import reset_thread_affinity, set_thread_affinity
from torch_npu.utils.flops_count import FlopsCounter
from torch_npu.utils.serialization import save_async
from torch_npu.npu.utils import get_cann_version
from torch_npu.utils.toolkit import get_toolkit_path

cmake_prefix_path = _os.path.join(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))), "share", "cmake")

__all__ = ["cmake_prefix_path", "npu_combine_tensors", "get_part_combined_tensor", "is_combined_tensor_valid",
           "combined_grad_buffer", "set_thread_affinity", "reset_thread_affinity", "FlopsCounter", "save_async",
           "get_cann_version", "get_toolkit_path"]
