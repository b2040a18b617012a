"""Fuzz target: torch_npu's npu_* ops and common ATen ops on npu, with arguments drawn from each op's
schema: tensors of random dtype, device, shape and contents (NaN, inf), wrong devices, negative and
huge ints and sizes, NaN / inf scalars. Every call returns or raises a clear Python exception, and
an error raised on the stream surfaces at the synchronize that follows (naming the op)."""

import math

import torch
from hypothesis import given, strategies as st

from fuzz.common import HUGE_INTS, NEGATIVE_INTS, ODD_FLOATS, floats, hypothesis_settings, unclear

# ATen ops with npu kernels and many error cases of their own (broadcasting, dims, dtypes).
ATEN_OPS = ["add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "matmul.default", "mm.default",
            "bmm.default", "sum.dim_IntList", "mean.dim", "softmax.int", "log_softmax.int", "cat.default",
            "index_select.default", "gather.default", "scatter.src", "masked_fill.Scalar", "where.self",
            "layer_norm.default", "conv2d.default", "max_pool2d.default", "embedding.default",
            "nll_loss.default", "cumsum.default", "topk.default", "sort.default", "argmax.default",
            "clamp.default", "pow.Tensor_Scalar", "view.default", "reshape.default", "expand.default",
            "narrow.default", "transpose.int", "permute.default", "repeat.default", "fill_.Scalar",
            "copy_.default", "dropout.default", "relu.default", "gelu.default", "linear.default"]

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32,
          torch.int8, torch.uint8, torch.bool, torch.complex64]
DIMS = [0, 1, 2, 3, 5]
INTS = [0, 1, 2, 3, -1, -2, 4, 64] + NEGATIVE_INTS[2:] + HUGE_INTS


def _ops():
    ops = []
    for name in sorted(dir(torch.ops.npu)):
        packet = getattr(torch.ops.npu, name, None)
        if name.startswith("npu_") and isinstance(packet, torch._ops.OpOverloadPacket):
            ops.extend(getattr(packet, o) for o in packet.overloads())
    for qual in ATEN_OPS:
        name, overload = qual.split(".")
        ops.append(getattr(getattr(torch.ops.aten, name), overload))
    return ops


@st.composite
def tensors(draw, shape=None):
    dtype = draw(st.sampled_from(DTYPES))
    if shape is None:
        shape = draw(st.lists(st.sampled_from(DIMS), max_size=4))
    device = draw(st.sampled_from(["npu"] * 8 + ["cpu"]))  # meta mixes run PyTorch's own Meta kernels
    fill = draw(st.sampled_from(["randn", "ones", "nan", "inf", "zeros"]))
    base = torch.randn(shape) if fill == "randn" else torch.full(
        shape, {"ones": 1.0, "nan": math.nan, "inf": math.inf, "zeros": 0.0}[fill])
    t = base.to(dtype) if dtype.is_floating_point or dtype.is_complex else (base * 4).to(dtype)
    if draw(st.booleans()) and t.dim() >= 2:
        t = t.transpose(0, 1)  # non-contiguous
    return t.to(device)


@st.composite
def argument(draw, arg, first_tensor_shape):
    t = arg.real_type  # ScalarType, not the int it is passed as (a raw int crashes PyTorch on CPU too)
    kind = str(t)
    if arg.default_value is not None or isinstance(t, torch.OptionalType):
        if draw(st.integers(0, 3)) == 0:
            return "<default>" if arg.default_value is not None else None
        if isinstance(t, torch.OptionalType):
            t = t.getElementType()
            kind = str(t)
    if kind == "Tensor":
        same = first_tensor_shape is not None and draw(st.booleans())
        return draw(tensors(shape=first_tensor_shape if same else None))
    if kind in ("Tensor[]", "List[Tensor]", "Tensor?[]", "List[Optional[Tensor]]"):
        return draw(st.lists(tensors(shape=first_tensor_shape), max_size=3))
    if kind == "int" or kind == "SymInt":
        return draw(st.sampled_from(INTS))
    if kind in ("int[]", "List[int]", "SymInt[]", "List[SymInt]") or kind.startswith("List[int]"):
        return draw(st.lists(st.sampled_from(INTS), max_size=4))
    if kind == "float":
        return draw(floats)
    if kind in ("Scalar", "number"):
        return draw(st.sampled_from(ODD_FLOATS + [0, 1, -1, 2**62, True]))
    if kind == "bool":
        return draw(st.booleans())
    if kind == "ScalarType":
        return draw(st.sampled_from(DTYPES))
    if kind == "str":
        return draw(st.sampled_from(["none", "mean", "sum", "tanh", "", "bogus"]))
    if kind == "Device":
        return draw(st.sampled_from([torch.device("npu"), torch.device("cpu"), torch.device("npu", 5)]))
    return "<default>"  # layouts, memory formats, generators: the op's default


def run(examples: int, journal, seed=None) -> list[str]:
    ops = _ops()
    problems: list[str] = []

    @hypothesis_settings(examples, seed)
    @given(st.sampled_from(ops), st.data())
    def case(op, data):
        args, kwargs, shape, by_name = [], {}, None, False
        for arg in op._schema.arguments:
            value = data.draw(argument(arg, shape))
            if isinstance(value, torch.Tensor) and shape is None:
                shape = list(value.shape)
            if isinstance(value, str) and value == "<default>":
                by_name = True  # later arguments cannot be positional any more
                continue
            if arg.kwarg_only or by_name:
                kwargs[arg.name] = value
            else:
                args.append(value)
        described = [_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()]
        journal.case(f"ops: {op}({', '.join(described)})")
        try:
            op(*args, **kwargs)
            torch.npu.synchronize()
            journal.succeeded += 1
        except Exception as exc:  # noqa: BLE001 - judging every exception is the point (hypothesis' own are BaseException)
            why = unclear(exc, repr(described))
            if why:
                problems.append(f"{op}({', '.join(described)}): {why}: {type(exc).__name__}: "
                                f"{str(exc)[:300]}")
            try:
                torch.npu.synchronize()  # an error left on the stream belongs to this case
            except RuntimeError:
                pass

    case()
    return problems


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"tensor({list(value.shape)}, {value.dtype}, {value.device}, stride={value.stride()})"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_describe(v) for v in value) + "]"
    return repr(value)
