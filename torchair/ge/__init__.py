"""torchair.ge: what converters compose — ge.Tensor placeholders, custom_op, attributes, GE data types."""

from torch_npu.dynamo.converters import Tensor, custom_op
from torch_npu.dynamo.ge_ops import DataType

from torchair.ge import attr

__all__ = ["DataType", "Tensor", "attr", "custom_op"]
