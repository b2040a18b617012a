"""Dynamo's view of the npu device: devices, streams, events and properties, as torch.cuda gives them."""

from __future__ import annotations

import os
from collections import namedtuple

import torch
from torch._dynamo.device_interface import DeviceInterface, caching_worker_current_devices

import torch_npu.npu as npu
from torch_npu.npu.device import _index

# What Inductor asks of device properties. The software NPU computes on the host's cores, so npu
# reports them as the CPU device does (Inductor's reduction-splitting heuristics read the count).
NpuDeviceProperties = namedtuple(
    "NpuDeviceProperties", ["name", "type", "index", "multi_processor_count", "total_memory", "major", "minor"])


def get_device_properties(device=None) -> NpuDeviceProperties:
    index = _index(device)
    total = npu.mem_get_info(index)[1]
    return NpuDeviceProperties(npu.get_device_name(index), "npu", index, os.cpu_count() or 1, total, 0, 0)


def get_raw_stream(device_idx: int) -> int:
    """The current stream's id on `device_idx` (what Inductor passes to kernels that take a stream)."""
    return npu.current_stream(device_idx).stream_id


def _exchange_device(device: int) -> int:
    previous = npu.current_device()
    if device >= 0 and device != previous:
        npu.set_device(device)
    return previous


class NpuInterface(DeviceInterface):
    device = npu.device
    Event = npu.Event
    Stream = npu.Stream

    class Worker:
        """Device queries from Inductor's compile workers, which must not touch the device."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices["npu"] = device

        @staticmethod
        def current_device() -> int:
            return caching_worker_current_devices.get("npu", npu.current_device())

        @staticmethod
        def get_device_properties(device=None) -> NpuDeviceProperties:
            return get_device_properties(device)

    current_device = staticmethod(npu.current_device)
    set_device = staticmethod(npu.set_device)
    device_count = staticmethod(npu.device_count)
    stream = staticmethod(npu.stream)
    current_stream = staticmethod(npu.current_stream)
    set_stream = staticmethod(npu.set_stream)
    synchronize = staticmethod(npu.synchronize)
    get_device_properties = staticmethod(get_device_properties)
    get_raw_stream = staticmethod(get_raw_stream)
    exchange_device = staticmethod(_exchange_device)
    maybe_exchange_device = staticmethod(_exchange_device)
    memory_allocated = staticmethod(npu.memory_allocated)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        npu.set_stream(npu.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type))

    @staticmethod
    def is_available() -> bool:
        return npu.is_available()

    @staticmethod
    def get_compute_capability(device=None) -> str:
        return ""

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return npu.is_bf16_supported(including_emulation)

    @classmethod
    def is_dtype_supported(cls, dtype: torch.dtype, including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def is_triton_capable(device=None) -> bool:
        return False

    @staticmethod
    def raise_if_triton_unavailable(device=None) -> None:
        raise RuntimeError("npu kernels are C++ (Inductor's CppScheduling), not Triton")
