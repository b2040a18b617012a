"""torch_npu.contrib.module.npu_modules: modules under the module name torch_npu's op tests import."""

from torch_npu.contrib.module.dropout import DropoutWithByteMask

__all__ = ["DropoutWithByteMask"]
