"""npu tensors across torch.multiprocessing (spawn / forkserver queues and arguments).

PyTorch's reductions share CPU storages through shared memory and CUDA storages through CUDA IPC; an
npu storage has neither (the software NPU has no inter-process memory), so npu tensors are sent as
their CPU contents and rebuilt on the same device index in the receiving process: a copy, not shared.
"""

from multiprocessing.reduction import ForkingPickler

import torch
from torch.multiprocessing import reductions as _reductions


def _rebuild_npu_tensor(cpu, index, requires_grad):
    tensor = cpu.to(torch.device("npu", index))
    tensor.requires_grad_(requires_grad)
    return tensor


def _reduce_tensor(tensor):
    if tensor.device.type != "npu":
        return _reductions.reduce_tensor(tensor)
    if tensor.requires_grad and not tensor.is_leaf:
        return _reductions.reduce_tensor(tensor)  # PyTorch's own error for non-leaf tensors
    # The CPU copy goes through PyTorch's reductions (shared memory) as an ordinary argument.
    return _rebuild_npu_tensor, (tensor.detach().cpu(), tensor.device.index, tensor.requires_grad)


def install() -> None:
    from torch.nn.parameter import Parameter

    for cls in (torch.Tensor, Parameter, *torch._tensor_classes):
        ForkingPickler.register(cls, _reduce_tensor)
