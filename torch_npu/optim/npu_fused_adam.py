"""NpuFusedAdam: torch.optim.Adam over combined buffers (npu_fused_adamw.py adds decoupled weight decay)."""

import math

import torch

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase


def _check(name, lr, betas, eps, weight_decay):
    if lr < 0.0:
        raise ValueError(f"{name}: invalid learning rate {lr} (must be >= 0)")
    if eps < 0.0:
        raise ValueError(f"{name}: invalid eps {eps} (must be >= 0)")
    if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
        raise ValueError(f"{name}: invalid betas {betas} (each must be in [0, 1))")
    if weight_decay < 0.0:
        raise ValueError(f"{name}: invalid weight_decay {weight_decay} (must be >= 0)")


class NpuFusedAdam(NpuFusedOptimizerBase):
    """Same arguments and results as torch.optim.Adam (L2 weight decay added to the gradient)."""

    _decoupled_weight_decay = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 *, maximize=False):
        _check(type(self).__name__, lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _state_names(self, group):
        names = ["exp_avg", "exp_avg_sq"]
        if group["amsgrad"]:
            names.append("max_exp_avg_sq")
        return names

    def _update(self, group, bucket, step):
        param, grad = bucket.flat_param, bucket.flat_grad
        exp_avg, exp_avg_sq = bucket.flat_state["exp_avg"], bucket.flat_state["exp_avg_sq"]
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if group["maximize"]:
            grad = -grad
        if wd != 0:
            if self._decoupled_weight_decay:
                param.mul_(1 - lr * wd)
            else:
                grad = grad.add(param, alpha=wd)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1**step
        bias_correction2_sqrt = math.sqrt(1 - beta2**step)
        second = exp_avg_sq
        if group["amsgrad"]:
            max_sq = bucket.flat_state["max_exp_avg_sq"]
            torch.maximum(max_sq, exp_avg_sq, out=max_sq)
            second = max_sq
        denom = (second.sqrt() / bias_correction2_sqrt).add_(eps)
        param.addcdiv_(exp_avg, denom, value=-lr / bias_correction1)
