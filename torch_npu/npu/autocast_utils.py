"""torch.npu's autocast switches (torch_npu's names): whether autocast is on for npu and its dtype, in the
state torch.autocast("npu") and torch.npu.amp.autocast use."""

import torch


def is_autocast_enabled() -> bool:
    """Whether autocast is on for npu on this thread."""
    return torch.is_autocast_enabled("npu")


def set_autocast_enabled(enable: bool) -> None:
    """Turns autocast for npu on or off on this thread (as entering / leaving torch.autocast("npu") does)."""
    if not isinstance(enable, bool):
        raise TypeError(f"set_autocast_enabled takes a bool, got {type(enable).__name__}")
    torch.set_autocast_enabled("npu", enable)


def get_autocast_dtype() -> torch.dtype:
    """The dtype autocast casts to on npu (float16 unless set)."""
    return torch.get_autocast_dtype("npu")


def set_autocast_dtype(dtype: torch.dtype) -> None:
    """Sets the dtype autocast casts to on npu: torch.float16 or torch.bfloat16."""
    if dtype not in (torch.float16, torch.bfloat16):
        raise ValueError(f"npu autocast casts to torch.float16 or torch.bfloat16, got {dtype}")
    torch.set_autocast_dtype("npu", dtype)
