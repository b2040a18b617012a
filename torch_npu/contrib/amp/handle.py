"""amp.scale_loss and the per-optimizer state behind it: master weights, combined gradients, and
skipping optimizer.step() after a gradient overflow."""

import contextlib
import types
from typing import Dict, List

import torch

from torch_npu.contrib.amp._state import _amp_state
from torch_npu.utils.combine_tensors import combined_grad_buffer, is_combined_tensor_valid


class AmpOptimizerStash:
    """Attached to an optimizer by amp.initialize as `optimizer._amp_stash`.

    Parameters are handled in buckets of (model parameter, master parameter) pairs sharing device and
    dtypes. Without master weights both are the same tensor. With master weights (O2) the optimizer
    owns float32 copies of the low precision model parameters: gradients are copied model -> master
    before unscaling, and updated master values are copied back after optimizer.step().
    """

    def __init__(self, optimizer: torch.optim.Optimizer, master_weights: bool, combine_grad: bool, amp_state):
        if getattr(optimizer, "_amp_stash", None) is not None:
            raise RuntimeError("amp.initialize: this optimizer was already initialized; pass a fresh optimizer")
        self.optimizer = optimizer
        self.combine_grad = combine_grad
        self.skip_next_step = False
        self.amp_state = amp_state
        # Buckets follow the optimizer's groups and (device, dtype) of the parameters it updates, the
        # same split the NpuFused optimizers use, so both share one combined gradient buffer.
        self.buckets: List[_Bucket] = []
        for group in optimizer.param_groups:
            new_params = []
            by_key: Dict[tuple, _Bucket] = {}
            for p in group["params"]:
                master = p
                if master_weights and p.is_floating_point() and p.dtype != torch.float32:
                    master = p.detach().clone().float().requires_grad_(p.requires_grad)
                    if p in optimizer.state:
                        optimizer.state[master] = optimizer.state.pop(p)
                new_params.append(master)
                if master.requires_grad:
                    bucket = by_key.setdefault((master.device, master.dtype), _Bucket())
                    bucket.masters.append(master)
                    if master is not p:
                        bucket.model_params.append(p)
                        bucket.model_masters.append(master)
            group["params"] = new_params
            self.buckets.extend(by_key.values())
        if hasattr(optimizer, "_buckets"):
            optimizer._buckets = {}  # an NpuFused optimizer recombines its (new) parameters
        self.original_step = optimizer.step
        self.original_zero_grad = optimizer.zero_grad
        # Bound methods, so wrappers that rebind optimizer.step (LR schedulers) keep working.
        optimizer.step = types.MethodType(_amp_step, optimizer)
        optimizer.zero_grad = types.MethodType(_amp_zero_grad, optimizer)
        optimizer._amp_stash = self

    def grads_to_unscale(self) -> List[torch.Tensor]:
        """The gradients of the parameters the optimizer updates, after copying low precision model
        gradients into their float32 masters."""
        grads = []
        for bucket in self.buckets:
            if self.combine_grad:
                if all(p.grad is None for p in bucket.masters + bucket.model_params):
                    continue
                master_flat = combined_grad_buffer(bucket.masters)
                if bucket.model_params:
                    combined_grad_buffer(bucket.model_params)  # model gradients accumulate in one buffer too
                    torch._foreach_copy_([s.grad for s in bucket.model_masters],
                                         [m.grad for m in bucket.model_params])
                grads.append(master_flat)
                continue
            for m, s in zip(bucket.model_params, bucket.model_masters):
                if m.grad is not None:
                    s.grad = m.grad.to(s.dtype)
            grads.extend(s.grad for s in bucket.masters if s.grad is not None)
        return grads

    @torch.no_grad()
    def copy_model_to_master(self) -> None:
        """Masters from the model's current weights (after model.load_state_dict on resume)."""
        for bucket in self.buckets:
            if bucket.model_params:
                torch._foreach_copy_(bucket.model_masters, bucket.model_params)

    @torch.no_grad()
    def copy_master_to_model(self) -> None:
        for bucket in self.buckets:
            if bucket.model_params:
                torch._foreach_copy_(bucket.model_params, bucket.model_masters)

    def zero_grad(self, set_to_none: bool) -> None:
        if not self.combine_grad:
            self.original_zero_grad(set_to_none)
            for bucket in self.buckets:
                for m in bucket.model_params:
                    m.grad = None
            return
        # Combined gradients are zeroed in place so they stay in their buffers.
        for bucket in self.buckets:
            for tensors in (bucket.masters, bucket.model_params):
                if not tensors:
                    continue
                grads = [t.grad for t in tensors]
                base = grads[0]._base if grads[0] is not None else None
                if base is not None and all(g is not None for g in grads) and is_combined_tensor_valid(base, grads):
                    base.zero_()
                else:
                    for t in tensors:
                        t.grad = None


class _Bucket:
    """Parameters the optimizer updates (`masters`) sharing device and dtype, and the low precision
    model parameters some of them mirror (`model_params[i]` is mirrored by `model_masters[i]`)."""

    def __init__(self):
        self.masters: List[torch.Tensor] = []
        self.model_params: List[torch.Tensor] = []
        self.model_masters: List[torch.Tensor] = []


def master_params(optimizer):
    """The parameters `optimizer` updates: after amp.initialize with master weights (O2) the float32
    masters, not the model's float16 parameters (clip these: their gradients are the unscaled ones)."""
    for group in optimizer.param_groups:
        yield from group["params"]


def _amp_step(optimizer, *args, **kwargs):
    stash = optimizer._amp_stash
    if stash.skip_next_step:
        stash.skip_next_step = False  # gradients overflowed: leave weights and optimizer state alone
        return None
    out = stash.original_step(*args, **kwargs)
    stash.copy_master_to_model()
    return out


def _amp_zero_grad(optimizer, set_to_none: bool = True):
    optimizer._amp_stash.zero_grad(set_to_none)


@contextlib.contextmanager
def scale_loss(loss: torch.Tensor, optimizers, loss_id: int = 0, model=None, delay_unscale: bool = False,
               delay_overflow_check: bool = False):
    """`with amp.scale_loss(loss, optimizer) as scaled_loss: scaled_loss.backward()`.

    Yields the loss times the current loss scale. On exit the gradients are unscaled on the device
    and checked for inf/nan; after an overflow the next optimizer.step() is skipped (and a dynamic
    scale shrinks). `delay_unscale=True` leaves the gradients scaled (gradient accumulation: use it
    on every backward but the last before optimizer.step()). `delay_overflow_check=True` unscales but
    neither checks for overflow nor updates the scale, saving the device synchronisation."""
    if not _amp_state.initialized:
        raise RuntimeError("amp.scale_loss: call amp.initialize(model, optimizer, opt_level=...) first")
    if not _amp_state.enabled:
        yield loss
        return
    optimizer_list = list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]
    for o in optimizer_list:
        if getattr(o, "_amp_stash", None) is None:
            raise RuntimeError("amp.scale_loss: this optimizer was not passed to amp.initialize; use the optimizer "
                               "amp.initialize returned")
    if not 0 <= loss_id < len(_amp_state.loss_scalers):
        raise ValueError(f"amp.scale_loss: loss_id {loss_id} out of range; amp.initialize(num_losses=...) set up "
                         f"{len(_amp_state.loss_scalers)} loss scalers")
    scaler = _amp_state.loss_scalers[loss_id]
    # With overflow detection on, the device's float status also counts: it sees inf/nan produced
    # anywhere in the backward, as apex's check on Ascend does.
    status_device = loss.device if loss.device.type == "npu" and torch.npu.utils.is_overflow_detection_enabled() \
        else None
    if status_device is not None:
        torch.npu.clear_npu_overflow_flag(status_device)
    yield loss.float() * scaler.loss_scale()
    if delay_unscale:
        return
    found: Dict[torch.device, torch.Tensor] = {}
    for o in optimizer_list:
        for device, flag in scaler.unscale(o._amp_stash.grads_to_unscale()).items():
            found[device] = flag if device not in found else found[device] + flag
    if delay_overflow_check:
        return  # reading the flags is the synchronisation this skips
    overflow = any(bool(flag.item()) for flag in found.values())
    if status_device is not None:
        overflow = torch.npu.get_npu_overflow_flag(status_device) or overflow
    scaler.update_scale(overflow)
    if overflow:
        for o in optimizer_list:
            o._amp_stash.skip_next_step = True
        if _amp_state.verbosity > 0:
            print(f"amp: gradient overflow, skipping step; loss scaler {loss_id} scale is now {scaler.loss_scale()}")
