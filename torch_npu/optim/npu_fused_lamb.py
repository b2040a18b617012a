"""NpuFusedLamb: LAMB (Adam direction scaled per parameter by a trust ratio) over combined buffers."""

import torch

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase


class NpuFusedLamb(NpuFusedOptimizerBase):
    """LAMB (You et al., "Large Batch Optimization for Deep Learning") as torch_npu computes it. Per
    parameter w:

        m = b1*m + (1-b1)*g;   v = b2*v + (1-b2)*g*g          (no bias correction)
        u = m / (sqrt(v) + eps) + weight_decay * w
        w -= lr * (min(||w||, 10) / ||u||) * u                 (ratio 1 when either norm is 0)

    `adam=True` drops the trust ratio; `use_global_grad_norm=True` first divides every gradient by
    the norm of all of them together when that norm exceeds 1. The per-parameter norms come from one
    foreach op over views of the combined buffers.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, adam=False,
                 use_global_grad_norm=False):
        if lr < 0.0:
            raise ValueError(f"NpuFusedLamb: invalid learning rate {lr} (must be >= 0)")
        if eps < 0.0:
            raise ValueError(f"NpuFusedLamb: invalid eps {eps} (must be >= 0)")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"NpuFusedLamb: invalid betas {betas} (each must be in [0, 1))")
        if weight_decay < 0.0:
            raise ValueError(f"NpuFusedLamb: invalid weight_decay {weight_decay} (must be >= 0)")
        self.adam = adam
        self.use_global_grad_norm = use_global_grad_norm
        self._grad_divisor = None
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def _state_names(self, group):
        return ["exp_avg", "exp_avg_sq"]

    def _before_updates(self, buckets):
        self._grad_divisor = None
        if self.use_global_grad_norm and buckets:
            # max(norm, 1): gradients are divided only when their global norm exceeds 1 (no sync).
            device = buckets[0].flat_grad.device
            squares = torch.stack([b.flat_grad.float().pow(2).sum().to(device) for b in buckets])
            self._grad_divisor = squares.sum().sqrt().clamp(min=1.0)

    def _update(self, group, bucket, step):
        param, grad = bucket.flat_param, bucket.flat_grad
        if self._grad_divisor is not None:
            grad = grad / self._grad_divisor.to(grad.device, grad.dtype)
        exp_avg, exp_avg_sq = bucket.flat_state["exp_avg"], bucket.flat_state["exp_avg_sq"]
        (beta1, beta2), eps, wd = group["betas"], group["eps"], group["weight_decay"]
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        update = exp_avg / (exp_avg_sq.sqrt() + eps)
        if wd != 0:
            update.add_(param, alpha=wd)
        if self.adam:
            param.add_(update, alpha=-group["lr"])
            return
        weight_norms = torch.stack(torch._foreach_norm(bucket.views(param))).clamp(max=10.0)
        update_norms = torch.stack(torch._foreach_norm(bucket.views(update)))
        trust = torch.where((weight_norms > 0) & (update_norms > 0), weight_norms / update_norms,
                            torch.ones_like(weight_norms))
        counts = getattr(bucket, "numels_on_device", None)
        if counts is None or counts.device != param.device:
            counts = bucket.numels_on_device = torch.tensor(bucket.numels, device=param.device)
        # Spread each parameter's ratio over its elements, then update the whole buffer at once.
        param.add_(update * trust.repeat_interleave(counts, output_size=param.numel()), alpha=-group["lr"])
