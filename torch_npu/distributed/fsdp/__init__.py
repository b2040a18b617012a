"""torch_npu.distributed.fsdp: fully_shard (FSDP2) for modules on npu devices.

It is torch.distributed.fsdp.fully_shard: its all-gathers and reduce-scatters run on the hccl
backend and its streams are npu streams through the device interface torch_npu registers, so
nothing needs patching on the software NPU."""

import functools

from torch.distributed.fsdp import fully_shard as _torch_fully_shard

__all__ = ["fully_shard"]


@functools.wraps(_torch_fully_shard)
def fully_shard(*args, **kwargs):
    return _torch_fully_shard(*args, **kwargs)


fully_shard.state = _torch_fully_shard.state
fully_shard.__module__ = __name__
