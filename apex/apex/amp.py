"""apex.amp: torch_npu.contrib.amp under apex's names (the very same functions, not wrappers)."""

from torch_npu.contrib.amp import initialize, load_state_dict, master_params, scale_loss, state_dict
# apex exports its state object too; training scripts log `amp._amp_state.loss_scalers[0].loss_scale()`.
from torch_npu.contrib.amp._state import _amp_state

__all__ = ["initialize", "scale_loss", "master_params", "state_dict", "load_state_dict"]
