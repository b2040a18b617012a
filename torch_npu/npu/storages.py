"""torch.npu.FloatStorage & co.: the legacy typed storages on npu, as torch.cuda has them (a storage of
one dtype on the current npu; `torch.npu.FloatStorage(4)`, `isinstance(t.storage(), torch.npu.FloatStorage)`)."""

import torch
from torch._utils import classproperty
from torch.storage import _LegacyStorage, _warn_typed_storage_removal


class _NpuLegacyStorage(_LegacyStorage):
    @classmethod
    def from_buffer(cls, *args, **kwargs):
        _warn_typed_storage_removal()
        raise RuntimeError("from_buffer: not available for npu storage; build it on CPU and call .npu()")

    @classmethod
    def _new_with_weak_ptr(cls, *args, **kwargs):
        raise RuntimeError("_new_with_weak_ptr: not available for npu storage")

    @classmethod
    def _new_shared_filename(cls, manager, obj, size, *, device=None, dtype=None):
        raise RuntimeError("_new_shared_filename: not available for npu storage")


def _storage_class(name, dtype):
    # TypedStorage takes the device from the class's module name, whose last part must be "npu".
    cls = type(name, (_NpuLegacyStorage,), {
        "dtype": classproperty(lambda self: (_warn_typed_storage_removal(), dtype)[1]),
        "_dtype": classproperty(lambda self: dtype),
        "__module__": "torch_npu.npu",
        "__doc__": f"Legacy typed storage of {dtype} on npu.",
    })
    return cls


BFloat16Storage = _storage_class("BFloat16Storage", torch.bfloat16)
BoolStorage = _storage_class("BoolStorage", torch.bool)
ByteStorage = _storage_class("ByteStorage", torch.uint8)
CharStorage = _storage_class("CharStorage", torch.int8)
DoubleStorage = _storage_class("DoubleStorage", torch.float64)
FloatStorage = _storage_class("FloatStorage", torch.float32)
HalfStorage = _storage_class("HalfStorage", torch.float16)
IntStorage = _storage_class("IntStorage", torch.int32)
LongStorage = _storage_class("LongStorage", torch.int64)
ShortStorage = _storage_class("ShortStorage", torch.int16)

__all__ = ["BFloat16Storage", "BoolStorage", "ByteStorage", "CharStorage", "DoubleStorage", "FloatStorage",
           "HalfStorage", "IntStorage", "LongStorage", "ShortStorage"]
