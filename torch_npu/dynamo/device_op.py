"""Calling a named device op (`aclnnXxx`, built-in or from a custom op package) from Python.

A device op's `aclnnXxxGetWorkspaceSize(args..., uint64_t* workspace, aclOpExecutor** executor)` takes
its arguments in a signature only the op knows: tensors, tensor lists, int arrays and scalars as
descriptors, attributes as plain C values. This builds the descriptors in torch_npu._C, makes the
typed call with ctypes, and queues the op on the current stream through the same launch path as
EXEC_NPU_CMD (workspace, error attribution, torch.npu.op_stats()).
"""

from __future__ import annotations

import ctypes
import functools

import torch

from torch_npu import _C

# Argument kinds: descriptors made by torch_npu._C ...
TENSOR, TENSOR_LIST, INT_ARRAY, SCALAR = "t", "T", "l", "s"
# ... and plain C values passed by ctypes.
INT, FLOAT, BOOL, STRING = "i", "f", "b", "c"

_CTYPES = {TENSOR: ctypes.c_void_p, TENSOR_LIST: ctypes.c_void_p, INT_ARRAY: ctypes.c_void_p,
           SCALAR: ctypes.c_void_p, INT: ctypes.c_int64, FLOAT: ctypes.c_double, BOOL: ctypes.c_bool,
           STRING: ctypes.c_char_p}


@functools.lru_cache(maxsize=None)
def _prototype(kinds: str):
    args = [_CTYPES[k] for k in kinds]
    return ctypes.CFUNCTYPE(ctypes.c_int32, *args, ctypes.POINTER(ctypes.c_uint64),
                            ctypes.POINTER(ctypes.c_void_p))


def device_op_exists(name: str) -> bool:
    return name in _registered_ops()


@functools.lru_cache(maxsize=1)
def _registered_ops() -> frozenset:
    return frozenset(_C._device_ops())


def run_device_op(name: str, kinds: str, values: list) -> None:
    """Queue device op `name` on the current npu stream with `values` (one kind letter each, in the
    op's GetWorkspaceSize order: inputs, attributes, outputs)."""
    address, descriptors = _C._device_op_prepare(name, values, kinds)
    try:
        call_args = []
        for kind, value, descriptor in zip(kinds, values, descriptors):
            if kind in (TENSOR, TENSOR_LIST, INT_ARRAY, SCALAR):
                call_args.append(descriptor or None)
            elif kind == STRING:
                call_args.append(str(value).encode())
            else:
                call_args.append(value)
        workspace = ctypes.c_uint64(0)
        executor = ctypes.c_void_p(0)
        status = _prototype(kinds)(address)(*call_args, ctypes.byref(workspace), ctypes.byref(executor))
    except BaseException:
        _C._device_op_release(descriptors, kinds)
        raise
    _C._device_op_launch(name, descriptors, kinds, status, workspace.value, executor.value or 0)


def tensor_kind(value) -> str:
    if value is None or isinstance(value, torch.Tensor):
        return TENSOR
    if isinstance(value, (list, tuple)) and all(isinstance(v, torch.Tensor) for v in value):
        return TENSOR_LIST
    raise TypeError(f"expected a tensor, None or a list of tensors, got {type(value).__name__}")
