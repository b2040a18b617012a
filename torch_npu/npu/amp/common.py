"""torch_npu.npu.amp.common: whether npu mixed precision can be used at all."""

import torch

__all__ = ["amp_definitely_not_available"]


def amp_definitely_not_available() -> bool:
    """True when no npu is available, so autocast and GradScaler on npu would do nothing (torch.cuda.amp's
    helper of that name, for npu)."""
    return not torch.npu.is_available()
