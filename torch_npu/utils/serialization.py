"""torch_npu.utils.save_async: torch.save without waiting for the file. The call copies what `obj` holds to
host memory (so training may change the tensors right after it returns) and writes the file on a thread
of its own; a later save_async, or the end of the process, waits for the write before it."""

import atexit
import pickle
import threading

import torch
from torch.utils._pytree import tree_map

__all__ = ["save_async"]

_writer = None  # the thread writing the previous save
_lock = threading.Lock()


def _wait() -> None:
    global _writer
    with _lock:
        writer, _writer = _writer, None
    if writer is not None:
        writer.join()
        if writer.error is not None:
            raise RuntimeError(f"save_async: writing the previous checkpoint failed: {writer.error}") from writer.error


class _Writer(threading.Thread):
    def __init__(self, obj, f, kwargs):
        super().__init__(name="torch_npu save_async", daemon=False)
        self.obj, self.f, self.kwargs, self.error = obj, f, kwargs, None

    def run(self):
        try:
            torch.save(self.obj, self.f, **self.kwargs)
        except BaseException as e:  # reported by the next save_async / at exit
            self.error = e


def _to_host(value):
    if isinstance(value, torch.Tensor) and value.device.type != "cpu":
        return value.detach().to("cpu")  # a host copy whose values no later step can change
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return value


def save_async(obj, f, pickle_module=pickle, pickle_protocol=2, _use_new_zipfile_serialization=True,
               _disable_byteorder_record=False, model=None) -> None:
    """torch.save(obj, f, ...) written on a background thread from a host copy of obj's tensors (npu
    tensors come back as CPU tensors, as torch.load(map_location="cpu") would give them). `model` is
    accepted for torch_npu's signature; the host copy is taken before the call returns, so the model
    needs no hook."""
    global _writer
    _wait()
    snapshot = tree_map(_to_host, obj)
    kwargs = dict(pickle_module=pickle_module, pickle_protocol=pickle_protocol,
                  _use_new_zipfile_serialization=_use_new_zipfile_serialization,
                  _disable_byteorder_record=_disable_byteorder_record)
    writer = _Writer(snapshot, f, kwargs)
    with _lock:
        _writer = writer
    writer.start()


atexit.register(_wait)
