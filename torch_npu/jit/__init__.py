"""torch_npu.jit: TorchScript passes that put torch_npu's fused kernels into scripted and traced models
(optimize(jit_mod))."""

from torch_npu.jit.register_fusion_pattern import optimize

__all__ = ["optimize"]
