"""Converters: ops that run as named device ops inside compiled npu graphs (torchair's API).

`torchair.register_fx_node_ge_converter(op)` registers a function that describes `op` as a device
op, `torchair.ge.custom_op("AddCustom", inputs={...}, outputs=[...])`. When a graph is compiled for
npu, each call of a converted op is replaced by `torchair::device_op`, which runs the device op
`aclnn<Type>` (built-in or from a custom op package) on the current stream; every other op lowers
through Inductor. The converter runs once per compiled graph, on placeholders: mistakes (an unknown
op type, outputs that do not match the op's) fail the compile, naming the op.

The device op is called as aclnn<Type>GetWorkspaceSize(inputs..., attrs..., outputs..., ...), each
group in the order the converter gives it (the order of EXEC_NPU_CMD in an eager adapter), except
for the built-in GE IR ops of ge_ops.IR_OPS ("Add", "Cast", "ArgMaxWithValue", ...), which the
converter writes as GE declares them and which ge_ops maps onto their device op's parameters.
Output shapes and dtypes are the converted op's (its Meta implementation: the meta_outputs the
converter was given), never the device op's guess.
"""

from __future__ import annotations

import json
import operator
from typing import Callable

import torch
from torch.fx.experimental.proxy_tensor import py_sym_types

from torch_npu.dynamo import device_op as _dev
from torch_npu.dynamo import ge_ops

_CONVERTERS: dict = {}


# ---- the torchair.ge surface: placeholders a converter composes -----------------------------------

class Tensor:
    """A tensor in a converter: one of the converted op's inputs, or an output of a custom_op."""

    def __init__(self, source: tuple, meta=None):
        self._source = source  # ("input", index) or ("output", node, index)
        self._meta = meta

    @property
    def dtype(self):
        return None if self._meta is None else self._meta.dtype

    def __repr__(self) -> str:
        return f"ge.Tensor({self._source[0]} {self._source[-1]})"


class _Attr:
    kind = ""
    name = ""  # as converters spell it: ge.attr.<name>

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return f"ge.attr.{self.name}({self.value!r})"


class _AttrInt(_Attr):
    kind, name = _dev.INT, "Int"


class _AttrDataType(_AttrInt):
    """A GE data type code (ge.DataType.DT_FLOAT16, ...): an int to the device op."""
    name = "DataType"


class _AttrFloat(_Attr):
    kind, name = _dev.FLOAT, "Float"


class _AttrBool(_Attr):
    kind, name = _dev.BOOL, "Bool"


class _AttrStr(_Attr):
    kind, name = _dev.STRING, "Str"


class _AttrListInt(_Attr):
    kind, name = _dev.INT_ARRAY, "ListInt"


ATTR_TYPES = {cls.name: cls for cls in (_AttrInt, _AttrFloat, _AttrBool, _AttrStr, _AttrListInt, _AttrDataType)}


class _CustomOpNode:
    def __init__(self, op_type: str, inputs: list, attrs: list, outputs: list[str]):
        self.op_type, self.inputs, self.attrs, self.outputs = op_type, inputs, attrs, outputs


class _Recording:
    """The custom_op calls made by the converter being run."""

    current = None

    def __init__(self):
        self.nodes: list[_CustomOpNode] = []


def custom_op(op_type: str, *, inputs: dict | None, outputs: list | None, attrs: dict | None = None,
              node_name: str | None = None):
    """The device op `aclnn<op_type>` applied to `inputs` (name -> ge.Tensor, None or a list of
    ge.Tensor, in the op's argument order), with `attrs` (name -> ge.attr.X) and `outputs` (names).
    Returns one ge.Tensor per output (a single one when there is one output)."""
    if _Recording.current is None:
        raise RuntimeError("torchair.ge.custom_op is called by converters while a graph compiles")
    if not isinstance(op_type, str) or not op_type:
        raise TypeError(f"custom_op: op type must be a non-empty string, got {op_type!r}")
    ins = []
    for name, value in (inputs or {}).items():
        if value is None or isinstance(value, Tensor):
            ins.append((name, value))
        elif isinstance(value, (list, tuple)) and all(isinstance(v, Tensor) for v in value):
            ins.append((name, list(value)))
        else:
            raise TypeError(f"custom_op '{op_type}': input '{name}' must be a ge.Tensor, None or a list of "
                            f"ge.Tensor, got {type(value).__name__}")
    ats = []
    for name, value in (attrs or {}).items():
        if not isinstance(value, _Attr):
            raise TypeError(f"custom_op '{op_type}': attr '{name}' must be one of "
                            f"{', '.join('ge.attr.' + k for k in ATTR_TYPES)}, got {type(value).__name__}")
        ats.append((name, value))
    if not isinstance(outputs, (list, tuple)) or not outputs or not all(isinstance(o, str) for o in outputs):
        raise TypeError(f"custom_op '{op_type}': outputs must be a non-empty list of output names, got {outputs!r}")
    node = _CustomOpNode(op_type, ins, ats, list(outputs))
    _Recording.current.nodes.append(node)
    results = [Tensor(("output", node, i)) for i in range(len(outputs))]
    return results[0] if len(results) == 1 else tuple(results)


# ---- registration ---------------------------------------------------------------------------------

def register_fx_node_ge_converter(op) -> Callable:
    """Decorator: `fn` describes `op` (an OpOverload such as torch.ops.npu.npu_add_custom.default) as
    a device op. It is called with the op's arguments (ge.Tensor for tensors) and `meta_outputs`."""
    if isinstance(op, torch._ops.OpOverloadPacket):
        op = op.default
    if not isinstance(op, torch._ops.OpOverload):
        raise TypeError(f"register_fx_node_ge_converter expects an op overload such as "
                        f"torch.ops.npu.my_op.default, got {op!r}")

    def register(fn: Callable) -> Callable:
        _CONVERTERS[op] = fn
        return fn

    return register


def has_converters() -> bool:
    return bool(_CONVERTERS)


def registry_key() -> str:
    """Identifies the registered converters (for Inductor's graph cache)."""
    parts = []
    for op, fn in sorted(_CONVERTERS.items(), key=lambda kv: str(kv[0])):
        code = getattr(fn, "__code__", None)
        parts.append(f"{op}:{getattr(fn, '__qualname__', fn)}:{hash(code.co_code) if code else ''}")
    return ";".join(parts)


# ---- the graph pass ---------------------------------------------------------------------------------

class ConverterError(RuntimeError):
    pass


def _placeholder(value, tensors: list):
    """Converter view of one op argument; records the tensors in order."""
    if isinstance(value, torch.fx.Node):
        index = len(tensors)
        tensors.append(value)
        return Tensor(("input", index), value.meta.get("val"))
    if isinstance(value, (list, tuple)):
        return type(value)(_placeholder(v, tensors) for v in value)
    return value


def _template(value, tensors: list):
    """JSON template of an argument: tensors become {"t": index}."""
    if isinstance(value, torch.fx.Node):
        val = value.meta.get("val")
        if isinstance(val, py_sym_types):
            raise ConverterError("a symbolic (dynamic-shape) scalar argument")
        return {"t": tensors.index(value)}
    if isinstance(value, (list, tuple)):
        return [_template(v, tensors) for v in value]
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).split(".")[-1]}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ConverterError(f"an argument of type {type(value).__name__}")


def _plan(node: torch.fx.Node, fn: Callable) -> tuple[dict, list]:
    """Runs the converter on placeholders; returns the device-op call spec and the tensor inputs."""
    op = node.target
    tensors: list = []
    args = [_placeholder(a, tensors) for a in node.args]
    kwargs = {k: _placeholder(v, tensors) for k, v in node.kwargs.items()}
    meta = node.meta.get("val")
    recording = _Recording()
    _Recording.current = recording
    try:
        result = fn(*args, **kwargs, meta_outputs=meta)
    except (TypeError, ValueError, AssertionError) as e:
        raise ConverterError(f"the converter raised {type(e).__name__}: {e}") from e
    finally:
        _Recording.current = None
    if len(recording.nodes) != 1:
        raise ConverterError(f"a converter must make exactly one torchair.ge.custom_op call, this one made "
                             f"{len(recording.nodes)}")
    dev = recording.nodes[0]
    ir = ge_ops.IR_OPS.get(dev.op_type)
    op_name = ir.device_op if ir is not None else f"aclnn{dev.op_type}"
    if not _dev.device_op_exists(op_name):
        raise ConverterError(f"custom_op type '{dev.op_type}': no device op {op_name} is registered (built-in "
                             "ops and custom op packages from ASCEND_CUSTOM_OPP_PATH; "
                             "torch.npu.op_stats() / torch_npu._C._device_ops() list them)")
    returned = list(result) if isinstance(result, (list, tuple)) else [result]
    expected = list(meta) if isinstance(meta, (list, tuple)) else [meta]
    if len(returned) != len(expected):
        raise ConverterError(f"the converter returned {len(returned)} output(s); {op} has {len(expected)}")
    order = []
    for r in returned:
        if not (isinstance(r, Tensor) and r._source[0] == "output" and r._source[1] is dev):
            raise ConverterError(f"the converter must return the outputs of its custom_op, got {r!r}")
        order.append(r._source[2])
    if sorted(order) != list(range(len(dev.outputs))):
        raise ConverterError(f"the converter must return each of custom_op '{dev.op_type}''s "
                             f"{len(dev.outputs)} outputs ({', '.join(dev.outputs)}) exactly once")
    # custom_op output j is the op's output order.index(j), and is described by that output's meta.
    outputs = [order.index(j) for j in range(len(dev.outputs))]
    metas = [expected[i] for i in outputs]
    spec = {
        "source": f"{op.namespace}::{op._opname}.{op._overloadname}",
        "args": _template(list(node.args), tensors),
        "kwargs": {k: _template(v, tensors) for k, v in node.kwargs.items()},
        "tuple": isinstance(meta, (list, tuple)),
        # the device op's arguments: {"in": input}, {"out": custom_op output}, {"arg": [kind, value]}
        "call": _ir_call(dev, ir, metas) if ir is not None else _direct_call(dev),
        "outputs": outputs,
        "device_op": op_name,
    }
    return spec, tensors


def _input_entry(value, dev) -> dict:
    """A custom_op input as the device-op call refers to it: an op input's index, a list, or None."""
    def index(t: Tensor) -> int:
        if t._source[0] != "input":
            raise ConverterError(f"custom_op '{dev.op_type}' input {t!r} is not one of the op's inputs")
        return t._source[1]

    if value is None:
        return {"in": None}
    return {"in": [index(v) for v in value] if isinstance(value, list) else index(value)}


def _direct_call(dev) -> list:
    """aclnn<Type>(inputs..., attrs..., outputs...), each in the converter's order."""
    return ([_input_entry(value, dev) for _, value in dev.inputs]
            + [{"arg": [a.kind, a.value]} for _, a in dev.attrs]
            + [{"out": j} for j in range(len(dev.outputs))])


def _ir_call(dev, ir, metas: list) -> list:
    """The device-op call of a built-in GE IR op (ge_ops), from the IR's inputs, attributes and outputs."""
    try:
        refs = ge_ops.device_call(dev.op_type, ir, [name for name, _ in dev.inputs], dict(dev.attrs), dev.outputs,
                                  metas)
    except ge_ops.IrCallError as e:
        raise ConverterError(f"custom_op '{dev.op_type}' {e}") from None
    return [_input_entry(dev.inputs[ref[1]][1], dev) if ref[0] == "in" else
            {"out": ref[1]} if ref[0] == "out" else {"arg": [ref[1], ref[2]]} for ref in refs]


_KEPT_META = ("stack_trace", "nn_module_stack", "source_fn_stack", "original_aten", "from_node", "seq_nr")


def convert_graph(graph: torch.fx.Graph) -> None:
    """Replaces the calls of converted ops in a post-grad graph with torchair::device_op."""
    if not _CONVERTERS:
        return
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _CONVERTERS:
            continue
        try:
            spec, tensors = _plan(node, _CONVERTERS[node.target])
        except ConverterError as e:
            raise ConverterError(f"converter for {node.target}: {e}") from None
        with graph.inserting_before(node):
            spec_text = json.dumps(spec, sort_keys=True)
            new = graph.call_function(torch.ops.torchair.device_op.default, (spec_text, tensors))
            new.meta = {k: v for k, v in node.meta.items() if k in _KEPT_META}
            meta = node.meta.get("val")
            outs = list(meta) if isinstance(meta, (list, tuple)) else [meta]
            new.meta["val"] = [outs[i] for i in spec["outputs"]]
            if "eager_input_vals" in node.meta:  # the inputs' layouts as traced, which Inductor keeps
                new.meta["eager_input_vals"] = ((spec_text, [t.meta.get("val") for t in tensors]), {})
            if spec["tuple"]:
                for user in list(node.users):
                    if user.target is not operator.getitem:
                        raise ConverterError(f"converter for {node.target}: its outputs are used whole")
                    user.args = (new, spec["outputs"].index(user.args[1]))
            else:
                item = graph.call_function(operator.getitem, (new, 0))
                item.meta = dict(node.meta)
                node.replace_all_uses_with(item)
        graph.erase_node(node)
        changed = True
    if changed:
        graph.lint()


# ---- torchair::device_op ---------------------------------------------------------------------------

_lib = torch.library.Library("torchair", "DEF")
_lib.define("device_op(str spec, Tensor?[] inputs) -> Tensor[]")


def _resolve(template, tensors):
    if isinstance(template, dict):
        if "t" in template:
            return tensors[template["t"]]
        if "dtype" in template:
            return getattr(torch, template["dtype"])
        if "device" in template:
            return torch.device(template["device"])
    if isinstance(template, list):
        return [_resolve(v, tensors) for v in template]
    return template


def _source_outputs(spec: dict, tensors: list, to_meta: bool) -> list:
    """The converted op's outputs (metadata), from its Meta implementation."""
    if to_meta:
        tensors = [None if t is None else torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
                   for t in tensors]
    namespace, rest = spec["source"].split("::")
    name, overload = rest.split(".")
    op = getattr(getattr(getattr(torch.ops, namespace), name), overload)
    out = op(*_resolve(spec["args"], tensors), **{k: _resolve(v, tensors) for k, v in spec["kwargs"].items()})
    return list(out) if isinstance(out, (list, tuple)) else [out]


@torch.library.register_fake("torchair::device_op")
def _device_op_fake(spec: str, inputs):
    plan = json.loads(spec)
    outs = _source_outputs(plan, inputs, to_meta=False)
    return [torch.empty_like(outs[i]) for i in plan["outputs"]]


@torch.library.impl(_lib, "device_op", "PrivateUse1")
def _device_op_npu(spec: str, inputs):
    plan = json.loads(spec)
    metas = _source_outputs(plan, inputs, to_meta=True)
    device = next(t.device for t in inputs if t is not None)
    outputs = [torch.empty_strided(metas[i].shape, metas[i].stride(), dtype=metas[i].dtype, device=device)
               for i in plan["outputs"]]
    kinds, values = [], []
    for entry in plan["call"]:
        if "in" in entry:
            index = entry["in"]
            value = [inputs[i] for i in index] if isinstance(index, list) else None if index is None else inputs[index]
            kind = _dev.tensor_kind(value)
        elif "out" in entry:
            kind, value = _dev.TENSOR, outputs[entry["out"]]
        else:
            kind, value = entry["arg"]
        kinds.append(kind)
        values.append(value)
    _dev.run_device_op(plan["device_op"], "".join(kinds), values)
    return outputs
