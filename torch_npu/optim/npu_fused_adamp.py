"""NpuFusedAdamP: AdamP (Heo et al., 2021) over combined buffers: Adam whose update loses its radial part,
and whose weight decay shrinks by wd_ratio, for weights that behave scale-invariantly (a gradient nearly
orthogonal to the weight, per channel or per layer)."""

import math

import torch
import torch.nn.functional as F

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase


def _projection(p, grad, perturb, delta, wd_ratio, eps):
    """perturb without its component along p, with wd_ratio, when p looks scale-invariant (channel-wise,
    then layer-wise); else (perturb, 1)."""
    expand = [-1] + [1] * (p.dim() - 1)
    for view in (lambda x: x.reshape(x.size(0), -1), lambda x: x.reshape(1, -1)):
        cosine = F.cosine_similarity(view(grad), view(p), dim=1, eps=eps).abs_()
        if cosine.max() < delta / math.sqrt(view(p).size(1)):
            p_n = p / view(p).norm(dim=1).view(expand).add_(eps)
            perturb = perturb - p_n * view(p_n * perturb).sum(dim=1).view(expand)
            return perturb, wd_ratio
    return perturb, 1.0


class NpuFusedAdamP(NpuFusedOptimizerBase):
    """Same arguments and results as clovaai's AdamP (adamp.AdamP)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, delta=0.1, wd_ratio=0.1,
                 nesterov=False):
        if lr < 0.0 or eps < 0.0 or weight_decay < 0.0:
            raise ValueError(f"NpuFusedAdamP: lr ({lr}), eps ({eps}) and weight_decay ({weight_decay}) must be >= 0")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"NpuFusedAdamP: invalid betas {betas} (each must be in [0, 1))")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, delta=delta,
                                      wd_ratio=wd_ratio, nesterov=nesterov))

    def _state_names(self, group):
        return ["exp_avg", "exp_avg_sq"]

    def _update(self, group, bucket, step):
        grad = bucket.flat_grad
        exp_avg, exp_avg_sq = bucket.flat_state["exp_avg"], bucket.flat_state["exp_avg_sq"]
        (beta1, beta2), eps, lr = group["betas"], group["eps"], group["lr"]
        # The moments over the whole bucket at once; the projection per parameter (it is per weight).
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2 ** step)).add_(eps)
        if group["nesterov"]:
            perturb = (exp_avg * beta1 + grad * (1 - beta1)) / denom
        else:
            perturb = exp_avg / denom
        step_size = lr / (1 - beta1 ** step)
        for p, g, u in zip(bucket.params, bucket.views(grad), bucket.views(perturb)):
            ratio = 1.0
            if p.dim() > 1:
                projected, ratio = _projection(p, g, u, group["delta"], group["wd_ratio"], eps)
                u.copy_(projected)
            if group["weight_decay"] > 0:
                p.mul_(1 - lr * group["weight_decay"] * ratio)
        bucket.flat_param.add_(perturb, alpha=-step_size)
