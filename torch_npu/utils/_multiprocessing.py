"""npu tensors across torch.multiprocessing (spawn / forkserver queues and arguments).

PyTorch's reductions share CPU storages through shared memory and CUDA storages through CUDA IPC; an
npu storage has neither (the software NPU has no inter-process memory), so npu tensors are sent as
their serialised CPU contents and rebuilt on the same device index in the receiving process: a copy,
not shared.
"""

import io
from multiprocessing.reduction import ForkingPickler

import torch
from torch.multiprocessing import reductions as _reductions


def _rebuild_npu_tensor(data, index, requires_grad):
    cpu = torch.load(io.BytesIO(data), weights_only=True)
    tensor = cpu.to(torch.device("npu", index))
    tensor.requires_grad_(requires_grad)
    return tensor


def _reduce_tensor(tensor):
    if tensor.device.type != "npu":
        return _reductions.reduce_tensor(tensor)
    if tensor.requires_grad and not tensor.is_leaf:
        return _reductions.reduce_tensor(tensor)  # PyTorch's own error for non-leaf tensors
    # Serialised bytes, not PyTorch's shared-memory CPU reduction: the receiver owns a private copy.
    buffer = io.BytesIO()
    torch.save(tensor.detach().cpu(), buffer)
    return _rebuild_npu_tensor, (buffer.getvalue(), tensor.device.index, tensor.requires_grad)


def install() -> None:
    from torch.nn.parameter import Parameter

    for cls in (torch.Tensor, Parameter, *torch._tensor_classes):
        ForkingPickler.register(cls, _reduce_tensor)
