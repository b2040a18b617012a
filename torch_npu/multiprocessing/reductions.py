"""npu tensors, storages and events across torch.multiprocessing (spawn / forkserver queues and arguments).

PyTorch shares CPU storages through shared memory and CUDA storages through CUDA IPC; an npu storage
of the software NPU lives in its process's device memory and has no inter-process handle, so a storage
travels as its bytes (its "handle") and is rebuilt on the same device index in the receiving process,
with the tensor's size, stride, offset and requires_grad: a copy, not shared memory. Writes in the
receiver are not seen by the sender. An event is waited for by the sender when sent and arrives as a
completed event, so waiting on it in the receiver orders after the sender's work as on hardware."""

from multiprocessing.reduction import ForkingPickler

import torch
from torch.multiprocessing import reductions as _reductions

__all__ = ["rebuild_npu_event", "rebuild_npu_tensor"]


def _storage_from_handle(storage_device, storage_handle, storage_size_bytes):
    device = torch.device(storage_device)
    host = torch.frombuffer(bytearray(storage_handle), dtype=torch.uint8) if storage_size_bytes else \
        torch.empty(0, dtype=torch.uint8)
    if host.numel() != storage_size_bytes:
        raise ValueError(f"rebuild_npu_tensor: the storage handle holds {host.numel()} bytes, expected "
                         f"{storage_size_bytes}")
    return host.to(device).untyped_storage()


def rebuild_npu_tensor(tensor_cls, tensor_size, tensor_stride, tensor_offset, storage_cls, dtype, storage_device,
                       storage_handle, storage_size_bytes, storage_offset_bytes, requires_grad, ref_counter_handle,
                       ref_counter_offset, event_handle, event_sync_required):
    """Rebuilds a tensor sent from another process: a new storage on `storage_device` holding the bytes
    in `storage_handle`, viewed with the sender's size / stride / offset and dtype. The reference
    counter and event arguments (CUDA-style IPC bookkeeping) are None / False here: the receiver owns
    its copy."""
    storage = _storage_from_handle(storage_device, storage_handle, storage_size_bytes)
    if storage_offset_bytes:
        raise ValueError("rebuild_npu_tensor: npu storages are sent whole (storage_offset_bytes must be 0)")
    typed = torch.storage.TypedStorage(wrap_storage=storage, dtype=dtype, _internal=True)
    tensor = torch._utils._rebuild_tensor(typed, tensor_offset, tensor_size, tensor_stride)
    if tensor_cls is torch.nn.parameter.Parameter:
        return torch.nn.parameter.Parameter(tensor, requires_grad=requires_grad)
    if tensor_cls is not torch.Tensor:
        tensor = tensor.as_subclass(tensor_cls)
    tensor.requires_grad_(requires_grad)
    return tensor


def rebuild_npu_event(device, handle):
    """An event from another process: the sender waited for it, so it arrives complete (an event
    recorded on `device`'s current stream, which has passed nothing of the sender's)."""
    event = torch.npu.Event()
    with torch.npu.device(device):
        event.record()
    return event


def _storage_bytes(storage) -> bytes:
    return bytes(torch.empty(0, dtype=torch.uint8).set_(storage.cpu()).numpy().tobytes()) if storage.nbytes() \
        else b""


def _reduce_tensor(tensor):
    if tensor.device.type != "npu":
        return _reductions.reduce_tensor(tensor)
    if tensor.requires_grad and not tensor.is_leaf:
        return _reductions.reduce_tensor(tensor)  # PyTorch's own error for non-leaf tensors
    storage = tensor.untyped_storage()
    return rebuild_npu_tensor, (type(tensor), tuple(tensor.size()), tuple(tensor.stride()), tensor.storage_offset(),
                                type(storage), tensor.dtype, str(tensor.device), _storage_bytes(storage),
                                storage.nbytes(), 0, tensor.requires_grad, None, None, None, False)


def _reduce_storage(storage):
    return _storage_from_handle, (str(storage.device), _storage_bytes(storage), storage.nbytes())


def _reduce_event(event):
    event.synchronize()
    return rebuild_npu_event, (event.device.index if event.device is not None else torch.npu.current_device(), None)


def _reduce_any_storage(storage):
    if storage.device.type != "npu":
        return _reductions.reduce_storage(storage)
    return _reduce_storage(storage)


def install() -> None:
    from torch.nn.parameter import Parameter

    for cls in (torch.Tensor, Parameter, *torch._tensor_classes):
        ForkingPickler.register(cls, _reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, _reduce_any_storage)
    ForkingPickler.register(torch.npu.Event, _reduce_event)
