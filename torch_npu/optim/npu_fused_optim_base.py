"""Base of the NpuFused optimizers: parameters, gradients and state live in combined flat buffers.

On the first step each parameter group is split by (device, dtype) into buckets. A bucket combines
its parameters (npu_combine_tensors), their gradients (combined_grad_buffer) and every state tensor
into flat buffers; the per-parameter tensors become views of them. A step then runs a handful of
single ops over whole buffers instead of a handful of ops per parameter. `self.state[p]` holds the
views under torch.optim's names, so state_dict()/load_state_dict() interoperate with torch.optim.
"""

from typing import Dict, List

import torch

from torch_npu.utils.combine_tensors import combined_grad_buffer, is_combined_tensor_valid, npu_combine_tensors


class _Bucket:
    """Parameters of one group sharing device and dtype, with their flat buffers."""

    def __init__(self, params: List[torch.Tensor]):
        self.params = params
        self.numels = [p.numel() for p in params]
        self.flat_param: torch.Tensor = None
        self.flat_grad: torch.Tensor = None
        self.flat_state: Dict[str, torch.Tensor] = {}
        self.state_ptrs: Dict[str, List[int]] = {}  # where each parameter's state view starts
        self.fresh_state: set = set()  # state names created zero-filled on this combine

    def views(self, flat: torch.Tensor) -> List[torch.Tensor]:
        """Per-parameter views of a flat buffer laid out like this bucket."""
        out, offset = [], 0
        for p, n in zip(self.params, self.numels):
            out.append(flat[offset:offset + n].view(p.shape))
            offset += n
        return out


class NpuFusedOptimizerBase(torch.optim.Optimizer):
    """Subclasses define `_state_names(group)` (flat state buffers, zero-initialised unless loaded),
    whether they keep a per-parameter `step`, and `_update(group, bucket, step)` (ops on flat buffers).

    Gradients stay in the combined buffer: zero_grad() zeroes it in place (one op) whatever
    `set_to_none` says. A parameter that got no gradient in a step is therefore updated as if its
    gradient were zero (torch.optim would skip it); put frozen parameters in no group, or set
    requires_grad=False on them (those are left out of the buffers).
    """

    _has_step = True

    def __init__(self, params, default):
        super().__init__(params, default)
        self._buckets: Dict[int, List[_Bucket]] = {}

    # --- subclass interface -------------------------------------------------------------------
    def _state_names(self, group) -> List[str]:
        raise NotImplementedError

    def _update(self, group, bucket: _Bucket, step: int) -> None:
        raise NotImplementedError

    def _before_updates(self, buckets: List[_Bucket]) -> None:
        """Called once per step with every bucket about to be updated (for what spans all of them)."""

    # --- combining ----------------------------------------------------------------------------
    def _make_buckets(self, group) -> List[_Bucket]:
        by_key: Dict[tuple, List[torch.Tensor]] = {}
        for p in group["params"]:
            if p.requires_grad:
                by_key.setdefault((p.device, p.dtype), []).append(p)
        buckets = [_Bucket(params) for params in by_key.values()]
        for bucket in buckets:
            self._combine(group, bucket)
        return buckets

    def _combine(self, group, bucket: _Bucket) -> None:
        params = bucket.params
        if not is_combined_tensor_valid(bucket.flat_param, params):
            bucket.flat_param = npu_combine_tensors(params)
        bucket.flat_grad = combined_grad_buffer(params)
        bucket.fresh_state = set()
        for name in self._state_names(group):
            flat = torch.zeros_like(bucket.flat_param)
            views = bucket.views(flat)
            loaded = [self.state[p].get(name) for p in params]
            if all(t is not None for t in loaded):
                for view, t in zip(views, loaded):
                    view.copy_(t)
            else:
                bucket.fresh_state.add(name)
            for p, view in zip(params, views):
                self.state[p][name] = view
            bucket.flat_state[name] = flat
            bucket.state_ptrs[name] = [view.data_ptr() for view in views]
        if self._has_step:
            for p in params:
                step = self.state[p].get("step")
                # torch.optim keeps `step` as a float32 CPU scalar tensor per parameter.
                self.state[p]["step"] = torch.tensor(float(step) if step is not None else 0.0)

    def _bucket_is_valid(self, group, bucket: _Bucket) -> bool:
        if not is_combined_tensor_valid(bucket.flat_param, bucket.params):
            return False
        if not is_combined_tensor_valid(bucket.flat_grad, [p.grad for p in bucket.params]):
            return False
        if set(bucket.flat_state) != set(self._state_names(group)):
            return False
        for name, ptrs in bucket.state_ptrs.items():
            for p, ptr in zip(bucket.params, ptrs):
                t = self.state[p].get(name)
                if t is None or t.data_ptr() != ptr:
                    return False
        return True

    def _group_buckets(self, index: int, group) -> List[_Bucket]:
        buckets = self._buckets.get(index)
        if buckets is None:
            if all(p.grad is None for p in group["params"]):
                return []  # nothing to update yet; combine once gradients exist
            buckets = self._buckets[index] = self._make_buckets(group)
        for bucket in buckets:
            if not self._bucket_is_valid(group, bucket):
                # Something replaced a parameter, gradient or state tensor (module.to(), grad=None,
                # load_state_dict); gather everything into buffers again, keeping the values.
                self._combine(group, bucket)
        return buckets

    # --- torch.optim.Optimizer interface ------------------------------------------------------
    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        groups = [(group, self._group_buckets(index, group)) for index, group in enumerate(self.param_groups)]
        self._before_updates([bucket for _, buckets in groups for bucket in buckets])
        for group, buckets in groups:
            for bucket in buckets:
                step = 0
                if self._has_step:
                    steps = [self.state[p]["step"] for p in bucket.params]
                    torch._foreach_add_(steps, 1.0)
                    step = int(steps[0].item())
                self._update(group, bucket, step)
                bucket.fresh_state = set()
        return loss

    @torch.no_grad()
    def clip_grad_norm_fused_(self, max_norm: float, norm_type: float = 2.0) -> torch.Tensor:
        """torch.nn.utils.clip_grad_norm_ over this optimizer's parameters, on the combined gradient
        buffers (one norm and one scale per buffer instead of per parameter): returns the total norm and
        scales the gradients so that it is at most `max_norm`."""
        max_norm, norm_type = float(max_norm), float(norm_type)
        flats = [bucket.flat_grad for index, group in enumerate(self.param_groups)
                 for bucket in self._group_buckets(index, group)]
        if not flats:
            return torch.tensor(0.0)
        device = flats[0].device
        norms = torch.stack([torch.linalg.vector_norm(f, norm_type).to(device) for f in flats])
        total = norms.max() if norm_type == float("inf") else torch.linalg.vector_norm(norms, norm_type)
        scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for flat in flats:
            flat.mul_(scale.to(flat.device, flat.dtype))
        return total

    def zero_grad(self, set_to_none: bool = True) -> None:
        combined = set()
        for buckets in self._buckets.values():
            for bucket in buckets:
                if is_combined_tensor_valid(bucket.flat_grad, [p.grad for p in bucket.params]):
                    bucket.flat_grad.zero_()
                    combined.update(id(p) for p in bucket.params)
        for group in self.param_groups:
            for p in group["params"]:
                if id(p) not in combined and p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.detach_().zero_()

    def load_state_dict(self, state_dict) -> None:
        super().load_state_dict(state_dict)
        # Loaded state tensors are new per-parameter tensors: recombine on the next step.
        self._buckets = {}

    def add_param_group(self, param_group) -> None:
        super().add_param_group(param_group)
        if hasattr(self, "_buckets"):
            self._buckets.pop(len(self.param_groups) - 1, None)
