"""torch_npu: `npu` as a first-class PyTorch device, backed by the built-in software NPU.

Importing this package (or plain `import torch`, through the `torch.backends` entry point) registers
the device: `torch.device("npu")`, `Tensor.npu()`, `torch.npu.*`.
"""


def _autoload() -> None:
    """Entry point for `torch.backends`: importing the package already registered everything."""


# Defined before `import torch`: when torch_npu is imported first, torch's autoload looks up
# `_autoload` on this partially initialised module.
import sys as _sys  # noqa: E402

import torch  # noqa: E402

try:
    from torch_npu import _C  # noqa: F401  (loading it registers kernels, allocator, guard and hooks)
except ImportError as e:  # pragma: no cover - a source tree shadowing the package, or a broken build
    import os

    _here = os.path.dirname(__file__)
    if any(name.startswith("_C.") for name in os.listdir(_here)):
        raise ImportError(f"torch_npu's native extension in {_here} failed to load: {e}. Rebuild "
                          "with `make build`.") from e
    raise ImportError(
        f"torch_npu's native extension is missing in {_here}: this looks like the "
        "source tree, not the installed package. Run `make build` and run Python outside the source "
        "directory (or set TORCH_DEVICE_BACKEND_AUTOLOAD=0)."
    ) from e

from torch_npu.version import __version__  # noqa: E402,F401


def _register_device() -> None:
    if torch._C._get_privateuse1_backend_name() == "npu":
        return
    torch.utils.rename_privateuse1_backend("npu")
    from torch_npu import npu as _npu_module

    torch._register_device_module("npu", _npu_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_storage=True, for_packed_sequence=True
    )
    from torch_npu.npu import _device_methods

    _device_methods.install()


_register_device()


def _register_custom_ops() -> None:
    """torch_npu.npu_xxx functions and Tensor.npu_xxx methods for the ops of npu_native_functions.yaml."""
    from torch_npu import _op_bindings

    for name in _op_bindings.__all__:
        globals()[name] = getattr(_op_bindings, name)
    _op_bindings.install_tensor_methods()


def copy_memory_(self, src, non_blocking=False):
    """Copy `src` into `self`: both npu tensors of one dtype, on one device, with as many elements."""
    if self.device.type != "npu" or src.device.type != "npu":
        raise RuntimeError(f"copy_memory_ only supports npu tensors, got {self.device} and {src.device}")
    if self.dtype != src.dtype or self.device != src.device or self.numel() != src.numel():
        raise RuntimeError("copy_memory_: tensors must have the same dtype, device and number of elements, "
                           f"got {self.dtype}/{self.device}/{self.numel()} and {src.dtype}/{src.device}/"
                           f"{src.numel()}")
    return self.copy_(src.view(self.shape), non_blocking=non_blocking)


def dropout_with_byte_mask(input1, p=0.5, train=True, inplace=False):
    """Dropout with a one-byte-per-element keep mask (torch_npu.contrib.function.npu_functional's)."""
    from torch_npu.contrib.function.npu_functional import dropout_with_byte_mask as _dropout
    return _dropout(input1, p, train, inplace)


_register_custom_ops()


def _install_dtype_codes() -> None:
    """torch_npu.float16, torch_npu.hifloat8, ... and torch_npu._C._cd.DType (torch_npu/_dtypes.py)."""
    from torch_npu import _dtypes

    _dtypes.install(_sys.modules[__name__])


_install_dtype_codes()

from torch_npu import _formats  # noqa: E402

# Format, get_npu_format, npu_format_cast (with Tensor / dtype arguments), npu_format_cast_,
# get_storage_size; Tensor.npu_format_cast / npu_format_cast_.
_formats.install(_sys.modules[__name__])
from torch_npu.npu.streams import erase_stream  # noqa: E402,F401

from torch_npu import utils  # noqa: E402,F401  (torch_npu.utils.cpp_extension, cmake_prefix_path)


def _install_onnx_support() -> None:
    """npu ops in torch.onnx.export (torch_npu/onnx/): legacy symbolics now, dynamo table at export."""
    from torch_npu.onnx._hook import install

    install()


_install_onnx_support()

from torch_npu import distributed  # noqa: E402  (registers the hccl backend of torch.distributed)
from torch_npu import jit  # noqa: E402,F401  (torch_npu.jit.optimize)


def _install_profiler_support() -> None:
    """torch_npu.profiler, and the npu arguments of torch.autograd.profiler.profile (use_npu=True, ...)."""
    from torch_npu import profiler  # noqa: F401
    from torch_npu.profiler._legacy import install

    install()


_install_profiler_support()


def _install_utils() -> None:
    """torch.utils.dumper, as torch_npu provides it."""
    from torch_npu.utils.dumper import dumper

    torch.utils.dumper = dumper


_install_utils()


def _install_multiprocessing() -> None:
    """npu tensors as torch.multiprocessing arguments and queue items (sent as copies)."""
    from torch_npu.multiprocessing.reductions import install

    install()


_install_multiprocessing()


def _toolkit_environment() -> None:
    """ASCEND_HOME_PATH points at the shipped CANN-shaped toolkit unless set (docs/toolkit.md)."""
    from torch_npu.utils import toolkit

    toolkit._set_environment()


_toolkit_environment()


def _transfer_from_environment() -> None:
    """TORCH_TRANSFER_TO_NPU=1: CUDA code runs on npu without editing it (torch_npu.contrib.transfer_to_npu)."""
    import os

    if os.environ.get("TORCH_TRANSFER_TO_NPU", "0") not in ("", "0"):
        import torch_npu.contrib.transfer_to_npu  # noqa: F401


_transfer_from_environment()


def _sanitizer_from_environment() -> None:
    """TORCH_NPU_SANITIZER=1: the stream-race checker watches the whole program (docs/reliability.md)."""
    from torch_npu.npu import _sanitizer

    _sanitizer._from_env()


_sanitizer_from_environment()


def _register_compile() -> None:
    """torch.compile support, registered lazily (docs/graph_mode.md)."""
    from torch_npu import dynamo

    dynamo.install_lazy_registration()


_register_compile()
