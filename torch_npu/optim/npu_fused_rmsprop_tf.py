"""NpuFusedRMSpropTF: RMSprop as TensorFlow computes it (timm's RMSpropTF) over combined buffers: the
square average starts at one, eps sits inside the square root, and the learning rate may join the
momentum buffer."""

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase


class NpuFusedRMSpropTF(NpuFusedOptimizerBase):
    """Same arguments and results as timm.optim.RMSpropTF."""

    def __init__(self, params, lr=1e-2, alpha=0.9, eps=1e-10, weight_decay=0, momentum=0.0, centered=False,
                 decoupled_decay=False, lr_in_momentum=True):
        if lr < 0.0:
            raise ValueError(f"NpuFusedRMSpropTF: invalid learning rate {lr} (must be >= 0)")
        if alpha < 0.0 or eps < 0.0 or weight_decay < 0.0 or momentum < 0.0:
            raise ValueError(f"NpuFusedRMSpropTF: alpha ({alpha}), eps ({eps}), weight_decay ({weight_decay}) and "
                             f"momentum ({momentum}) must be >= 0")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, decoupled_decay=decoupled_decay,
                                      lr_in_momentum=lr_in_momentum))

    def _state_names(self, group):
        names = ["square_avg"]
        if group["momentum"] > 0:
            names.append("momentum_buffer")
        if group["centered"]:
            names.append("grad_avg")
        return names

    def _update(self, group, bucket, step):
        param, grad = bucket.flat_param, bucket.flat_grad
        square_avg = bucket.flat_state["square_avg"]
        if "square_avg" in bucket.fresh_state:
            square_avg.fill_(1.0)  # TensorFlow's initial accumulator
        lr, wd, one_minus_alpha = group["lr"], group["weight_decay"], 1.0 - group["alpha"]
        if wd != 0:
            if group["decoupled_decay"]:
                param.mul_(1.0 - lr * wd)
            else:
                grad = grad.add(param, alpha=wd)
        square_avg.add_(grad.pow(2) - square_avg, alpha=one_minus_alpha)
        if group["centered"]:
            grad_avg = bucket.flat_state["grad_avg"]
            grad_avg.add_(grad - grad_avg, alpha=one_minus_alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).add_(group["eps"]).sqrt_()
        else:
            avg = square_avg.add(group["eps"]).sqrt_()
        if group["momentum"] > 0:
            buf = bucket.flat_state["momentum_buffer"]
            if group["lr_in_momentum"]:
                buf.mul_(group["momentum"]).addcdiv_(grad, avg, value=lr)
                param.sub_(buf)
            else:
                buf.mul_(group["momentum"]).addcdiv_(grad, avg)
                param.add_(buf, alpha=-lr)
        else:
            param.addcdiv_(grad, avg, value=-lr)
