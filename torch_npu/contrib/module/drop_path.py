"""Stochastic depth (timm's DropPath) as torch_npu's NpuDropPath: the per-sample keep mask can be drawn ahead
of time on a side stream (enable_droppath_ensemble) so the forward pass does not wait for the generator."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["NpuDropPath"]


def _keep_mask(shape, ndim, keep_prob, dtype, device):
    """1 with probability keep_prob, else 0, per sample: floor(keep_prob + U[0, 1))."""
    return (keep_prob + torch.rand((shape[0],) + (1,) * (ndim - 1), dtype=dtype, device=device)).floor_()


class NpuDropPath(nn.Module):
    """Drop whole samples of a residual branch with probability drop_prob (training only), scaling the rest by
    1 / (1 - drop_prob): x / keep_prob * floor(keep_prob + U[0, 1)) per sample.

        >>> out = x + NpuDropPath(0.1)(branch(x))

    `NpuDropPath.enable_droppath_ensemble(model)` makes every forward of `model` draw the masks that the
    next forward will need on a side stream; a mask not ready yet is drawn inline.
    """

    _queues: dict[tuple, list[torch.Tensor]] = {}  # masks drawn ahead, per (shape, dtype, device, keep_prob)
    _requests: dict[tuple, int] = {}  # masks the last forward used, per key
    _stream = None

    def __init__(self, drop_prob=None):
        super().__init__()
        drop_prob = 0.0 if drop_prob is None else float(drop_prob)
        if not 0.0 <= drop_prob < 1.0:
            raise ValueError(f"drop_prob must be in [0, 1), got {drop_prob}")
        self.drop_prob = drop_prob
        self.keep_prob = 1.0 - drop_prob

    def forward(self, x):
        if self.drop_prob == 0.0 or not self.training:
            return x
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"NpuDropPath expects a Tensor, got {type(x).__name__}")
        key = (tuple(x.shape), x.dtype, x.device, self.keep_prob)
        queue = NpuDropPath._queues.get(key)
        if queue:
            mask = queue.pop(0)
            mask.record_stream(torch.npu.current_stream(x.device))  # drawn on the side stream, used on this one
        else:
            mask = _keep_mask(x.shape, x.dim(), self.keep_prob, x.dtype, x.device)
        NpuDropPath._requests[key] = NpuDropPath._requests.get(key, 0) + 1
        return x.div(self.keep_prob) * mask

    def extra_repr(self):
        return f"drop_prob={self.drop_prob}"

    @classmethod
    def enable_droppath_ensemble(cls, model):
        """Before each forward of `model`, draw on a side stream the masks its previous forward used.
        Returns the hook handle (`.remove()` turns it off)."""
        if cls._stream is None:
            cls._stream = torch.npu.Stream()

        def draw(module, inputs):
            with torch.npu.stream(cls._stream), torch.no_grad():
                for key, count in cls._requests.items():
                    shape, dtype, device, keep_prob = key
                    if device.type != "npu":
                        continue
                    queue = cls._queues.setdefault(key, [])
                    while len(queue) < count:
                        queue.append(_keep_mask(shape, len(shape), keep_prob, dtype, device))
            cls._requests = {}
            torch.npu.current_stream().wait_stream(cls._stream)

        return model.register_forward_pre_hook(draw)
