"""apex for npu: Ascend apex's public API (`from apex import amp`, `apex.optimizers.NpuFusedSGD`) on torch_npu."""

# Both submodules load with the package: Ascend's scripts write `import apex` and then use
# `apex.optimizers.NpuFusedSGD(...)` without importing apex.optimizers themselves.
from apex import amp, optimizers

__all__ = ["amp", "optimizers"]
