"""Which operators ran inside a profiled region, for check_operators_in_prof.

Names come from the profiler's events (`prof.key_averages()`: aten ops, and device ops once the
profiler records them) and from the npu's per-op counters: the named device ops (`aclnnXxx`) and
generic-executor ops that ran between the region's start and end. The counters are read at the
region's edges by `track()`, which torch_npu.testing installs around torch's profilers; when a
profiler reports device ops by itself, `operators_in` simply finds them among its events.
"""

import threading

import torch

_lock = threading.Lock()
_installed = False


def _counts():
    return {name: sum(c.values()) for name, c in torch.npu.op_stats().items()}


def _ran_between(before, after):
    return {name for name, n in after.items() if n > before.get(name, 0)}


def operators_in(prof):
    """Names of the operators that ran inside `prof`'s region (empty set if nothing was recorded)."""
    names = set()
    try:
        names.update(evt.key for evt in prof.key_averages())
    except (AttributeError, RuntimeError, AssertionError):  # not a profiler, or never entered
        pass
    window = getattr(prof, "_npu_op_window", None)
    if window is not None and window[1] is not None:
        names.update(_ran_between(*window))
    return names


def _wrap(cls):
    enter, exit_ = cls.__enter__, cls.__exit__

    def __enter__(self):
        self._npu_op_window = [_counts(), None]
        return enter(self)

    def __exit__(self, *exc):
        try:
            return exit_(self, *exc)
        finally:
            torch.npu.synchronize()
            self._npu_op_window[1] = _counts()

    cls.__enter__, cls.__exit__ = __enter__, __exit__


def track():
    """Record the npu op counters at the edges of every torch.autograd.profiler.profile and
    torch.profiler.profile region (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        import torch.autograd.profiler as autograd_profiler
        import torch.profiler as profiler

        _wrap(autograd_profiler.profile)
        _wrap(profiler.profile)
        _installed = True
