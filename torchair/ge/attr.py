"""Attribute values for torchair.ge.custom_op (`attrs={"axis": ge.attr.Int(1)}`).

They reach the device op as plain C values (Int and DataType: int64_t, Float: double, Bool: bool,
Str: const char*) or an aclIntArray (ListInt), in the order given, after its inputs; a built-in GE
IR op takes them by name (Cast's dst_type, a ge.DataType code).
"""

from torch_npu.dynamo.converters import ATTR_TYPES

Int = ATTR_TYPES["Int"]
Float = ATTR_TYPES["Float"]
Bool = ATTR_TYPES["Bool"]
Str = ATTR_TYPES["Str"]
ListInt = ATTR_TYPES["ListInt"]
DataType = ATTR_TYPES["DataType"]

__all__ = ["Bool", "DataType", "Float", "Int", "ListInt", "Str"]
