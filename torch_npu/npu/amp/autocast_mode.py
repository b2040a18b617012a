"""torch.npu.amp.autocast: torch.autocast fixed to device "npu" (float16 by default, like torch.cuda.amp)."""

import functools

import torch


class autocast(torch.amp.autocast_mode.autocast):
    """`with torch.npu.amp.autocast():` is `with torch.autocast("npu", dtype=torch.float16):`.

    Op policies (which ops run in float16/bfloat16, which in float32, which promote) are registered for
    the AutocastPrivateUse1 dispatch key in csrc/aten/AutocastNpu.cpp.
    """

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True):
        super().__init__("npu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """torch.amp.custom_fwd for custom autograd functions run under npu autocast."""
    if fwd is None:
        return functools.partial(custom_fwd, cast_inputs=cast_inputs)
    return torch.amp.custom_fwd(fwd, device_type="npu", cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """torch.amp.custom_bwd: backward runs with the autocast state of the forward."""
    return torch.amp.custom_bwd(bwd, device_type="npu")
