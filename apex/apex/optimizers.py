"""apex.optimizers: torch_npu's fused optimizers (NpuFusedSGD, NpuFusedAdam, ...) under Ascend apex's names."""

import torch_npu.optim

# Every fused optimizer torch_npu has, so one added there appears here too; the names are the same.
from torch_npu.optim import *  # noqa: F401,F403

__all__ = list(torch_npu.optim.__all__)
