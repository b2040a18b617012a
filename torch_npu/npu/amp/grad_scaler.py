"""torch.npu.amp.GradScaler: torch.amp.GradScaler on device "npu".

Unscaling and the inf/nan check run on the device (aten::_amp_foreach_non_finite_check_and_unscale_),
and so does the scale update (aten::_amp_update_scale_): a step never waits for the host except for
the one `found_inf` read that decides whether optimizer.step() is skipped.
"""

import torch


class GradScaler(torch.amp.GradScaler):
    """Dynamic loss scaling for npu. `dynamic=False` keeps `init_scale` fixed (a static loss scale);
    steps whose gradients hold inf/nan are still skipped."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        dynamic: bool = True,
        enabled: bool = True,
    ):
        super().__init__(
            "npu",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )
        self.dynamic = dynamic
        if enabled and not dynamic:
            # A scale that neither grows nor backs off is a static loss scale (torch.amp.GradScaler's
            # constructor rejects these factors, so they are set after it).
            self._growth_factor = 1.0
            self._backoff_factor = 1.0
