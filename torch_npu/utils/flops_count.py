"""torch_npu.utils.FlopsCounter: floating-point operations of the matrix ops (matmul, convolution,
attention, ...) run while it counts, by the formulas PyTorch's own FlopCounterMode uses.

    counter = torch_npu.utils.FlopsCounter()
    counter.start()
    train_step()
    counter.pause(); evaluate(); counter.resume()
    recorded, traversed = counter.get_flops()   # traversed also counts what ran while paused
    counter.stop()
"""

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

__all__ = ["FlopsCounter"]


class _CountingMode(TorchDispatchMode):
    def __init__(self, counter):
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            flops = formula(*args, **kwargs, out_val=out)
            self.counter._traversed += flops
            if not self.counter._paused:
                self.counter._recorded += flops
        return out


class FlopsCounter:
    """Counts from start() to stop(); pause() / resume() leave out a section from the recorded count."""

    def __init__(self):
        self._mode = None
        self._recorded = 0
        self._traversed = 0
        self._paused = False

    def start(self) -> None:
        if self._mode is not None:
            raise RuntimeError("FlopsCounter.start: already counting; stop() first")
        self._mode = _CountingMode(self)
        self._mode.__enter__()

    def stop(self) -> None:
        """Ends counting and resets the counts."""
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        self._recorded = self._traversed = 0
        self._paused = False

    def pause(self) -> None:
        self._paused = True

    def resume(self) -> None:
        self._paused = False

    def get_flops(self) -> list:
        """[recorded, traversed]: flops counted outside pauses, and all flops since start()."""
        return [self._recorded, self._traversed]

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        return False
