"""torch_npu.distributed.tensor.experimental: context_parallel shards attention's sequence dimension over
a device mesh; on npu meshes its ring attention runs over hccl."""

from torch.distributed.tensor.experimental import context_parallel

__all__ = ["context_parallel"]
