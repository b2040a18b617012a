"""How each npu op exports: to standard ONNX ops, to an ``npu::`` custom-domain node, or not at all."""

from __future__ import annotations

import torch

from torch_npu.onnx import _custom_domain

# Ops translated to standard ONNX ops (torch_npu/onnx/_standard.py), with the ops each emits.
STANDARD_OPS = {
    "npu_fast_gelu": "Mul, Sigmoid",
    "npu_gelu": "Erf (or Tanh), Mul, Add",
    "npu_rms_norm": "ReduceMean, Sqrt, Reciprocal, Mul, Cast",
    "npu_rotary_mul": "Split, Neg, Concat (Reshape for interleave), Mul, Add",
    "npu_swiglu": "Split, Sigmoid, Mul",
    "npu_linear": "Transpose, MatMul, Add",
    "npu_confusion_transpose": "Transpose, Reshape",
    "npu_one_hot": "OneHot (Where, Less for negative indices)",
    "npu_dtype_cast": "Cast",
    "npu_format_cast": "Identity",
    "npu_broadcast": "Expand",
    "npu_scaled_masked_softmax": "Where, Softmax, Mul, Cast (Range, Greater for the triangular mask)",
    "npu_stride_add": "Slice, Add",
}

# Ops with no standard ONNX equivalent, exported as npu::<name> nodes, and why.
CUSTOM_DOMAIN_REASONS = {
    "npu_roi_align": "ONNX RoiAlign takes batch indices as a separate input and has no roi_end_mode",
    "npu_nms_v4": "ONNX NonMaxSuppression returns selected (batch, class, box) triples, not padded indices and a count",
    "npu_fusion_attention": "one fused op with layouts, masks, dropout and softmax statistics outputs",
    "npu_iou": "a box-overlap kernel (custom node keeps it one op for NPU inference back-ends)",
    "npu_giou": "a box-overlap kernel (custom node keeps it one op for NPU inference back-ends)",
    "npu_bounding_box_encode": "a detection-head kernel without an ONNX op",
    "npu_bounding_box_decode": "a detection-head kernel without an ONNX op",
}

# Ops that cannot be exported, and why (their translation raises UnsupportedOpError).
UNSUPPORTED_REASONS = {
    "npu_alloc_float_status": "it allocates the device's floating-point overflow status, which ONNX has no notion of",
    "npu_get_float_status": "it reads the device's floating-point overflow status, which ONNX has no notion of",
    "npu_clear_float_status": "it clears the device's floating-point overflow status, which ONNX has no notion of",
}


class UnsupportedOpError(RuntimeError):
    """Raised while exporting an npu op that has no ONNX form."""


def npu_schemas() -> list:
    """The schemas of every op in the npu namespace registered so far (extensions' ops included)."""
    return sorted(
        (s for s in torch._C._jit_get_all_schemas() if s.name.startswith("npu::")),
        key=lambda s: (s.name, s.overload_name),
    )


def _overload(schema):
    packet = getattr(torch.ops.npu, schema.name.split("::", 1)[1])
    return getattr(packet, schema.overload_name or "default")


def export_kind(name: str) -> tuple[str, str]:
    """("standard", ONNX ops) / ("custom", "npu::<name>") / ("unsupported", reason) for npu op `name`."""
    if name in UNSUPPORTED_REASONS:
        return "unsupported", UNSUPPORTED_REASONS[name]
    if name in STANDARD_OPS:
        return "standard", STANDARD_OPS[name]
    return "custom", f"{_custom_domain.DOMAIN}::{name}"


def _unsupported(name: str):
    def translate(*args, **kwargs):
        raise UnsupportedOpError(
            f"torch.ops.npu.{name} cannot be exported to ONNX: {UNSUPPORTED_REASONS[name]}. Remove it from the "
            "exported code path (e.g. keep it outside the module's forward), or pass your own translation "
            "for it in torch.onnx.export(..., custom_translation_table={...})."
        )

    return translate


def translation_table() -> dict:
    """OpOverload -> translation for every npu op, for torch.onnx.export(custom_translation_table=...)."""
    from torch_npu.onnx import _standard

    table = {}
    for schema in npu_schemas():
        name = schema.name.split("::", 1)[1]
        kind, _ = export_kind(name)
        if kind == "unsupported":
            translation = _unsupported(name)
        elif kind == "standard" and not schema.overload_name:
            translation = getattr(_standard, name)
        else:
            translation = _custom_domain.dynamo_translation(name, schema)
        table[_overload(schema)] = translation
    return table


def _has_legacy_symbolic(qualified: str) -> bool:
    try:
        from torch.onnx._internal.torchscript_exporter import registration
    except ImportError:  # a PyTorch without this registry: registering again is harmless
        return False
    return registration.registry.get_function_group(qualified) is not None


def register_legacy_symbolics(opset_version: int = 9) -> None:
    """npu::<name> custom-node symbolics for the TorchScript exporter (torch.onnx.export(dynamo=False)),
    for every npu op not registered yet; a symbolic the user registers for a higher opset wins."""
    for schema in npu_schemas():
        qualified = schema.name
        if schema.overload_name or _has_legacy_symbolic(qualified):
            continue
        name = qualified.split("::", 1)[1]
        if name in UNSUPPORTED_REASONS:
            symbolic = _unsupported(name)
        else:
            symbolic = _custom_domain.legacy_symbolic(name, schema)
        torch.onnx.register_custom_op_symbolic(qualified, symbolic, opset_version)
