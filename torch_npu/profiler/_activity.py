"""ProfilerActivity: what a profile records (CPU ops, NPU device tasks)."""

import torch.profiler

__all__ = ["ProfilerActivity"]


class ProfilerActivity:
    CPU = torch.profiler.ProfilerActivity.CPU
    NPU = torch.profiler.ProfilerActivity.PrivateUse1  # the same enum value: torch's profiler accepts both
