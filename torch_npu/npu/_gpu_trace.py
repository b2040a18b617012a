"""Callback registries PyTorch's GPU trace fires for npu (stream, event, memory and sync notifications).

The adapter reports through c10's GPUTrace once `torch._C._activate_gpu_trace()` has run; PyTorch
routes each notification to `torch.npu._gpu_trace.<Kind>Callbacks.fire_callbacks(...)`. Streams are
identified as `(device_index << 32) | stream_id`, events and memory by their addresses.
"""

from collections.abc import Callable

from torch._utils import CallbackRegistry

EventCreationCallbacks: "CallbackRegistry[int]" = CallbackRegistry("npu event creation")
EventDeletionCallbacks: "CallbackRegistry[int]" = CallbackRegistry("npu event deletion")
EventRecordCallbacks: "CallbackRegistry[int, int]" = CallbackRegistry("npu event record")
EventWaitCallbacks: "CallbackRegistry[int, int]" = CallbackRegistry("npu event wait")
MemoryAllocationCallbacks: "CallbackRegistry[int]" = CallbackRegistry("npu memory allocation")
MemoryDeallocationCallbacks: "CallbackRegistry[int]" = CallbackRegistry("npu memory deallocation")
StreamCreationCallbacks: "CallbackRegistry[int]" = CallbackRegistry("npu stream creation")
DeviceSynchronizationCallbacks: "CallbackRegistry[[]]" = CallbackRegistry("npu device synchronization")
StreamSynchronizationCallbacks: "CallbackRegistry[int]" = CallbackRegistry("npu stream synchronization")
EventSynchronizationCallbacks: "CallbackRegistry[int]" = CallbackRegistry("npu event synchronization")


def stream_key(stream) -> int:
    """The trace's id of a torch.Stream on npu (the adapter computes the same in NPUTrace.h)."""
    return (stream.device_index << 32) | stream.stream_id


def register_callback_for_event_creation(cb: Callable[[int], None]) -> None:
    EventCreationCallbacks.add_callback(cb)


def register_callback_for_event_deletion(cb: Callable[[int], None]) -> None:
    EventDeletionCallbacks.add_callback(cb)


def register_callback_for_event_record(cb: Callable[[int, int], None]) -> None:
    EventRecordCallbacks.add_callback(cb)


def register_callback_for_event_wait(cb: Callable[[int, int], None]) -> None:
    EventWaitCallbacks.add_callback(cb)


def register_callback_for_memory_allocation(cb: Callable[[int], None]) -> None:
    MemoryAllocationCallbacks.add_callback(cb)


def register_callback_for_memory_deallocation(cb: Callable[[int], None]) -> None:
    MemoryDeallocationCallbacks.add_callback(cb)


def register_callback_for_stream_creation(cb: Callable[[int], None]) -> None:
    StreamCreationCallbacks.add_callback(cb)


def register_callback_for_device_synchronization(cb: Callable[[], None]) -> None:
    DeviceSynchronizationCallbacks.add_callback(cb)


def register_callback_for_stream_synchronization(cb: Callable[[int], None]) -> None:
    StreamSynchronizationCallbacks.add_callback(cb)


def register_callback_for_event_synchronization(cb: Callable[[int], None]) -> None:
    EventSynchronizationCallbacks.add_callback(cb)
