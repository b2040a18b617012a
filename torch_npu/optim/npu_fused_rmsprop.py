"""NpuFusedRMSprop: torch.optim.RMSprop over combined buffers (centered and momentum variants)."""

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase


class NpuFusedRMSprop(NpuFusedOptimizerBase):
    """Same arguments and results as torch.optim.RMSprop."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                 *, maximize=False):
        if lr < 0.0:
            raise ValueError(f"NpuFusedRMSprop: invalid learning rate {lr} (must be >= 0)")
        if not 0.0 <= alpha:
            raise ValueError(f"NpuFusedRMSprop: invalid alpha {alpha} (must be >= 0)")
        if eps < 0.0 or weight_decay < 0.0 or momentum < 0.0:
            raise ValueError(
                f"NpuFusedRMSprop: eps ({eps}), weight_decay ({weight_decay}) and momentum ({momentum}) must be >= 0")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, maximize=maximize))

    def _state_names(self, group):
        names = ["square_avg"]
        if group["momentum"] > 0:
            names.append("momentum_buffer")
        if group["centered"]:
            names.append("grad_avg")
        return names

    def _update(self, group, bucket, step):
        param, grad = bucket.flat_param, bucket.flat_grad
        square_avg, alpha = bucket.flat_state["square_avg"], group["alpha"]
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"] != 0:
            grad = grad.add(param, alpha=group["weight_decay"])
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if group["centered"]:
            grad_avg = bucket.flat_state["grad_avg"]
            grad_avg.lerp_(grad, 1 - alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg = avg.add_(group["eps"])
        if group["momentum"] > 0:
            buf = bucket.flat_state["momentum_buffer"]
            buf.mul_(group["momentum"]).addcdiv_(grad, avg)
            param.add_(buf, alpha=-group["lr"])
        else:
            param.addcdiv_(grad, avg, value=-group["lr"])
