"""Clearer errors for mistakes torch.distributed detects before the hccl backend sees them."""

import functools

import torch.distributed as dist

# ProcessGroup methods that take tensors (the public collectives call these).
_TENSOR_METHODS = (
    "allreduce", "allreduce_coalesced", "broadcast", "reduce", "allgather", "_allgather_base",
    "allgather_coalesced", "allgather_into_tensor_coalesced", "gather", "scatter", "reduce_scatter",
    "_reduce_scatter_base", "reduce_scatter_tensor_coalesced", "alltoall_base", "alltoall", "send", "recv",
    "recv_anysource",
)


def _explain_missing_backend(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except RuntimeError as e:
            text = str(e)
            if "No backend type associated with device type cpu" not in text or "hccl" not in _backends(self):
                raise
            raise RuntimeError(
                f"{text}: this process group runs hccl, which takes npu tensors, and has no backend for CPU "
                "tensors. Move the tensors with .npu() (or .to(f'npu:{local_rank}')), or create the group with "
                "backend='cpu:gloo,npu:hccl' so that CPU tensors run on Gloo"
            ) from None

    return wrapper


def _backends(group) -> str:
    try:
        return str(dist.get_backend(group))
    except (RuntimeError, ValueError):
        return ""


def install() -> None:
    cls = dist.ProcessGroup
    if getattr(cls, "_hccl_errors_installed", False):
        return
    for name in _TENSOR_METHODS:
        if hasattr(cls, name):
            setattr(cls, name, _explain_missing_backend(getattr(cls, name)))
    cls._hccl_errors_installed = True
