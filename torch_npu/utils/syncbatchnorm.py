"""torch_npu.utils.syncbatchnorm: the autograd Function behind synchronized batch norm on npu
(torch.nn.SyncBatchNorm's, whose statistics ops and all_gather run on npu devices over hccl)."""

from torch.nn.modules._functions import SyncBatchNorm as _TorchSyncBatchNorm

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_TorchSyncBatchNorm):
    """SyncBatchNorm.apply(input, weight, bias, running_mean, running_var, eps, momentum, process_group,
    world_size): batch norm over the batches of every rank of `process_group` (mean and variance gathered
    across ranks, running statistics updated with the global counts), with its backward. torch.nn.
    SyncBatchNorm modules on npu use the same Function; this is its torch_npu name."""
