"""npu ops as nodes of the ``npu`` custom ONNX domain: op type = the op's name, inputs = its tensor
arguments, attributes = its other arguments, outputs = its tensor results.

Used for the ops without a standard ONNX equivalent (npu_roi_align, npu_nms_v4, npu_fusion_attention,
...), for every npu op added later (extensions registering into torch.ops.npu included), and by the
legacy TorchScript exporter. The dynamo exporter needs an ONNX schema for each node it builds, so the
schemas are registered with ``onnx.defs`` (domain ``npu``, version 1) when the table is built.
"""

from __future__ import annotations

import torch

DOMAIN = "npu"
DOMAIN_VERSION = 1

# `int` arguments that hold a dtype (a torch dtype or a torch_npu code): written as the ONNX element type, as
# ScalarType arguments are.
_DTYPE_CODE_ARGUMENTS = {("npu_dtype_cast", "dtype"), ("npu_dtype_cast", "input_dtype")}

_ALL_TENSOR_TYPES = [
    f"tensor({t})"
    for t in ("float", "float16", "bfloat16", "double", "int8", "int16", "int32", "int64", "uint8", "bool")
]


def _is_tensor(t) -> bool:
    return isinstance(t, torch.TensorType) or (
        isinstance(t, torch.OptionalType) and isinstance(t.getElementType(), torch.TensorType)
    )


def _is_tensor_list(t) -> bool:
    return isinstance(t, torch.ListType) and isinstance(t.getElementType(), torch.TensorType)


def _attribute_kind(t):
    """The ONNX attribute type of a non-tensor argument type (None: not representable)."""
    from onnx.defs import OpSchema

    if isinstance(t, torch.OptionalType):
        t = t.getElementType()
    if isinstance(t, (torch.FloatType, torch.NumberType)):
        return OpSchema.AttrType.FLOAT
    if isinstance(t, (torch.IntType, torch.BoolType)) or str(t) == "ScalarType":
        return OpSchema.AttrType.INT
    if isinstance(t, torch.StringType):
        return OpSchema.AttrType.STRING
    if isinstance(t, torch.ListType):
        element = t.getElementType()
        if isinstance(element, (torch.IntType, torch.BoolType)):
            return OpSchema.AttrType.INTS
        if isinstance(element, torch.FloatType):
            return OpSchema.AttrType.FLOATS
    return None


def tensor_outputs(schema) -> list[int]:
    """Indices of the tensor results (int results such as attention's seed have no ONNX value)."""
    return [i for i, r in enumerate(schema.returns) if isinstance(r.type, torch.TensorType)]


def onnx_schema(name: str, schema):
    """The onnx.defs.OpSchema of npu::<name> built from its torch schema."""
    from onnx.defs import OpSchema

    inputs, attributes, constraints = [], [], []
    # ONNX allows one variadic input, the last: from a tensor list that other tensors follow on, the inputs are one
    # variadic of mixed types (the node lists them in the schema's order, lists flattened).
    tensor_args = [a for a in schema.arguments if _is_tensor(a.type) or _is_tensor_list(a.type)]
    first_list = next((i for i, a in enumerate(tensor_args) if _is_tensor_list(a.type)), None)
    tail = tensor_args[first_list:] if first_list is not None and first_list < len(tensor_args) - 1 else []
    if tail:
        type_str = "T_inputs"
        constraints.append((type_str, _ALL_TENSOR_TYPES, ""))
    for arg in schema.arguments:
        if tail and any(arg is t for t in tail):
            if arg is tail[0]:
                inputs.append(OpSchema.FormalParameter("inputs", "T_inputs", "",
                                                       param_option=OpSchema.FormalParameterOption.Variadic,
                                                       is_homogeneous=False))
            continue
        if _is_tensor(arg.type):
            option = (
                OpSchema.FormalParameterOption.Optional
                if isinstance(arg.type, torch.OptionalType)
                else OpSchema.FormalParameterOption.Single
            )
            type_str = f"T_{arg.name}"
            inputs.append(OpSchema.FormalParameter(arg.name, type_str, "", param_option=option))
            constraints.append((type_str, _ALL_TENSOR_TYPES, ""))
        elif _is_tensor_list(arg.type):
            type_str = f"T_{arg.name}"
            inputs.append(
                OpSchema.FormalParameter(arg.name, type_str, "", param_option=OpSchema.FormalParameterOption.Variadic)
            )
            constraints.append((type_str, _ALL_TENSOR_TYPES, ""))
        else:
            kind = _attribute_kind(arg.type)
            if kind is not None:
                attributes.append(OpSchema.Attribute(arg.name, kind, "", required=False))
    outputs = []
    for i in tensor_outputs(schema):
        type_str = f"O{i}"
        outputs.append(OpSchema.FormalParameter(f"output{i}", type_str, ""))
        constraints.append((type_str, _ALL_TENSOR_TYPES, ""))
    return OpSchema(name, DOMAIN, DOMAIN_VERSION, inputs=inputs, outputs=outputs,
                    type_constraints=constraints, attributes=attributes)


_registered: set[str] = set()


def register_onnx_schema(name: str, schema) -> None:
    import onnx.defs

    if name in _registered:
        return
    try:
        onnx.defs.get_schema(name, DOMAIN_VERSION, DOMAIN)
    except onnx.defs.SchemaError:
        onnx.defs.register_schema(onnx_schema(name, schema))
    _registered.add(name)


def _dtype_of(value) -> torch.dtype:
    from torch_npu._dtypes import to_torch_dtype

    return value if isinstance(value, torch.dtype) else to_torch_dtype(int(value))


def _attribute_value(value):
    if isinstance(value, torch.dtype):
        from torch_npu.onnx._standard import onnx_dtype

        return onnx_dtype(value)
    if isinstance(value, (list, tuple)):
        return [int(v) if isinstance(v, bool) else v for v in value]
    if isinstance(value, bool):
        return int(value)
    return value


def dynamo_translation(name: str, schema):
    """A translation for the dynamo exporter emitting one npu::<name> node."""
    register_onnx_schema(name, schema)
    arguments = list(schema.arguments)
    n_outputs = len(tensor_outputs(schema))

    def translate(*args, **kwargs):
        import onnxscript

        opset = onnxscript.values.Opset(DOMAIN, DOMAIN_VERSION)
        values = {a.name: a.default_value for a in arguments if a.has_default_value()}
        values.update({a.name: v for a, v in zip(arguments, args)})
        values.update(kwargs)
        inputs, attributes = [], {}
        for arg in arguments:
            value = values.get(arg.name)
            if _is_tensor(arg.type):
                inputs.append(value)
            elif _is_tensor_list(arg.type):
                inputs.extend(value or [])
            elif value is not None and (name, arg.name) in _DTYPE_CODE_ARGUMENTS:
                attributes[arg.name] = _attribute_value(_dtype_of(value))
            elif value is not None and _attribute_kind(arg.type) is not None:
                attributes[arg.name] = _attribute_value(value)
        # Trailing absent optional inputs are dropped; inner ones stay as empty inputs.
        while inputs and inputs[-1] is None:
            inputs.pop()
        results = getattr(opset, name)(*inputs, **attributes)
        if n_outputs == 1 or not isinstance(results, (list, tuple)):
            return results
        return tuple(results)

    translate.__name__ = f"{name}_to_npu_domain"
    return translate


_LEGACY_SUFFIX = {"FLOAT": "f", "INT": "i", "STRING": "s", "INTS": "i", "FLOATS": "f"}


def legacy_symbolic(name: str, schema):
    """A TorchScript-exporter symbolic emitting npu::<name> with the op's attributes."""
    from torch.onnx import symbolic_helper

    arguments = list(schema.arguments)
    n_outputs = len(tensor_outputs(schema))

    def symbolic(g, *args):
        inputs, attributes = [], {}
        for arg, value in zip(arguments, args):
            if _is_tensor(arg.type):
                if not symbolic_helper._is_none(value):  # absent optional tensors are left out
                    inputs.append(value)
                continue
            if _is_tensor_list(arg.type):
                inputs.extend(symbolic_helper._unpack_list(value))
                continue
            kind = _attribute_kind(arg.type)
            if kind is None or symbolic_helper._is_none(value):
                continue
            suffix = _LEGACY_SUFFIX[kind.name]
            if kind.name in ("INTS", "FLOATS"):
                constant = symbolic_helper._maybe_get_const(value, "is" if kind.name == "INTS" else "fs")
                attributes[f"{arg.name}_{suffix}"] = [int(v) if isinstance(v, bool) else v for v in constant]
            elif kind.name == "STRING":
                attributes[f"{arg.name}_s"] = symbolic_helper._maybe_get_const(value, "s")
            elif kind.name == "FLOAT":
                attributes[f"{arg.name}_f"] = float(symbolic_helper._maybe_get_const(value, "f"))
            elif "ScalarType" in str(arg.real_type) or (name, arg.name) in _DTYPE_CODE_ARGUMENTS:
                # a dtype: the ONNX element type, as the dynamo exporter writes
                dtype = _dtype_of(symbolic_helper._maybe_get_const(value, "i"))
                attributes[f"{arg.name}_i"] = int(torch.onnx.JitScalarType.from_dtype(dtype).onnx_type())
            else:
                attributes[f"{arg.name}_i"] = int(symbolic_helper._maybe_get_const(value, "i"))
        return g.op(f"{DOMAIN}::{name}", *inputs, outputs=n_outputs, **attributes)

    return symbolic
