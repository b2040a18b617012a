"""Mish and SiLU (Swish) as modules, as torch_npu's affinity library ships them (torch.nn has both now)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["Mish", "SiLU", "Swish"]


class Mish(nn.Module):
    """mish(x) = x * tanh(softplus(x))."""

    def forward(self, x):
        return torch.nn.functional.mish(x)


class SiLU(nn.Module):
    """silu(x) = x * sigmoid(x), also known as swish."""

    def forward(self, x):
        return torch.nn.functional.silu(x)


Swish = SiLU
