"""Modules of torch_npu.contrib: DropoutWithByteMask."""

from torch import nn

from torch_npu.contrib.function.npu_functional import dropout_with_byte_mask

__all__ = ["DropoutWithByteMask"]


class DropoutWithByteMask(nn.Module):
    """nn.Dropout whose keep mask is one byte per element, as torch_npu's NPU kernel keeps it.

    Args:
        p: probability of an element to be zeroed (default 0.5).
        inplace: do the operation in place (default False).
        max_seed: accepted for torch_npu compatibility; random numbers come from the npu generator.
    """

    def __init__(self, p=0.5, inplace=False, max_seed=2 ** 10 - 1):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace
        self.max_seed = max_seed

    def forward(self, input1):
        return dropout_with_byte_mask(input1, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
