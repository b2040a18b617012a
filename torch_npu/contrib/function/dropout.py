"""Dropout that keeps its mask as uint8 (torch_npu's dropout_with_byte_mask): the backward multiplies by the
saved byte mask instead of keeping a float mask alive."""

from __future__ import annotations

import torch

__all__ = ["dropout_with_byte_mask"]


class _DropoutByteMask(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p, inplace):
        mask = (torch.rand_like(x, dtype=torch.float32) >= p).to(torch.uint8)
        scale = 1.0 / (1.0 - p)
        ctx.p = p
        ctx.save_for_backward(mask)
        if inplace:
            ctx.mark_dirty(x)
            return x.mul_(mask).mul_(scale)
        return x * mask * scale

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return grad * mask * (1.0 / (1.0 - ctx.p)), None, None


def dropout_with_byte_mask(input1, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1 / (1 - p) (identity when not training)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input1
    if p == 1.0:
        return input1.mul_(0) if inplace else input1 * 0
    return _DropoutByteMask.apply(input1, float(p), inplace)
