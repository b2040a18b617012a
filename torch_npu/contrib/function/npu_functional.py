"""torch_npu.contrib.function.npu_functional: the functional forms under the module name torch_npu's op tests
import (`from torch_npu.contrib.function import npu_functional as F`)."""

from torch_npu.contrib.function.dropout import dropout_with_byte_mask

__all__ = ["dropout_with_byte_mask"]
