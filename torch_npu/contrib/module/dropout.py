"""nn.Dropout with a uint8 mask (torch_npu's DropoutWithByteMask)."""

from __future__ import annotations

from torch import nn

from torch_npu.contrib.function.dropout import dropout_with_byte_mask

__all__ = ["DropoutWithByteMask"]


class DropoutWithByteMask(nn.Module):
    """Zeroes elements with probability p in training (the rest scaled by 1 / (1 - p)); identity in eval.

    Args:
        p: probability of an element to be zeroed.
        inplace: do it in place.
        max_seed: kept for torch_npu's signature; the npu generator seeds the mask.
    """

    def __init__(self, p=0.5, inplace=False, max_seed=2 ** 10 - 1):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace, self.max_seed = p, inplace, max_seed

    def forward(self, input1):
        return dropout_with_byte_mask(input1, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
