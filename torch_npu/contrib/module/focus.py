"""YOLOv5's Focus layer (space-to-depth then a convolution) with the strided slices taken as contiguous
copies and index_selects, which a device handles better than a 2-D strided gather (torch_npu's Focus)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Focus"]


def _autopad(k, p=None):
    if p is None:
        p = k // 2 if isinstance(k, int) else [x // 2 for x in k]
    return p


class _Conv(nn.Module):
    """Conv2d (no bias) + BatchNorm2d + LeakyReLU(0.1) (YOLOv5's Conv of the time)."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, _autopad(k, p), groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.LeakyReLU(0.1, inplace=True) if act else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


def _space_to_depth(x):
    """cat of x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2] along channels."""
    h = x.shape[2]
    rows_even = torch.arange(0, h - h % 2, 2, device=x.device)
    rows_odd = rows_even + 1
    cols_even, cols_odd = x[..., ::2].contiguous(), x[..., 1::2].contiguous()
    return torch.cat((cols_even.index_select(2, rows_even), cols_even.index_select(2, rows_odd),
                      cols_odd.index_select(2, rows_even), cols_odd.index_select(2, rows_odd)), 1)


class Focus(nn.Module):
    """Focus(c1, c2, k=1, s=1, p=None, g=1, act=True): (N, c1, H, W) -> (N, c2, H / 2, W / 2) for even H, W."""

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, act=True):
        super().__init__()
        self.conv = _Conv(c1 * 4, c2, k, s, p, g, act)

    def forward(self, x):
        if x.dim() != 4 or x.shape[2] % 2 or x.shape[3] % 2:
            raise ValueError(f"Focus expects (N, C, H, W) with even H and W, got {tuple(x.shape)}")
        return self.conv(_space_to_depth(x))
