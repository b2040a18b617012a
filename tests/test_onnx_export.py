"""ONNX export of npu ops. Dynamo exporter (the default): each standard-op translation is run in
onnxruntime and compared with npu eager; custom-domain nodes carry the op's attributes; unsupported
ops raise naming the op. TorchScript exporter (dynamo=False): seed 000's ways, an npu op as a custom
node, a registered symbolic, a Python autograd Function with `symbolic`.
"""

import io
import logging
import os
import re
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import torch_npu
import torch_npu.onnx

pytestmark = pytest.mark.filterwarnings("ignore")
logging.getLogger("torch.onnx").setLevel(logging.ERROR)


class Wrap(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def export(fn, inputs, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.onnx.export(Wrap(fn).eval(), tuple(t.npu() for t in inputs), verbose=False, **kwargs)


def run_ort(model_bytes, inputs):
    session = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs)})


g = torch.Generator().manual_seed(0)


def randn(*shape):
    return torch.randn(*shape, generator=g)


# name -> (function of npu tensors, CPU inputs); every op of torch_npu.onnx.STANDARD_OPS appears here.
STANDARD_CASES = {
    "npu_fast_gelu": (torch_npu.npu_fast_gelu, [randn(2, 4, 8)]),
    "npu_gelu": (lambda x: torch_npu.npu_gelu(x) + torch_npu.npu_gelu(x, approximate="tanh"), [randn(2, 8)]),
    "npu_rms_norm": (lambda x, w: torch_npu.npu_rms_norm(x, w, 1e-5), [randn(2, 3, 8), randn(3, 8)]),
    "npu_rotary_mul": (
        lambda x, a, b: torch_npu.npu_rotary_mul(x, a, b) + torch_npu.npu_rotary_mul(x, a, b, "interleave"),
        [randn(2, 4, 2, 8), randn(1, 4, 1, 8), randn(1, 4, 1, 8)],
    ),
    "npu_swiglu": (lambda x: torch_npu.npu_swiglu(x, dim=1), [randn(3, 8, 2)]),
    "npu_linear": (torch_npu.npu_linear, [randn(3, 8), randn(5, 8), randn(5)]),
    "npu_confusion_transpose": (
        lambda x: torch_npu.npu_confusion_transpose(x, [0, 2, 1, 3], [2, 4, 3, 4], False)
        + torch_npu.npu_confusion_transpose(x.reshape(2, 4, 3, 4), [0, 2, 1, 3], [2, 3, 4, 4], True),
        [randn(2, 4, 12)],
    ),
    "npu_one_hot": (lambda i: torch_npu.npu_one_hot(i, -1, 6, 2.5, -1), [torch.tensor([[0, 5, -1], [7, 2, 3]])]),
    "npu_dtype_cast": (lambda x: torch_npu.npu_dtype_cast(x, torch.float16), [randn(4, 5) * 100]),
    "npu_format_cast": (lambda x: torch_npu.npu_format_cast(x, 29) + 1, [randn(4, 5)]),
    "npu_broadcast": (lambda x: torch_npu.npu_broadcast(x, [2, 3, 4]), [randn(3, 1)]),
    "npu_scaled_masked_softmax": (
        lambda x, m: torch_npu.npu_scaled_masked_softmax(x, m, 0.7) + torch_npu.npu_scaled_masked_softmax(x, m, 0.7, True),
        [randn(2, 2, 5, 5), torch.rand(2, 2, 5, 5, generator=g) > 0.6],
    ),
    "npu_stride_add": (lambda a, b: torch_npu.npu_stride_add(a, b, 1, 0, 1), [randn(1, 32, 2, 2), randn(1, 16, 2, 2)]),
}


def test_every_standard_translation_is_tested():
    assert set(STANDARD_CASES) == set(torch_npu.onnx._table.STANDARD_OPS)


@pytest.fixture(scope="module")
def standard_model():
    """One model computing every STANDARD_CASES op (exporting is seconds each, so once for all), its
    onnxruntime results and the npu eager ones, per op."""
    names = sorted(STANDARD_CASES)
    inputs, spans = [], {}
    for name in names:
        start = len(inputs)
        inputs.extend(STANDARD_CASES[name][1])
        spans[name] = (start, len(inputs))

    def model(*args):
        outputs = []
        for name in names:
            result = STANDARD_CASES[name][0](*args[slice(*spans[name])])
            outputs.extend(result if isinstance(result, tuple) else (result,))
        return tuple(outputs)

    eager = [t.cpu() for t in model(*(t.npu() for t in inputs))]
    program = export(model, inputs)
    got = run_ort(program.model_proto.SerializeToString(), inputs)
    per_op, at = {}, 0
    for name in names:
        result = STANDARD_CASES[name][0](*(t.npu() for t in STANDARD_CASES[name][1]))
        n = len(result) if isinstance(result, tuple) else 1
        per_op[name] = (got[at:at + n], eager[at:at + n])
        at += n
    return program.model_proto, per_op


def test_standard_translations_emit_only_standard_ops(standard_model):
    model, _ = standard_model
    assert {n.domain for n in model.graph.node} <= {"", "ai.onnx"}


@pytest.mark.parametrize("name", sorted(STANDARD_CASES))
def test_standard_op_in_onnxruntime_matches_npu_eager(standard_model, name):
    _, per_op = standard_model
    got, expected = per_op[name]
    assert got and len(got) == len(expected)
    for actual, reference in zip(got, expected):
        assert actual.dtype == reference.numpy().dtype, name
        np.testing.assert_allclose(actual, reference.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


def custom_nodes(model):
    return {n.op_type: n for n in model.graph.node if n.domain == "npu"}


def attributes(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def test_custom_domain_nodes_carry_the_op_attributes():
    boxes = torch.tensor([[0, 0, 2, 2.0], [1, 1, 3, 3], [5, 5, 6, 6]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    q = randn(1, 2, 4, 8)

    def model(x, rois, b, s, q):
        align = torch_npu.npu_roi_align(x, rois, 0.25, 2, 3, 2, 1)
        selected, valid = torch_npu.npu_nms_v4(b, s, 3, torch.tensor(0.5, device="npu"), torch.tensor(0.1, device="npu"))
        attention = torch_npu.npu_fusion_attention(q, q, q, 2, "BNSD", scale=0.5, pre_tockens=7)[0]
        return align, selected, valid, attention, torch_npu.npu_iou(b, b, mode=1)

    program = export(model, [randn(1, 3, 8, 8), torch.tensor([[0, 0.0, 0.0, 4.0, 4.0]]), boxes, scores, q])
    nodes = custom_nodes(program.model_proto)
    assert set(nodes) == {"npu_roi_align", "npu_nms_v4", "npu_fusion_attention", "npu_iou"}
    assert attributes(nodes["npu_roi_align"]) == {
        "spatial_scale": 0.25, "pooled_height": 2, "pooled_width": 3, "sample_num": 2, "roi_end_mode": 1}
    assert attributes(nodes["npu_nms_v4"])["max_output_size"] == 3.0
    assert len(nodes["npu_nms_v4"].input) == 4 and len(nodes["npu_nms_v4"].output) == 2
    fa = attributes(nodes["npu_fusion_attention"])
    assert (fa["head_num"], fa["input_layout"], fa["scale"], fa["pre_tockens"]) == (2, b"BNSD", 0.5, 7)
    assert attributes(nodes["npu_iou"]) == {"mode": 1}
    assert ("npu", 1) in {(o.domain, o.version) for o in program.model_proto.opset_import}


def test_unsupported_op_error_names_the_op():
    with pytest.raises(Exception) as err:
        export(lambda x: torch_npu.npu_get_float_status(x) + 1, [torch.zeros(8)])
    text = "".join(str(e) for e in _chain(err.value))
    assert "torch.ops.npu.npu_get_float_status cannot be exported to ONNX" in text
    assert "custom_translation_table" in text


def _chain(exc):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def test_a_callers_translation_wins_over_torch_npu():
    from onnxscript import opset18 as op

    program = export(torch_npu.npu_fast_gelu, [randn(4)],
                     custom_translation_table={torch.ops.npu.npu_fast_gelu.default: lambda x: op.Relu(x)})
    assert [n.op_type for n in program.model_proto.graph.node] == ["Relu"]


def test_every_npu_op_has_an_export_kind():
    kinds = torch_npu.onnx.op_exports()
    for name in torch_npu.onnx._table.STANDARD_OPS:
        assert kinds[name][0] == "standard"
    for name in torch_npu.onnx.CUSTOM_DOMAIN_REASONS:
        assert kinds[name] == ("custom", f"npu::{name}")
    for name in torch_npu.onnx.UNSUPPORTED_REASONS:
        assert kinds[name][0] == "unsupported"
    assert kinds["npu_rms_norm_backward"] == ("custom", "npu::npu_rms_norm_backward")
    table = torch_npu.onnx.translation_table()
    assert torch.ops.npu.npu_roi_align.default in table and torch.ops.npu.npu_fast_gelu.default in table


def test_docs_list_every_classified_op():
    docs = os.path.join(os.path.dirname(__file__), "..", "docs", "custom_ops.md")
    with open(docs) as f:
        text = f.read()
    for name, (kind, _) in torch_npu.onnx.op_exports().items():
        if name in torch_npu.onnx._table.STANDARD_OPS or name in torch_npu.onnx.CUSTOM_DOMAIN_REASONS or \
                name in torch_npu.onnx.UNSUPPORTED_REASONS:
            assert re.search(rf"^\| `{name}` \| {kind} ", text, re.M), f"{name} ({kind}) missing from docs/custom_ops.md"


# ---- TorchScript exporter (dynamo=False): seed 000's three ways ----


def legacy_export(model, inputs, **kwargs):
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(t.npu() for t in inputs), buffer, dynamo=False, opset_version=11, **kwargs)
    return onnx.load_from_string(buffer.getvalue())


def test_legacy_npu_op_exports_as_custom_node():
    model = legacy_export(Wrap(lambda x, r: torch_npu.npu_roi_align(x, r, 0.5, 2, 2, 1, 0)),
                          [randn(1, 3, 8, 8), torch.tensor([[0, 0.0, 0.0, 4.0, 4.0]])])
    node = custom_nodes(model)["npu_roi_align"]
    assert attributes(node) == {"spatial_scale": 0.5, "pooled_height": 2, "pooled_width": 2, "sample_num": 1,
                                "roi_end_mode": 0}


def test_legacy_seed_symbolic_registry_and_export_spelling(tmp_path):
    """Seed 000, way 1: parse_args symbolic registered with symbolic_registry.register_op, exported with
    torch.onnx._export."""
    from torch.onnx.symbolic_helper import parse_args

    @parse_args("v", "v", "f", "i", "i", "i", "i")
    def symbolic_npu_roi_align(g, input, rois, spatial_scale, pooled_height, pooled_width, sample_num, roi_end_mode):
        args = [input, rois]
        kwargs = {"spatial_scale_f": spatial_scale, "pooled_height_i": pooled_height, "pooled_width_i": pooled_width,
                  "sample_num_i": sample_num, "roi_end_mode_i": roi_end_mode}
        return g.op("torch::npu_roi_align", *args, **kwargs)

    import torch.onnx.symbolic_registry as sym_registry

    sym_registry.register_op("npu_roi_align", symbolic_npu_roi_align, "", 11)
    try:
        class CustomModel_npu_op(torch.nn.Module):
            def forward(self, a, b, d):
                spatial_scale = d[0].item()
                pooled_height = int(d[1].item())
                return torch_npu.npu_roi_align(a, b, spatial_scale, pooled_height, 2, 1, 0)

        path = tmp_path / "roi.onnx"
        inputs = (randn(1, 3, 8, 8).npu(), torch.tensor([[0, 0.0, 0.0, 4.0, 4.0]]).npu(), torch.tensor([0.5, 3.0]).npu())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx._export(CustomModel_npu_op().npu().eval(), inputs, str(path), verbose=False,
                               input_names=["input", "rois", "d"], opset_version=11)
        nodes = [n for n in onnx.load(str(path)).graph.node if n.domain == "torch"]
        assert [n.op_type for n in nodes] == ["npu_roi_align"]
        assert attributes(nodes[0])["pooled_height"] == 3 and attributes(nodes[0])["spatial_scale"] == 0.5
    finally:
        torch.onnx.unregister_custom_op_symbolic("npu::npu_roi_align", 11)


def test_legacy_python_function_with_symbolic():
    """Seed 000, way 3: a pure-Python autograd Function whose symbolic emits custom-domain nodes."""

    class CustomClassOp_Add_F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input1, input2):
            rtn = torch.add(input1, input2)
            return torch.add(input1, rtn)

        @staticmethod
        def symbolic(g, input1, input2):
            rtn = g.op("Custom::CustomClassOp_Add", input1, input2, test_attr1_i=1, test_attr2_f=1.0)
            return g.op("Custom::CustomClassOp_Add", input1, rtn)

    x, y = randn(2, 3), randn(2, 3)
    eager = CustomClassOp_Add_F.apply(x.npu(), y.npu())
    torch.testing.assert_close(eager.cpu(), x + x + y)
    model = legacy_export(Wrap(CustomClassOp_Add_F.apply), [x, y])
    nodes = [n for n in model.graph.node if n.domain == "Custom"]
    assert len(nodes) == 2 and attributes(nodes[0]) == {"test_attr1": 1, "test_attr2": 1.0}


def test_legacy_dtype_attribute_is_the_onnx_element_type():
    model = legacy_export(Wrap(lambda t: torch_npu.npu_dtype_cast(t, torch.float16)), [randn(3, 4)])
    assert attributes(custom_nodes(model)["npu_dtype_cast"]) == {"dtype": onnx.TensorProto.FLOAT16}
