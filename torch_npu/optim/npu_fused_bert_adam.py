"""NpuFusedBertAdam: BERT's Adam (pytorch-pretrained-bert's BertAdam) over combined buffers: no bias
correction, weight decay added to the update, gradients clipped to max_grad_norm over each combined
bucket, and a warm-up learning-rate schedule over t_total steps."""

import math

import torch
from torch.optim.optimizer import required

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase


def _warmup_cosine(x, warmup):
    return x / warmup if x < warmup else 0.5 * (1.0 + math.cos(math.pi * x))


def _warmup_constant(x, warmup):
    return x / warmup if x < warmup else 1.0


def _warmup_linear(x, warmup):
    return x / warmup if x < warmup else max((x - 1.0) / (warmup - 1.0), 0.0)


def _warmup_poly(x, warmup, degree=0.5):
    return x / warmup if x < warmup else (1.0 - x) ** degree


SCHEDULES = {"warmup_cosine": _warmup_cosine, "warmup_constant": _warmup_constant, "warmup_linear": _warmup_linear,
             "warmup_poly": _warmup_poly}
_WARMUP_DEFAULT = 0.002  # the schedules' warm-up share when warmup=-1


class NpuFusedBertAdam(NpuFusedOptimizerBase):
    """lr (required), warmup (share of t_total, -1: none), t_total (-1: constant lr), schedule (one of
    SCHEDULES), b1, b2, e, weight_decay, max_grad_norm (<= 0: no clipping)."""

    def __init__(self, params, lr=required, warmup=-1, t_total=-1, schedule="warmup_linear", b1=0.9, b2=0.999,
                 e=1e-6, weight_decay=0.01, max_grad_norm=1.0):
        if lr is required:
            raise ValueError("NpuFusedBertAdam: lr is required")
        if lr < 0.0:
            raise ValueError(f"NpuFusedBertAdam: invalid learning rate {lr} (must be >= 0)")
        if (warmup < 0.0 and warmup != -1) or warmup >= 1.0:
            raise ValueError(f"NpuFusedBertAdam: invalid warmup {warmup} (a share in [0, 1), or -1)")
        if schedule not in SCHEDULES:
            raise ValueError(f"NpuFusedBertAdam: invalid schedule {schedule!r}; one of {sorted(SCHEDULES)}")
        if not 0.0 <= b1 < 1.0 or not 0.0 <= b2 < 1.0:
            raise ValueError(f"NpuFusedBertAdam: invalid b1 {b1} / b2 {b2} (each in [0, 1))")
        if e < 0.0:
            raise ValueError(f"NpuFusedBertAdam: invalid epsilon {e} (must be >= 0)")
        self.max_grad_norm = max_grad_norm
        super().__init__(params, dict(lr=lr, warmup=warmup, t_total=t_total, schedule=schedule, b1=b1, b2=b2, e=e,
                                      weight_decay=weight_decay, max_grad_norm=max_grad_norm))

    def _state_names(self, group):
        return ["exp_avg", "exp_avg_sq"]

    def _update(self, group, bucket, step):
        param, grad = bucket.flat_param, bucket.flat_grad
        exp_avg, exp_avg_sq = bucket.flat_state["exp_avg"], bucket.flat_state["exp_avg_sq"]
        if group["max_grad_norm"] > 0:
            norm = grad.float().norm(2)
            grad.mul_(torch.clamp(group["max_grad_norm"] / (norm + 1e-6), max=1.0).to(grad.dtype))
        exp_avg.mul_(group["b1"]).add_(grad, alpha=1 - group["b1"])
        exp_avg_sq.mul_(group["b2"]).addcmul_(grad, grad, value=1 - group["b2"])
        update = exp_avg / (exp_avg_sq.sqrt() + group["e"])
        if group["weight_decay"] > 0.0:
            update.add_(param, alpha=group["weight_decay"])
        lr = group["lr"]
        if group["t_total"] != -1:
            warmup = group["warmup"] if group["warmup"] != -1 else _WARMUP_DEFAULT
            lr = lr * SCHEDULES[group["schedule"]]((step - 1) / group["t_total"], warmup)
        param.add_(update, alpha=-lr)
