"""Determinism switches as torch_npu has them: a deterministic level for the whole process, and
deterministic algorithms for a section of the model's forward and backward passes."""

import warnings

import torch

__all__ = ["enable_deterministic_with_backward", "disable_deterministic_with_backward", "set_deterministic_level"]

_level = None  # what set_deterministic_level() last set (None: never called)


def set_deterministic_level(level) -> None:
    """Sets how deterministic npu results are: 0 = as fast as possible (deterministic algorithms off),
    1 = the same inputs give bitwise the same results run after run (torch.use_deterministic_algorithms
    (True): ops with a deterministic implementation use it, the others raise, and the software NPU's
    thread teams keep one size). Level 2 (results that do not depend on the batch a row is computed in)
    needs NPU kernels built for it; the software NPU's matmuls are not, so it raises instead of
    answering with level 1's guarantee.

    Like torch_npu, this switches torch.use_deterministic_algorithms to match (with a warning when that
    changes it); do not switch that yourself afterwards."""
    global _level
    if isinstance(level, bool) or not isinstance(level, int):
        raise TypeError(f"set_deterministic_level: level must be an int (0, 1 or 2), got {type(level).__name__}")
    if level == 2:
        raise ValueError("set_deterministic_level(2): batch-invariant results need NPU kernels built for them; "
                         "the software NPU offers levels 0 (off) and 1 (bitwise reproducible run to run)")
    if level not in (0, 1):
        raise ValueError(f"set_deterministic_level: level must be 0, 1 or 2, got {level}")
    enabled = torch.are_deterministic_algorithms_enabled()
    if bool(level) != enabled:
        warnings.warn("The current configuration value of 'torch_npu.npu.set_deterministic_level' conflicts with "
                      f"'torch.use_deterministic_algorithms'. 'torch.use_deterministic_algorithms' has been "
                      f"configured to '{bool(level)}'.")
        torch.use_deterministic_algorithms(bool(level))
    _level = level


def _get_deterministic_level() -> int:
    """The level in force: set_deterministic_level's, unless torch.use_deterministic_algorithms changed
    it since (then 1 when deterministic algorithms are on, else 0)."""
    enabled = torch.are_deterministic_algorithms_enabled()
    if _level is None or bool(_level) != enabled:
        return 1 if enabled else 0
    return _level


class _DeterministicSection(torch.autograd.Function):
    """Identity that switches deterministic algorithms to `forward_state` when the forward pass reaches
    it and to the opposite when the backward pass does (which runs the later ops' gradients first)."""

    @staticmethod
    def forward(ctx, tensor, forward_state):
        ctx.forward_state = forward_state
        torch.use_deterministic_algorithms(forward_state)
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        torch.use_deterministic_algorithms(not ctx.forward_state)
        return grad, None


def enable_deterministic_with_backward(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor`, with deterministic algorithms on from here in the forward pass; the backward pass turns
    them off again once it has computed the gradients of everything after this point."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"enable_deterministic_with_backward takes a tensor, got {type(tensor).__name__}")
    return _DeterministicSection.apply(tensor, True)


def disable_deterministic_with_backward(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor`, with deterministic algorithms off from here in the forward pass; the backward pass turns
    them on again once it has computed the gradients of everything after this point."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"disable_deterministic_with_backward takes a tensor, got {type(tensor).__name__}")
    return _DeterministicSection.apply(tensor, False)
