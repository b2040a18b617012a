"""optimize(jit_mod): freezes a ScriptModule for inference and rewrites its graph with torch_npu's fusion
patterns (fusion_pass/)."""

import torch

from torch_npu.jit.fusion_pass.fast_gelu import fast_gelu_pass

__all__ = ["optimize"]


def optimize(jit_mod):
    """Optimises a scripted or traced model for npu inference in place of its graph: a ScriptModule is
    frozen and optimised by torch.jit.optimize_for_inference first; then exact gelu becomes
    npu_fast_gelu (the fused tanh-free approximation, within 1e-3 of gelu). Returns nothing, as
    upstream; the module (or script function) passed is changed."""
    if not isinstance(jit_mod, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        raise TypeError(f"torch_npu.jit.optimize takes a torch.jit.ScriptModule or ScriptFunction (from "
                        f"torch.jit.script / torch.jit.trace), got {type(jit_mod).__name__}")
    if isinstance(jit_mod, torch.jit.ScriptModule):
        torch.jit.optimize_for_inference(jit_mod)
    fast_gelu_pass(jit_mod)
