"""NpuDropPath: stochastic depth (drop whole samples of a residual branch), as timm's DropPath."""

import torch
from torch import nn

__all__ = ["NpuDropPath"]


class NpuDropPath(nn.Module):
    """Zeroes the whole branch output of each sample with probability `drop_prob` while training and
    scales the kept samples by 1 / (1 - drop_prob); the identity in eval mode or for drop_prob 0."""

    def __init__(self, drop_prob=None):
        super().__init__()
        self.drop_prob = float(drop_prob or 0.0)
        if not 0.0 <= self.drop_prob <= 1.0:
            raise ValueError(f"drop_prob has to be between 0 and 1, but got {drop_prob}")

    def forward(self, x):
        if self.drop_prob == 0.0 or not self.training:
            return x
        keep = 1.0 - self.drop_prob
        shape = (x.shape[0],) + (1,) * (x.dim() - 1)
        mask = torch.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(keep)
        return x * mask / keep if keep > 0 else x * mask

    def extra_repr(self):
        return f"drop_prob={self.drop_prob}"
