"""Converters mapping a user op to a built-in GE IR op (Add, Cast, ArgMaxWithValue, ...): compiled on npu vs CPU."""

import pytest
import torch
import torch._inductor.config

import torchair
from torchair import ge

NPU = "npu"


@pytest.fixture(autouse=True, scope="module")
def _compile_in_process():
    # Small graphs: compiling their few kernels in-process beats starting Inductor's worker pool.
    with torch._inductor.config.patch(compile_threads=1):
        yield


# User ops, one per converter (a converter belongs to one op); eager kernels in ATen ops give the
# CPU reference and the shapes the compiler sees.
_lib = torch.library.Library("ge_builtin_test", "DEF")
_ops = torch.ops.ge_builtin_test


def _define(name: str, schema: str, eager, converter):
    _lib.define(f"{name}{schema}")
    torch.library.impl(_lib, name, "CompositeExplicitAutograd")(eager)
    torchair.register_fx_node_ge_converter(getattr(_ops, name).default)(converter)
    return getattr(_ops, name)


def _binary(ge_type: str, eager, inputs=("x1", "x2")):
    # As converters for GE are written: the IR's input and output names.
    def convert(x: ge.Tensor, y: ge.Tensor, meta_outputs=None):
        return torchair.ge.custom_op(ge_type, inputs=dict(zip(inputs, (x, y))), outputs=["y"])

    return _define(f"binary_{ge_type.lower()}_{'_'.join(inputs)}", "(Tensor x, Tensor y) -> Tensor", eager, convert)


BINARY = {
    "Add": (torch.add, "aclnnAdd", _binary("Add", torch.add)),
    "Sub": (torch.sub, "aclnnSub", _binary("Sub", torch.sub)),
    "Mul": (torch.mul, "aclnnMul", _binary("Mul", torch.mul)),
    "RealDiv": (torch.div, "aclnnDiv", _binary("RealDiv", torch.div)),
    "Div": (torch.div, "aclnnDiv", _binary("Div", torch.div)),
}
# The IR's input names in another order than the IR's: matched by name.
sub_named = _binary("Sub", torch.sub, inputs=("x2", "x1"))

# Cast: the result type is an attribute; the output (its meta) says the same.
GE_TYPES = {torch.float32: ge.DataType.DT_FLOAT, torch.float16: ge.DataType.DT_FLOAT16,
            torch.bfloat16: ge.DataType.DT_BF16, torch.int32: ge.DataType.DT_INT32,
            torch.int64: ge.DataType.DT_INT64, torch.bool: ge.DataType.DT_BOOL}

cast_to = _define("cast_to", "(Tensor x, ScalarType dtype) -> Tensor", lambda x, dtype: x.to(dtype),
                  lambda x, dtype, meta_outputs=None: ge.custom_op(
                      "Cast", inputs={"x": x}, attrs={"dst_type": ge.attr.Int(GE_TYPES[dtype])}, outputs=["y"]))
cast_to_data_type = _define("cast_to_data_type", "(Tensor x) -> Tensor", lambda x: x.half(),
                            lambda x, meta_outputs=None: ge.custom_op(
                                "Cast", inputs={"x": x}, attrs={"dst_type": ge.attr.DataType(ge.DataType.DT_FLOAT16)},
                                outputs=["y"]))
cast_disagreeing = _define("cast_disagreeing", "(Tensor x) -> Tensor", lambda x: x.half(),
                           lambda x, meta_outputs=None: ge.custom_op(
                               "Cast", inputs={"x": x}, attrs={"dst_type": ge.attr.Int(ge.DataType.DT_INT32)},
                               outputs=["y"]))


# Several outputs: GE's ArgMaxWithValue gives (indice, values), torch.max (values, indices).
def _with_value(ge_type: str, reduce):
    def convert(x: ge.Tensor, dim: int, keepdim: bool, meta_outputs=None):
        indice, values = ge.custom_op(ge_type, inputs={"x": x}, outputs=["indice", "values"],
                                      attrs={"dimension": ge.attr.Int(dim), "keep_dims": ge.attr.Bool(keepdim)})
        return values, indice

    return _define(f"{ge_type.lower()}", "(Tensor x, int dim, bool keepdim) -> (Tensor, Tensor)",
                   lambda x, dim, keepdim: tuple(reduce(x, dim, keepdim)), convert)


WITH_VALUE = {"ArgMaxWithValue": (torch.max, "aclnnMaxDim", _with_value("ArgMaxWithValue", torch.max)),
              "ArgMinWithValue": (torch.min, "aclnnMinDim", _with_value("ArgMinWithValue", torch.min))}

# The device op named directly, in its own terms (aclnnMaxDim(self, dim, keepDim, values, indices)).
max_dim_direct = _define(
    "max_dim_direct", "(Tensor x, int dim) -> (Tensor, Tensor)", lambda x, dim: tuple(torch.max(x, dim)),
    lambda x, dim, meta_outputs=None: ge.custom_op(
        "MaxDim", inputs={"self": x}, attrs={"dim": ge.attr.Int(dim), "keepDim": ge.attr.Bool(False)},
        outputs=["values", "indices"]))


def _compile(fn):
    return torch.compile(fn, backend=torchair.get_npu_backend(), fullgraph=True)


def _device_op_calls(name: str) -> int:
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


@pytest.mark.parametrize("ge_type", sorted(BINARY))
def test_two_input_ge_op_runs_as_its_device_op(ge_type):
    reference, device_op, op = BINARY[ge_type]
    x, y = torch.randn(4, 5), torch.randn(4, 5) + 3
    fn = _compile(lambda a, b: op(a * 2, b) - 1)
    fn(x.to(NPU), y.to(NPU))  # compile
    torch.npu.synchronize()
    torch.npu.op_stats(reset=True)
    out = fn(x.to(NPU), y.to(NPU))
    torch.testing.assert_close(out.cpu(), reference(x * 2, y) - 1)
    assert _device_op_calls(device_op) == 1


def test_add_broadcasts_and_its_output_dtype_is_the_ops():
    op = BINARY["Add"][2]
    x, y = torch.randn(3, 4).half(), torch.randn(4)  # float16 + float32 -> float32 (meta_outputs)
    out = _compile(lambda a, b: op(a, b))(x.to(NPU), y.to(NPU))
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.cpu(), x + y)
    xi, yi = torch.randint(-9, 9, (2, 6), dtype=torch.int32), torch.randint(-9, 9, (2, 6), dtype=torch.int32)
    out = _compile(lambda a, b: op(a, b))(xi.to(NPU), yi.to(NPU))
    assert out.dtype == torch.int32 and torch.equal(out.cpu(), xi + yi)


def test_ir_inputs_given_out_of_order_are_matched_by_name():
    x, y = torch.randn(5), torch.randn(5)
    out = _compile(lambda a, b: sub_named(a, b))(x.to(NPU), y.to(NPU))
    # inputs={"x2": x, "x1": y}: GE's Sub computes x1 - x2
    torch.testing.assert_close(out.cpu(), y - x)


@pytest.mark.parametrize("source, target", [(torch.float32, torch.float16), (torch.float32, torch.int32),
                                            (torch.int32, torch.float32), (torch.float32, torch.bfloat16),
                                            (torch.int64, torch.bool)])
def test_cast_takes_dst_type_as_an_attribute(source, target):
    x = (torch.randn(3, 4) * 10).to(source)
    torch.npu.op_stats(reset=True)
    out = _compile(lambda a: cast_to(a + 1, target))(x.to(NPU))
    assert out.dtype == target
    torch.testing.assert_close(out.cpu(), (x + 1).to(target))
    assert _device_op_calls("aclnnCast") == 1


def test_cast_dst_type_as_a_data_type_attribute():
    x = torch.randn(6)
    out = _compile(lambda a: cast_to_data_type(a))(x.to(NPU))
    assert out.dtype == torch.float16
    torch.testing.assert_close(out.cpu(), x.half())


@pytest.mark.parametrize("ge_type", sorted(WITH_VALUE))
@pytest.mark.parametrize("dim, keepdim", [(1, False), (0, True), (-1, False)])
def test_two_output_ge_op_returns_both_outputs(ge_type, dim, keepdim):
    reference, device_op, op = WITH_VALUE[ge_type]
    x = torch.randn(5, 7)
    torch.npu.op_stats(reset=True)
    values, indices = _compile(lambda a: op(a * 3, dim, keepdim))(x.to(NPU))
    expected = reference(x * 3, dim, keepdim)
    assert values.dtype == torch.float32 and indices.dtype == torch.int64
    torch.testing.assert_close(values.cpu(), expected.values)
    assert torch.equal(indices.cpu(), expected.indices)
    assert _device_op_calls(device_op) == 1


def test_one_of_two_outputs_used_inside_the_graph():
    op = WITH_VALUE["ArgMaxWithValue"][2]
    x = torch.randn(4, 6)
    out = _compile(lambda a: op(a, 0, False)[1] * 10 + op(a, 1, True)[0].sum())(x.to(NPU))
    expected = torch.max(x, 0).indices * 10 + torch.max(x, 1, True).values.sum()
    torch.testing.assert_close(out.cpu(), expected)


def test_two_output_device_op_named_directly():
    x = torch.randn(3, 8)
    values, indices = _compile(lambda a: max_dim_direct(a, 1))(x.to(NPU))
    torch.testing.assert_close(values.cpu(), x.max(1).values)
    assert torch.equal(indices.cpu(), x.max(1).indices)


def _bad(name, custom_op_kwargs):
    return _define(name, "(Tensor x) -> Tensor", lambda x: x.clone(),
                   lambda x, meta_outputs=None: ge.custom_op(**custom_op_kwargs(x)))


BAD = {
    "dst_type_vs_meta": (cast_disagreeing, r"cast_disagreeing.*dst_type DT_INT32 makes torch.int32.*torch.float16"),
    "missing_attr": (_bad("missing_attr", lambda x: dict(op_type="Cast", inputs={"x": x}, outputs=["y"])),
                     r"missing_attr.*needs attribute dst_type.*GE Cast\(x, dst_type\) -> y"),
    "attr_kind": (_bad("attr_kind", lambda x: dict(op_type="Cast", inputs={"x": x}, outputs=["y"],
                                                  attrs={"dst_type": ge.attr.Float(1.0)})),
                  r"attr_kind.*dst_type is a ge.attr.Int, got ge.attr.Float\(1.0\)"),
    "unknown_attr": (_bad("unknown_attr", lambda x: dict(op_type="Add", inputs={"x1": x, "x2": x}, outputs=["y"],
                                                        attrs={"alpha": ge.attr.Float(2.0)})),
                     r"unknown_attr.*GE Add\(x1, x2\) -> y: no attribute alpha"),
    "input_count": (_bad("input_count", lambda x: dict(op_type="Add", inputs={"x1": x}, outputs=["y"])),
                    r"input_count.*takes 2 input\(s\), got 1 \(x1\)"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_ge_op_call_the_ir_does_not_allow_fails_at_compile_time(case):
    op, message = BAD[case]
    with pytest.raises(Exception, match=message):
        _compile(lambda a: op(a))(torch.randn(4, device=NPU))
