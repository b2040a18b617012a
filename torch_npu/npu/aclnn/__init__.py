"""torch.npu.aclnn: switches of the aclnn operator library, in the style of torch.backends.cudnn.
`allow_hf32` is the convolutions' HF32 switch (the same option as torch.npu.conv.allow_hf32); `flags()`
sets it for a with block."""

import sys
from contextlib import contextmanager

from torch.backends import ContextProp, PropModule, __allow_nonbracketed_mutation

from torch_npu.npu.aclnn.backends import version

__all__ = ["version", "allow_hf32", "flags"]


def _get_allow_hf32() -> bool:
    from torch_npu.npu.npu_config import conv

    return conv.allow_hf32


def _set_allow_hf32(enabled: bool) -> None:
    from torch_npu.npu.npu_config import conv

    conv.allow_hf32 = enabled


@contextmanager
def flags(allow_hf32=None):
    """Sets allow_hf32 inside the with block (None: unchanged), restoring it afterwards."""
    with __allow_nonbracketed_mutation():
        previous = _get_allow_hf32()
        if allow_hf32 is not None:
            _set_allow_hf32(allow_hf32)
    try:
        yield
    finally:
        with __allow_nonbracketed_mutation():
            _set_allow_hf32(previous)


class _AclnnModule(PropModule):
    allow_hf32 = ContextProp(_get_allow_hf32, _set_allow_hf32)


sys.modules[__name__] = _AclnnModule(sys.modules[__name__], __name__)
