"""torch_npu.contrib.function: functional add-ons (dropout with a byte mask, ...)."""

from torch_npu.contrib.function import npu_functional  # noqa: F401
from torch_npu.contrib.function.npu_functional import dropout_with_byte_mask  # noqa: F401
