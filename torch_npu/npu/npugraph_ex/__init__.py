"""npugraph_ex: torch.compile for inference with NPU graphs (`torch.compile(model, backend="npugraph_ex")`).

The graph is compiled by the "npu" backend in reduce-overhead mode (Inductor, then replays through
NPU graphs: docs/graphs.md), after the FX pattern replacements registered here have rewritten it.
`options` are Inductor config patches, as torch.compile's `options` for Inductor.
"""

from torch_npu.npu.npugraph_ex import inference, scope  # noqa: F401
from torch_npu.npu.npugraph_ex._backend import compile_fx, register_replacement

__all__ = ["compile_fx", "register_replacement"]
