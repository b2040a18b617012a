"""torchair.ge: what converters compose — ge.Tensor placeholders, custom_op, attributes."""

from torch_npu.dynamo.converters import Tensor, custom_op

from torchair.ge import attr

__all__ = ["Tensor", "attr", "custom_op"]
