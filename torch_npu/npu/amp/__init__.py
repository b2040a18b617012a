"""torch.npu.amp: mixed precision for npu (mirrors torch.cuda.amp; torch.amp with device "npu" works too)."""

from torch_npu.npu.amp.autocast_mode import autocast, custom_bwd, custom_fwd
from torch_npu.npu.amp.grad_scaler import GradScaler

__all__ = ["autocast", "custom_bwd", "custom_fwd", "GradScaler"]
