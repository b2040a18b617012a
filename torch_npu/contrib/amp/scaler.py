"""LossScaler: apex-style loss scale bookkeeping; unscaling and the inf/nan check run on the device."""

from typing import Dict, List, Optional

import torch


class LossScaler:
    """A static scale (`loss_scale` a number) or a dynamic one (`"dynamic"`): the dynamic scale
    starts at `init_scale`, is multiplied by `backoff_factor` (default 1 / scale_factor: halved) on
    every overflow and by `scale_factor` after `scale_window` steps without one, staying within
    [min_loss_scale, max_loss_scale]."""

    def __init__(self, loss_scale, init_scale: float = 2.0**16, scale_factor: float = 2.0,
                 scale_window: int = 2000, min_loss_scale=None, max_loss_scale: float = 2.0**24,
                 backoff_factor: Optional[float] = None):
        self.dynamic = loss_scale == "dynamic"
        self._loss_scale = min(max_loss_scale, init_scale) if self.dynamic else float(loss_scale)
        self._scale_factor = scale_factor
        self._backoff_factor = 1.0 / scale_factor if backoff_factor is None else backoff_factor
        self._scale_window = scale_window
        self._min_loss_scale = min_loss_scale
        self._max_loss_scale = max_loss_scale
        self._unskipped = 0

    def loss_scale(self) -> float:
        return self._loss_scale

    def unscale(self, grads: List[torch.Tensor]) -> Dict[torch.device, torch.Tensor]:
        """Divide `grads` by the scale in place; per device, a float tensor that is nonzero when a
        gradient held inf/nan. One device op per (device, dtype) group of gradients."""
        groups: Dict[tuple, List[torch.Tensor]] = {}
        for g in grads:
            groups.setdefault((g.device, g.dtype), []).append(g)
        found: Dict[torch.device, torch.Tensor] = {}
        for (device, _), tensors in groups.items():
            if device not in found:
                found[device] = torch.zeros((), dtype=torch.float32, device=device)
            inv_scale = torch.full((), 1.0 / self._loss_scale, dtype=torch.float32, device=device)
            torch._amp_foreach_non_finite_check_and_unscale_(tensors, found[device], inv_scale)
        return found

    def update_scale(self, overflow: bool) -> None:
        if not self.dynamic:
            return
        if overflow:
            self._loss_scale *= self._backoff_factor
            if self._min_loss_scale is not None:
                self._loss_scale = max(self._min_loss_scale, self._loss_scale)
            self._unskipped = 0
        else:
            self._unskipped += 1
            if self._unskipped == self._scale_window:
                self._loss_scale = min(self._max_loss_scale, self._loss_scale * self._scale_factor)
                self._unskipped = 0

    def state_dict(self) -> dict:
        return {"loss_scale": self._loss_scale, "unskipped": self._unskipped}

    def load_state_dict(self, state: dict) -> None:
        self._loss_scale = float(state["loss_scale"])
        self._unskipped = int(state["unskipped"])
