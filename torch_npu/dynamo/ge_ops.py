"""Built-in GE IR ops whose device op takes other arguments than the IR's inputs, attrs and outputs in order.

A converter describes a GE IR node: `custom_op("Add", inputs={"x1": a, "x2": b}, outputs=["y"])` is
GE's Add (x1, x2 -> y). Most IR ops call their device op aclnn<Type> with exactly those tensors
in that order (Mul, Div, Relu, ...), which is what custom_op does for any type. The ops here do
not: aclnnAdd also takes an alpha scalar, GE's Cast names its result type in an attribute where
aclnnCast reads it from its output, ArgMaxWithValue is aclnnMaxDim with the outputs swapped. Each
entry says how the IR call becomes the device op's argument list; output shapes and dtypes are the
converted op's own (its meta outputs), as GE takes them from the graph.
"""

from __future__ import annotations

import enum

import torch

from torch_npu.dynamo import device_op as _dev


class DataType(enum.IntEnum):
    """GE's data type codes (ge::DataType), as converters pass them in attributes such as Cast's dst_type."""
    DT_FLOAT = 0
    DT_FLOAT16 = 1
    DT_INT8 = 2
    DT_INT32 = 3
    DT_UINT8 = 4
    DT_INT16 = 6
    DT_UINT16 = 7
    DT_UINT32 = 8
    DT_INT64 = 9
    DT_UINT64 = 10
    DT_DOUBLE = 11
    DT_BOOL = 12
    DT_COMPLEX64 = 16
    DT_COMPLEX128 = 17
    DT_BF16 = 27


TORCH_DTYPES = {
    DataType.DT_FLOAT: torch.float32, DataType.DT_FLOAT16: torch.float16, DataType.DT_INT8: torch.int8,
    DataType.DT_INT32: torch.int32, DataType.DT_UINT8: torch.uint8, DataType.DT_INT16: torch.int16,
    DataType.DT_UINT16: torch.uint16, DataType.DT_UINT32: torch.uint32, DataType.DT_INT64: torch.int64,
    DataType.DT_UINT64: torch.uint64, DataType.DT_DOUBLE: torch.float64, DataType.DT_BOOL: torch.bool,
    DataType.DT_COMPLEX64: torch.complex64, DataType.DT_COMPLEX128: torch.complex128,
    DataType.DT_BF16: torch.bfloat16,
}

REQUIRED = object()  # an attribute the IR declares without a default
_KIND_NAMES = {_dev.INT: "Int", _dev.FLOAT: "Float", _dev.BOOL: "Bool", _dev.STRING: "Str", _dev.INT_ARRAY: "ListInt"}


class IrCallError(ValueError):
    """A call of a built-in GE IR op that the IR does not declare (or its device op cannot make)."""

# Entries of IrOp.call, one per parameter of the device op's GetWorkspaceSize (before workspaceSize
# and executor): an IR input, attribute or output by name, or a constant.


def In(name):  # noqa: N802  (reads as the IR does)
    return ("in", name)


def Out(name):  # noqa: N802
    return ("out", name)


def Attr(name):  # noqa: N802
    return ("attr", name)


def Const(kind, value):  # noqa: N802
    return ("const", kind, value)


class IrOp:
    """One GE IR op as declared (inputs, attrs with their kinds and defaults, outputs, in IR order),
    the device op computing it and that op's parameters (`call`). `check(attrs, meta_outputs)`
    returns what is wrong with a call the device op cannot express, or None."""

    def __init__(self, device_op: str, inputs: tuple, outputs: tuple, call: tuple, attrs: dict | None = None,
                 check=None):
        self.device_op, self.inputs, self.outputs, self.call = device_op, inputs, outputs, call
        self.attrs = attrs or {}  # name -> (kind, default or REQUIRED)
        self.check = check

    def signature(self, op_type: str) -> str:
        attrs = "".join(f", {name}" for name in self.attrs)
        return f"GE {op_type}({', '.join(self.inputs)}{attrs}) -> {', '.join(self.outputs)}"


def _check_cast(attrs: dict, metas: dict):
    code = attrs["dst_type"]
    dtype = TORCH_DTYPES.get(code)
    if dtype is None:
        known = ", ".join(f"{d.name} ({d.value})" for d in TORCH_DTYPES)
        return f"dst_type {code} is not a data type the npu computes (one of {known})"
    if metas["y"] is not None and metas["y"].dtype != dtype:
        return (f"dst_type {DataType(code).name} makes {dtype}, but the op's output (meta_outputs) is "
                f"{metas['y'].dtype}")
    return None


_BINARY_WITH_ALPHA = dict(inputs=("x1", "x2"), outputs=("y",),
                          call=(In("x1"), In("x2"), Const(_dev.SCALAR, 1), Out("y")))
_REDUCE_WITH_VALUE = dict(inputs=("x",), outputs=("indice", "values"),
                          attrs={"dimension": (_dev.INT, REQUIRED), "keep_dims": (_dev.BOOL, False)},
                          call=(In("x"), Attr("dimension"), Attr("keep_dims"), Out("values"), Out("indice")))

IR_OPS = {
    "Add": IrOp("aclnnAdd", **_BINARY_WITH_ALPHA),
    "Sub": IrOp("aclnnSub", **_BINARY_WITH_ALPHA),
    "RealDiv": IrOp("aclnnDiv", ("x1", "x2"), ("y",), (In("x1"), In("x2"), Out("y"))),
    # aclnnCast converts to its output's dtype: dst_type only has to agree with it.
    "Cast": IrOp("aclnnCast", ("x",), ("y",), (In("x"), Out("y")), {"dst_type": (_dev.INT, REQUIRED)},
                 check=_check_cast),
    "ArgMaxWithValue": IrOp("aclnnMaxDim", **_REDUCE_WITH_VALUE),
    "ArgMinWithValue": IrOp("aclnnMinDim", **_REDUCE_WITH_VALUE),
}


def _by_ir_names(given: list, declared: tuple, what: str, signature: str) -> dict:
    """IR name -> position in `given`: by name when the converter used the IR's names, else by order."""
    if len(given) != len(declared):
        raise IrCallError(f"is {signature}: it takes {len(declared)} {what}, got {len(given)} "
                          f"({', '.join(given) or 'none'})")
    if sorted(given) == sorted(declared):
        return {name: given.index(name) for name in declared}
    return {name: i for i, name in enumerate(declared)}


def _attr_values(ir: IrOp, given: dict, signature: str) -> dict:
    """name -> value of each attribute the IR declares: the converter's (of the declared kind) or the default."""
    unknown = sorted(set(given) - set(ir.attrs))
    if unknown:
        raise IrCallError(f"is {signature}: no attribute {', '.join(unknown)}")
    values = {}
    for name, (kind, default) in ir.attrs.items():
        attr = given.get(name)
        if attr is None and default is REQUIRED:
            raise IrCallError(f"needs attribute {name} (ge.attr.{_KIND_NAMES[kind]}): {signature}")
        if attr is not None and attr.kind != kind:
            raise IrCallError(f"attribute {name} is a ge.attr.{_KIND_NAMES[kind]}, got {attr!r}")
        values[name] = default if attr is None else attr.value
    return values


def device_call(op_type: str, ir: IrOp, inputs: list, attrs: dict, outputs: list, metas: list) -> list:
    """The device op's arguments for custom_op(op_type, ...) with these input names, attributes
    (name -> ge.attr value) and output names, whose outputs are described by `metas`: ("in", i) the
    converter's i-th input, ("out", j) its j-th output, ("arg", kind, value) a plain value."""
    signature = ir.signature(op_type)
    input_at = _by_ir_names(inputs, ir.inputs, "input(s)", signature)
    output_at = _by_ir_names(outputs, ir.outputs, "output(s)", signature)
    values = _attr_values(ir, attrs, signature)
    if ir.check is not None:
        problem = ir.check(values, {name: metas[j] for name, j in output_at.items()})
        if problem:
            raise IrCallError(problem)
    refs = []
    for entry in ir.call:
        if entry[0] == "in":
            refs.append(("in", input_at[entry[1]]))
        elif entry[0] == "out":
            refs.append(("out", output_at[entry[1]]))
        elif entry[0] == "attr":
            refs.append(("arg", ir.attrs[entry[1]][0], values[entry[1]]))
        else:
            refs.append(("arg", entry[1], entry[2]))
    return refs
