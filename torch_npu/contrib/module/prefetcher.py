"""Overlap host-to-device copies of the next batch with the current step (torch_npu's Prefetcher / PreLoader):
the copy runs on a side stream; the consumer's stream waits for it and the tensors are recorded on it."""

from __future__ import annotations

import torch

__all__ = ["Prefetcher", "PreLoader"]


def _to_device(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_device(v, device) for k, v in obj.items()}
    return obj


def _record(obj, stream):
    if isinstance(obj, torch.Tensor):
        obj.record_stream(stream)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _record(o, stream)
    elif isinstance(obj, dict):
        for o in obj.values():
            _record(o, stream)


class Prefetcher:
    """Wraps a DataLoader (or any iterable of (input, target) batches) and keeps the next batch on its way
    to the npu while the current one trains.

    Args:
        loader: the iterable of batches (pin_memory=True makes the copies asynchronous).
        stream: the npu stream for the copies (default: a new one). Pass one stream when you create a
            Prefetcher every epoch.

        >>> prefetcher = Prefetcher(loader)
        >>> images, target = prefetcher.next()
        >>> while images is not None:
        ...     train_step(images, target)
        ...     images, target = prefetcher.next()

    Iterating (`for images, target in Prefetcher(loader)`) works too.
    """

    def __init__(self, loader, stream=None):
        self.loader = iter(loader)
        self.device = torch.device("npu", torch.npu.current_device())
        self.stream = stream if stream is not None else torch.npu.Stream(self.device)
        self._next = None
        self.preload()

    def preload(self):
        try:
            batch = next(self.loader)
        except StopIteration:
            self._next = None
            return
        with torch.npu.stream(self.stream):
            self._next = _to_device(batch, self.device)

    def next(self):
        """The next batch on the npu, or (None, None) after the last one."""
        if self._next is None:
            return None, None
        current = torch.npu.current_stream(self.device)
        current.wait_stream(self.stream)
        batch = self._next
        _record(batch, current)  # allocated on the side stream, used on this one
        self.preload()
        return batch

    def __iter__(self):
        return self

    def __next__(self):
        if self._next is None:
            raise StopIteration
        return self.next()


PreLoader = Prefetcher
