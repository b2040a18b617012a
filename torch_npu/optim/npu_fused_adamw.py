"""NpuFusedAdamW: NpuFusedAdam with decoupled weight decay, as torch.optim.AdamW."""

from torch_npu.optim.npu_fused_adam import NpuFusedAdam


class NpuFusedAdamW(NpuFusedAdam):
    """Same arguments and results as torch.optim.AdamW (decoupled weight decay, default 1e-2)."""

    _decoupled_weight_decay = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 *, maximize=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         maximize=maximize)
