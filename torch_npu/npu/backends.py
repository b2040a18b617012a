"""torch.npu's backend switches as torch_npu has them: scaled_dot_product_attention's backend flags (the
process-wide flags torch.backends.cuda sets) and the linear-algebra library (determinism switches are
in torch_npu.npu.deterministic)."""

import contextlib

import torch

__all__ = ["enable_flash_sdp", "flash_sdp_enabled", "enable_mem_efficient_sdp", "mem_efficient_sdp_enabled",
           "enable_math_sdp", "math_sdp_enabled", "sdp_kernel", "preferred_linalg_library"]


def enable_flash_sdp(enabled: bool) -> None:
    """Allows or forbids the flash-attention backend of scaled_dot_product_attention."""
    torch.backends.cuda.enable_flash_sdp(enabled)


def flash_sdp_enabled() -> bool:
    return torch.backends.cuda.flash_sdp_enabled()


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Allows or forbids the memory-efficient backend of scaled_dot_product_attention."""
    torch.backends.cuda.enable_mem_efficient_sdp(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return torch.backends.cuda.mem_efficient_sdp_enabled()


def enable_math_sdp(enabled: bool) -> None:
    """Allows or forbids the math (reference) backend of scaled_dot_product_attention."""
    torch.backends.cuda.enable_math_sdp(enabled)


def math_sdp_enabled() -> bool:
    return torch.backends.cuda.math_sdp_enabled()


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True, enable_mem_efficient: bool = True):
    """Sets the three backend flags inside a with block, restoring them afterwards (calling it without
    entering changes nothing)."""
    previous = (flash_sdp_enabled(), math_sdp_enabled(), mem_efficient_sdp_enabled())
    enable_flash_sdp(enable_flash)
    enable_math_sdp(enable_math)
    enable_mem_efficient_sdp(enable_mem_efficient)
    try:
        yield
    finally:
        enable_flash_sdp(previous[0])
        enable_math_sdp(previous[1])
        enable_mem_efficient_sdp(previous[2])


def preferred_linalg_library(backend=None):
    """The linear-algebra library npu ops use. There is one (the op library's), so any choice answers
    torch._C._LinalgBackend.Default, as torch_npu does."""
    if backend is not None and not isinstance(backend, (str, torch._C._LinalgBackend)):
        raise TypeError(f"preferred_linalg_library takes a str or torch._C._LinalgBackend, got {backend!r}")
    return torch._C._LinalgBackend.Default
