"""torch_npu.utils: helpers for npu users (combined tensor buffers, ...)."""

from torch_npu.utils.combine_tensors import (
    combined_grad_buffer,
    get_part_combined_tensor,
    is_combined_tensor_valid,
    npu_combine_tensors,
)

__all__ = ["npu_combine_tensors", "get_part_combined_tensor", "is_combined_tensor_valid", "combined_grad_buffer"]
