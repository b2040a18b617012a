"""fast_gelu_pass: rewrites exact gelu (approximate='none') in a TorchScript graph to npu::npu_fast_gelu."""

import torch

__all__ = ["fast_gelu_pass"]

_PATTERN = """
    graph(%x):
        %approximate = prim::Constant[value='none']()
        %out = aten::gelu(%x, %approximate)
        return (%out)
"""

_REPLACEMENT = """
    graph(%x):
        %out = npu::npu_fast_gelu(%x)
        return (%out)
"""


def fast_gelu_pass(jit_mod):
    """Rewrites jit_mod.graph (a ScriptModule's forward or a ScriptFunction) in place."""
    torch._C._jit_pass_custom_pattern_based_rewrite_graph(_PATTERN, _REPLACEMENT, jit_mod.graph)
