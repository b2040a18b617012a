"""The default backend of a process group whose npu backend is hccl.

With ``init_process_group()`` (backend=None) torch.distributed marks Gloo as the group's default
backend unless NCCL is in use, and with ``"cpu:gloo,npu:hccl"`` it leaves the default unset; code that
asks the group for its default backend (DDP's logger, for one) then fails although hccl is there.
When hccl is registered and the recorded default does not exist, hccl becomes the default."""

import functools

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import ProcessGroup


def _has_backend(pg, device) -> bool:
    try:
        pg._get_backend(torch.device(device))
        return True
    except RuntimeError:
        return False


def install(backend_class) -> None:
    original = ProcessGroup._register_backend
    if getattr(original, "_hccl", False):
        return

    @functools.wraps(original)
    def _register_backend(self, device, backend_type, backend=None):
        result = original(self, device, backend_type, backend)
        if isinstance(backend, backend_class):
            name = self._get_backend_name()
            if name == "undefined" or (name == dist.Backend.GLOO and not _has_backend(self, "cpu")):
                self._set_default_backend(ProcessGroup.BackendType.CUSTOM)
        return result

    _register_backend._hccl = True
    ProcessGroup._register_backend = _register_backend
