"""npu_combine_tensors: put many tensors into one contiguous buffer so one device op updates them all."""

import weakref
from typing import Iterable, List, Optional

import torch


def npu_combine_tensors(list_of_tensor: Iterable[torch.Tensor], require_copy_value: bool = True) -> Optional[torch.Tensor]:
    """Allocate one flat buffer holding every tensor in `list_of_tensor` back to back, and re-point each
    tensor's `.data` to its slice of the buffer (the tensor objects stay the same, so parameters,
    gradients and optimizer state keep their identity). Afterwards an in-place op on the buffer
    updates all tensors at once.

    All tensors must share a device and dtype. `require_copy_value=False` skips copying the old
    values (the buffer starts zeroed). Returns the buffer, or None for an empty list.
    """
    tensors = list(list_of_tensor)
    if not tensors:
        return None
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"npu_combine_tensors: item {i} is a {type(t).__name__}, expected a torch.Tensor")
    first = tensors[0]
    for i, t in enumerate(tensors):
        if t.device != first.device or t.dtype != first.dtype:
            raise ValueError(
                f"npu_combine_tensors: all tensors must share device and dtype; tensor 0 is {first.dtype} on "
                f"{first.device} but tensor {i} is {t.dtype} on {t.device}. Group tensors by (device, dtype) "
                "and combine each group separately."
            )
    total = sum(t.numel() for t in tensors)
    combined = torch.zeros(total, dtype=first.dtype, device=first.device)
    offset = 0
    for t in tensors:
        n = t.numel()
        part = combined[offset:offset + n].view(t.shape)
        if require_copy_value:
            part.copy_(t.detach())
        t.data = part
        offset += n
    return combined


def get_part_combined_tensor(combined_tensor: torch.Tensor, index: int, size: int) -> torch.Tensor:
    """The `size` elements of a combined buffer starting at element `index` (a view, not a copy)."""
    combined = combined_tensor
    if index < 0 or size < 0 or index + size > combined.numel():
        raise ValueError(
            f"get_part_combined_tensor: [{index}, {index + size}) is outside the combined buffer of "
            f"{combined.numel()} elements"
        )
    return combined[index:index + size]


def is_combined_tensor_valid(combined_tensor: Optional[torch.Tensor], list_of_tensor: List[torch.Tensor]) -> bool:
    """True when every tensor of `list_of_tensor` still lives in `combined_tensor` at consecutive offsets (nothing replaced its
    storage since npu_combine_tensors, e.g. by `module.to()` or `param.data = ...`)."""
    combined, tensors = combined_tensor, list_of_tensor
    if combined is None:
        return False
    base = combined.data_ptr()
    item = combined.element_size()
    offset = 0
    for t in tensors:
        if t is None or t.device != combined.device or t.dtype != combined.dtype:
            return False
        if t.data_ptr() != base + offset * item or not t.is_contiguous():
            return False
        offset += t.numel()
    return offset == combined.numel()


# Combined gradient buffers shared by everything that combines the same parameters' gradients
# (torch_npu.contrib.amp with combine_grad=True and the NpuFused optimizers), so they agree on one
# buffer instead of re-gathering each other's. Keyed by the parameters' ids; an entry is used only
# while the gradients still live in it.
_GRAD_BUFFERS: "weakref.WeakValueDictionary[tuple, torch.Tensor]" = weakref.WeakValueDictionary()


def combined_grad_buffer(params: List[torch.Tensor]) -> torch.Tensor:
    """One flat buffer holding the gradients of `params` (same device and dtype), with each
    `p.grad` a view into it. Existing gradient values are kept; parameters without a gradient get a
    zero one. Autograd accumulates into these views in place, so the buffer stays valid across
    steps as long as gradients are zeroed in place (`buffer.zero_()`), not set to None."""
    key = tuple(id(p) for p in params)
    flat = _GRAD_BUFFERS.get(key)
    if flat is not None and is_combined_tensor_valid(flat, [p.grad for p in params]):
        return flat
    first = params[0]
    flat = torch.zeros(sum(p.numel() for p in params), dtype=first.dtype, device=first.device)
    offset = 0
    for p in params:
        n = p.numel()
        part = flat[offset:offset + n].view(p.shape)
        if p.grad is not None:
            part.copy_(p.grad)
        p.grad = part
        offset += n
    _GRAD_BUFFERS[key] = flat
    return flat
