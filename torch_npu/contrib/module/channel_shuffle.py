"""ShuffleNetV2's concat + channel shuffle (+ chunk) as one autograd function of index_selects (seed 003's
device-friendly rewrite): no view/transpose/contiguous copy in the forward or the backward."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["ChannelShuffle"]


def _shuffle_order(channels: int, groups: int) -> torch.Tensor:
    """out[:, i] = cat(x1, x2)[:, order[i]]: the order view(groups, c / groups).transpose produces."""
    return torch.arange(channels).view(groups, channels // groups).t().flatten()


class _CatShuffle(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x1, x2, order, split, even, odd):
        ctx.split = split
        ctx.save_for_backward(even, odd)
        x = torch.cat((x1, x2), 1)
        if split:
            half = order.numel() // 2
            return x.index_select(1, order[:half]), x.index_select(1, order[half:])
        return x.index_select(1, order)

    @staticmethod
    def backward(ctx, *grads):
        even, odd = ctx.saved_tensors
        if ctx.split:
            ref = next(g for g in grads if g is not None)
            grads = [g if g is not None else torch.zeros_like(ref) for g in grads]
            grad = torch.cat(grads, 1)
        else:
            grad = grads[0]
        # The shuffled channels alternate x1's and x2's.
        return grad.index_select(1, even), grad.index_select(1, odd), None, None, None, None


class ChannelShuffle(nn.Module):
    """cat((x1, x2), 1) followed by ShuffleNetV2's channel shuffle with 2 groups.

    Args:
        in_channels: channels of the concatenation (x1's plus x2's, equal halves).
        groups: shuffle groups; 2 (ShuffleNetV2's) is the one implemented.
        split_shuffle: return the result already chunked in two (what the next block would chunk).

        >>> m = ChannelShuffle(64, split_shuffle=True)
        >>> y1, y2 = m(torch.randn(2, 32, 7, 7), torch.randn(2, 32, 7, 7))
    """

    def __init__(self, in_channels, groups=2, split_shuffle=True):
        super().__init__()
        if groups != 2:
            raise ValueError(f"ChannelShuffle implements groups=2 (ShuffleNetV2's), got groups={groups}")
        if in_channels % 2:
            raise ValueError(f"ChannelShuffle needs an even in_channels, got {in_channels}")
        self.in_channels, self.groups, self.split_shuffle = in_channels, groups, split_shuffle
        # Buffers, so model.to(device) moves the indices once instead of copying them every step.
        self.register_buffer("order", _shuffle_order(in_channels, groups), persistent=False)
        self.register_buffer("even", torch.arange(0, in_channels, 2), persistent=False)
        self.register_buffer("odd", torch.arange(1, in_channels, 2), persistent=False)

    def forward(self, x1, x2):
        if x1.shape[1] + x2.shape[1] != self.in_channels or x1.shape[1] != x2.shape[1]:
            raise ValueError(f"ChannelShuffle({self.in_channels}) expects two inputs of {self.in_channels // 2} "
                             f"channels, got {x1.shape[1]} and {x2.shape[1]}")
        return _CatShuffle.apply(x1, x2, self.order, self.split_shuffle, self.even, self.odd)

    def extra_repr(self):
        return f"{self.in_channels}, groups={self.groups}, split_shuffle={self.split_shuffle}"
