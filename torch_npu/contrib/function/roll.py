"""Swin Transformer's window shift as one index_select each way (torch_npu's `roll`): the forward gathers
with a precomputed permutation and the backward gathers with its inverse, so no scatter reaches the device."""

from __future__ import annotations

import torch

__all__ = ["roll"]


class _RollIndexSelect(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, forward_index, backward_index):
        n, h, w, c = x.shape
        ctx.save_for_backward(backward_index)
        return x.reshape(n, h * w, c).index_select(1, forward_index).reshape(n, h, w, c)

    @staticmethod
    def backward(ctx, grad):
        (backward_index,) = ctx.saved_tensors
        n, h, w, c = grad.shape
        return grad.reshape(n, h * w, c).index_select(1, backward_index).reshape(n, h, w, c), None, None


class _Roll:
    """roll(x, shifts, dims): torch.roll of an (N, H, W, C) tensor over dims (1, 2), same result and gradient.

        >>> shifted = roll(x, shifts=(-3, -3), dims=(1, 2))
    """

    def __init__(self):
        self._indices: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

    def __call__(self, x, shifts, dims):
        if not isinstance(x, torch.Tensor) or x.dim() != 4:
            raise ValueError(f"roll expects an (N, H, W, C) tensor, got "
                             f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
        shifts, dims = tuple(shifts), tuple(d % 4 for d in dims)
        if len(shifts) != 2 or dims != (1, 2):
            raise ValueError(f"roll shifts the H and W dims: expected 2 shifts and dims=(1, 2), got shifts={shifts}, "
                             f"dims={dims}; use torch.roll for other cases")
        _, h, w, _ = x.shape
        key = (h, w, shifts, x.device)
        if key not in self._indices:
            index = torch.roll(torch.arange(h * w).view(h, w), shifts=shifts, dims=(0, 1)).flatten()
            self._indices[key] = (index.to(x.device), index.argsort().to(x.device))
        return _RollIndexSelect.apply(x, *self._indices[key])


roll = _Roll()
