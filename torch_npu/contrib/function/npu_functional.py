"""Functional forms of torch_npu.contrib's modules (`from torch_npu.contrib.function import npu_functional as F`)."""

import torch

__all__ = ["dropout_with_byte_mask"]


def dropout_with_byte_mask(input1, p=0.5, training=True, inplace=False):
    """Dropout whose keep mask is one byte per element (uint8), as the NPU kernel stores it.

    Zeroes each element with probability `p` and scales the kept ones by 1 / (1 - p) while `training`;
    returns the input unchanged otherwise.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input1
    if p == 1.0:
        return input1.zero_() if inplace else torch.zeros_like(input1)
    mask = torch.empty(input1.shape, dtype=torch.uint8, device=input1.device).bernoulli_(1.0 - p)
    scale = 1.0 / (1.0 - p)
    if inplace:
        return input1.mul_(mask).mul_(scale)
    return input1 * mask * scale
