"""Legacy typed constructors (torch.npu.FloatTensor([1, 2]) etc.), as torch.cuda.* has them."""

import torch


class _NpuTensorType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Tensor) and obj.is_npu and obj.dtype == cls.dtype

    def __call__(cls, *args, **kwargs):
        if "device" in kwargs:
            raise TypeError(f"torch.npu.{cls.__name__} does not take a device argument")
        if not args:
            return torch.empty(0, dtype=cls.dtype, device="npu")
        if len(args) == 1 and isinstance(args[0], torch.Tensor):
            return args[0].to(device="npu", dtype=cls.dtype)
        if len(args) == 1 and isinstance(args[0], torch.Size):
            return torch.empty(args[0], dtype=cls.dtype, device="npu")
        if len(args) == 1 and not isinstance(args[0], int):
            return torch.tensor(args[0], dtype=cls.dtype, device="npu")
        return torch.empty(*args, dtype=cls.dtype, device="npu")


def _make(name, dtype):
    # The full dotted name is what Tensor.type(cls) parses (as for torch.cuda.FloatTensor).
    cls = _NpuTensorType(f"torch.npu.{name}", (), {"dtype": dtype, "is_npu": True})
    cls.__module__, cls.__qualname__ = "torch.npu", name
    return cls


FloatTensor = _make("FloatTensor", torch.float32)
DoubleTensor = _make("DoubleTensor", torch.float64)
HalfTensor = _make("HalfTensor", torch.float16)
BFloat16Tensor = _make("BFloat16Tensor", torch.bfloat16)
ByteTensor = _make("ByteTensor", torch.uint8)
CharTensor = _make("CharTensor", torch.int8)
ShortTensor = _make("ShortTensor", torch.int16)
IntTensor = _make("IntTensor", torch.int32)
LongTensor = _make("LongTensor", torch.int64)
BoolTensor = _make("BoolTensor", torch.bool)
