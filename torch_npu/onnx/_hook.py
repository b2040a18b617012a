"""Applies torch_npu's ONNX support without user code where PyTorch allows it.

- TorchScript exporter (dynamo=False): symbolics are registered globally with the public
  torch.onnx.register_custom_op_symbolic, at import and again at each export for ops added since.
- Dynamo exporter (the default): PyTorch has no global registration API, only the per-call
  ``custom_translation_table`` argument, so torch.onnx.export is wrapped to pass torch_npu's table
  (entries the caller passes take precedence). Calling the exporter's internals directly bypasses it.
- Seed-era spellings: ``torch.onnx._export`` (TorchScript export) and the
  ``torch.onnx.symbolic_registry.register_op`` module, which PyTorch removed, are provided when absent.
"""

from __future__ import annotations

import functools
import sys
import types

import torch


def _wrap_export(export):
    @functools.wraps(export)
    def npu_export(*args, **kwargs):
        from torch_npu.onnx import _table

        if kwargs.get("dynamo", True):
            table = _table.translation_table()
            table.update(kwargs.get("custom_translation_table") or {})
            kwargs["custom_translation_table"] = table
        else:
            _table.register_legacy_symbolics()
        return export(*args, **kwargs)

    npu_export._torch_npu_wrapped = True
    return npu_export


def _legacy_export(model, args, f, *export_args, **kwargs):
    """torch.onnx._export of older PyTorch: the TorchScript exporter."""
    kwargs["dynamo"] = False
    return torch.onnx.export(model, args, f, *export_args, **kwargs)


def _symbolic_registry_module() -> types.ModuleType:
    module = types.ModuleType("torch.onnx.symbolic_registry")
    module.__doc__ = "register_op(name, fn, domain, version) of older PyTorch, on register_custom_op_symbolic."

    def register_op(opname, op, domain, version):
        if domain:
            qualified = f"{domain}::{opname}"
        elif hasattr(torch.ops.npu, opname):  # torch_npu's ops live in the npu namespace
            qualified = f"npu::{opname}"
        else:
            qualified = f"aten::{opname}"
        torch.onnx.register_custom_op_symbolic(qualified, op, version)

    module.register_op = register_op
    return module


def install() -> None:
    import torch.onnx

    if not getattr(torch.onnx.export, "_torch_npu_wrapped", False):
        torch.onnx.export = _wrap_export(torch.onnx.export)
    if not hasattr(torch.onnx, "_export"):
        torch.onnx._export = _legacy_export
    if "torch.onnx.symbolic_registry" not in sys.modules and not hasattr(torch.onnx, "symbolic_registry"):
        module = _symbolic_registry_module()
        sys.modules["torch.onnx.symbolic_registry"] = module
        torch.onnx.symbolic_registry = module
    from torch_npu.onnx import _table

    _table.register_legacy_symbolics()
