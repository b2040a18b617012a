"""Attention scores q @ k^T as one autograd function (torch_npu's `matmul_transpose`): the forward and both
gradients are plain batched matmuls, so no transposed copy of k is materialised on the device."""

from __future__ import annotations

import torch

__all__ = ["matmul_transpose"]


class _MatmulTranspose(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor1, tensor2):
        ctx.save_for_backward(tensor1, tensor2)
        return torch.matmul(tensor1, tensor2.transpose(-2, -1))

    @staticmethod
    def backward(ctx, grad):
        tensor1, tensor2 = ctx.saved_tensors
        grad1 = torch.matmul(grad, tensor2) if ctx.needs_input_grad[0] else None
        grad2 = torch.matmul(grad.transpose(-2, -1), tensor1) if ctx.needs_input_grad[1] else None
        return grad1, grad2


def matmul_transpose(tensor1, tensor2):
    """tensor1 @ tensor2.transpose(-2, -1) for tensors of the same batch shape (..., M, K) and (..., N, K);
    other shapes (broadcast batches) take torch.matmul's path."""
    if not (isinstance(tensor1, torch.Tensor) and isinstance(tensor2, torch.Tensor)):
        raise TypeError("matmul_transpose expects two tensors")
    if tensor1.dim() < 2 or tensor2.dim() < 2 or tensor1.shape[-1] != tensor2.shape[-1]:
        raise ValueError(f"matmul_transpose: shapes {tuple(tensor1.shape)} and {tuple(tensor2.shape)} cannot be "
                         "multiplied as a @ b^T (last dims must match)")
    if tensor1.shape[:-2] != tensor2.shape[:-2]:
        return torch.matmul(tensor1, tensor2.transpose(-2, -1))
    return _MatmulTranspose.apply(tensor1, tensor2)
