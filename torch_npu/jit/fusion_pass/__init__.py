"""TorchScript graph rewrites onto torch_npu's fused ops, one pattern per module."""

from torch_npu.jit.fusion_pass.fast_gelu import fast_gelu_pass

__all__ = ["fast_gelu_pass"]
