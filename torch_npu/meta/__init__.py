"""Meta implementations for npu ops (torch.compile's shape inference)."""
