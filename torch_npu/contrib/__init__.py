"""torch_npu.contrib: add-ons ported from the Ascend ecosystem (apex-style amp, device-friendly functions and
modules); the functions and modules are also names of this package, as torch_npu has them."""

from torch_npu.contrib.function import *  # noqa: F401,F403
from torch_npu.contrib.function import __all__ as _function_names
from torch_npu.contrib.module import *  # noqa: F401,F403
from torch_npu.contrib.module import __all__ as _module_names
from torch_npu.contrib.module import BiLSTM  # noqa: F401  (deprecated, not in __all__)

__all__ = list(_function_names) + list(_module_names)
