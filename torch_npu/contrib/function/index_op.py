"""x[condition] = value written as one select (no data-dependent shape in between)."""

import torch

__all__ = ["npu_fast_condition_index_put"]


def npu_fast_condition_index_put(x, condition, value):
    """A copy of `x` with `value` where the bool tensor `condition` is True: the same values as
    `x[condition] = value`, without an index_put of a data-dependent number of elements."""
    if condition.dtype != torch.bool:
        raise TypeError(f"npu_fast_condition_index_put: condition must be a bool tensor, got {condition.dtype}")
    return torch.where(condition, torch.full_like(x, value), x)
