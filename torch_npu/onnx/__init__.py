"""ONNX export of npu ops.

``torch.onnx.export`` handles models with npu ops once torch_npu is imported:

- with the dynamo exporter (the default), each npu op is translated to standard ONNX ops where an
  equivalent exists (npu_fast_gelu -> Mul/Sigmoid, npu_rms_norm -> ReduceMean/Sqrt/..., npu_dtype_cast
  -> Cast, ...) and to a node of the ``npu`` custom domain otherwise (npu::npu_roi_align, with the
  op's arguments as attributes); ``translation_table()`` is that table, merged automatically into
  ``custom_translation_table``;
- with the TorchScript exporter (``dynamo=False``) each npu op becomes an ``npu::`` custom node, and
  ``torch.onnx.register_custom_op_symbolic`` / ``torch.autograd.Function.symbolic`` customise it.

``export_kind(name)`` tells how one op exports; ``op_exports()`` lists all npu ops. Ops that cannot be
exported (the float-status ops) raise ``UnsupportedOpError`` naming the op. The dynamo translations
need ``onnxscript`` (``pip install onnx onnxscript``).
"""

from torch_npu.onnx._table import (
    CUSTOM_DOMAIN_REASONS,
    UNSUPPORTED_REASONS,
    UnsupportedOpError,
    export_kind,
    npu_schemas,
    register_legacy_symbolics,
    translation_table,
)

__all__ = [
    "translation_table",
    "export_kind",
    "op_exports",
    "register_legacy_symbolics",
    "UnsupportedOpError",
    "CUSTOM_DOMAIN_REASONS",
    "UNSUPPORTED_REASONS",
]


def op_exports() -> dict[str, tuple[str, str]]:
    """npu op name -> (kind, detail) for every op in torch.ops.npu: ("standard", ONNX ops),
    ("custom", "npu::<name>") or ("unsupported", reason)."""
    names = sorted({s.name.split("::", 1)[1] for s in npu_schemas()})
    return {name: export_kind(name) for name in names}
