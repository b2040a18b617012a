"""Graph handlers: ops whose captured arguments NPUGraph.update() can change (npugraph_handler.py)."""

from torch_npu.npu._npugraph_handlers.npugraph_handler import NpuGraphOpHandler, register_npu_graph_handler

__all__ = ["NpuGraphOpHandler", "register_npu_graph_handler"]
