"""torch_npu.profiler.schedule: which steps a profile skips, warms up on and records (PyTorch's schedule
semantics, torch_npu's argument checks)."""

from __future__ import annotations

from torch.profiler import ProfilerAction
from torch.profiler import schedule as _torch_schedule

__all__ = ["Schedule", "ProfilerAction"]


class Schedule:
    """Steps 0..skip_first-1 are skipped; then each cycle waits `wait` steps (the first cycle's wait is left
    out with skip_first_wait=1), warms up for `warmup` and records `active` steps, the last of which hands
    the trace to on_trace_ready; `repeat` cycles (0: until the profile stops)."""

    def __init__(self, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0,
                 skip_first_wait: int = 0):
        for name, value, low in (("wait", wait, 0), ("active", active, 1), ("warmup", warmup, 0),
                                 ("repeat", repeat, 0), ("skip_first", skip_first, 0),
                                 ("skip_first_wait", skip_first_wait, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"schedule: {name} must be an int >= {low}; got {value!r}")
        self.wait, self.active, self.warmup, self.repeat, self.skip_first = wait, active, warmup, repeat, skip_first
        self.skip_first_wait = skip_first_wait
        self._fn = _torch_schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first,
                                   skip_first_wait=skip_first_wait)

    def __call__(self, step: int) -> ProfilerAction:
        return self._fn(step)

    def to_dict(self) -> dict:
        return {"wait": self.wait, "active": self.active, "warmup": self.warmup, "repeat": self.repeat,
                "skip_first": self.skip_first, "skip_first_wait": self.skip_first_wait}
