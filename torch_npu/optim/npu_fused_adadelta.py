"""NpuFusedAdadelta: torch.optim.Adadelta over combined buffers."""

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase


class NpuFusedAdadelta(NpuFusedOptimizerBase):
    """Same arguments and results as torch.optim.Adadelta."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, *, maximize=False):
        if lr < 0.0:
            raise ValueError(f"NpuFusedAdadelta: invalid learning rate {lr} (must be >= 0)")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"NpuFusedAdadelta: invalid rho {rho} (must be in [0, 1])")
        if eps < 0.0 or weight_decay < 0.0:
            raise ValueError(f"NpuFusedAdadelta: eps ({eps}) and weight_decay ({weight_decay}) must be >= 0")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize))

    def _state_names(self, group):
        return ["square_avg", "acc_delta"]

    def _update(self, group, bucket, step):
        param, grad = bucket.flat_param, bucket.flat_grad
        square_avg, acc_delta = bucket.flat_state["square_avg"], bucket.flat_state["acc_delta"]
        rho, eps = group["rho"], group["eps"]
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"] != 0:
            grad = grad.add(param, alpha=group["weight_decay"])
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        param.add_(delta, alpha=-group["lr"])
