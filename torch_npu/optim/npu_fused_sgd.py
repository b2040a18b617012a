"""NpuFusedSGD: torch.optim.SGD over combined buffers (momentum, dampening, nesterov, weight decay)."""

import torch

from torch_npu.optim.npu_fused_optim_base import NpuFusedOptimizerBase


class NpuFusedSGD(NpuFusedOptimizerBase):
    """Same arguments and results as torch.optim.SGD; one op per update over each combined buffer."""

    _has_step = False  # torch.optim.SGD keeps no step count

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 *, maximize=False):
        if lr < 0.0:
            raise ValueError(f"NpuFusedSGD: invalid learning rate {lr} (must be >= 0)")
        if momentum < 0.0:
            raise ValueError(f"NpuFusedSGD: invalid momentum {momentum} (must be >= 0)")
        if weight_decay < 0.0:
            raise ValueError(f"NpuFusedSGD: invalid weight_decay {weight_decay} (must be >= 0)")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("NpuFusedSGD: nesterov momentum needs momentum > 0 and dampening = 0")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _state_names(self, group):
        return ["momentum_buffer"] if group["momentum"] != 0 else []

    def _update(self, group, bucket, step):
        param, grad = bucket.flat_param, bucket.flat_grad
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"] != 0:
            grad = grad.add(param, alpha=group["weight_decay"])
        momentum = group["momentum"]
        if momentum != 0:
            buf = bucket.flat_state["momentum_buffer"]
            if "momentum_buffer" in bucket.fresh_state:
                buf.copy_(grad)  # torch.optim.SGD starts the buffer at the first gradient
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - group["dampening"])
            grad = grad.add(buf, alpha=momentum) if group["nesterov"] else buf
        param.add_(grad, alpha=-group["lr"])
