"""torch.compile on npu: Dynamo's device interface, Inductor's npu backend and the "npu" backend name.

Registration is lazy, so that `import torch_npu` does not import Dynamo or Inductor:
- Inductor asks the device module for `torch.npu.Scheduling` / `PythonWrapperCodegen` /
  `CppWrapperCodegen` / `WrapperFxCodegen` the first time it compiles (its PrivateUse1 hook); asking
  registers everything here.
- Dynamo has no such hook for its device interface, so it is registered right after
  `torch._dynamo.device_interface` is imported (a one-shot import hook), or at once if it already is.
- `torch.compile(backend="npu")` finds the backend through the `torch_dynamo_backends` entry point.
"""

from __future__ import annotations

from torch_npu.utils._after_import import after_import

_registered_interface = False
_registered = False


def register_device_interface() -> None:
    """Makes npu known to Dynamo (device lookups, torch.npu streams and events in compiled code)."""
    global _registered_interface
    if _registered_interface:
        return
    _registered_interface = True
    from torch._dynamo.device_interface import register_interface_for_device

    from torch_npu import npu
    from torch_npu.dynamo.device_interface import NpuInterface

    register_interface_for_device("npu", NpuInterface)
    for i in range(npu.device_count()):
        register_interface_for_device(f"npu:{i}", NpuInterface)


def register() -> None:
    """Registers npu with Dynamo and Inductor (idempotent)."""
    global _registered
    if _registered:
        return
    register_device_interface()
    from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides

    from torch_npu import _C
    from torch_npu.dynamo import inductor

    register_backend_for_device("npu", inductor.NpuScheduling, inductor.NpuWrapperCodegen,
                                inductor.NpuCppWrapperCodegen)
    register_device_op_overrides("npu", inductor.NpuDeviceOpOverrides())
    # Errors in compiled code name the user's line, not the generated module's.
    _C._add_launch_site_library_prefix(inductor.inductor_cache_dir())
    _registered = True


def inductor_hook(name: str):
    """torch.npu.<name> for Inductor's PrivateUse1 registration hook."""
    register()
    from torch._inductor.codegen.wrapper_fxir import WrapperFxCodegen

    from torch_npu.dynamo import inductor

    return {
        "Scheduling": inductor.NpuScheduling,
        "PythonWrapperCodegen": inductor.NpuWrapperCodegen,
        "CppWrapperCodegen": inductor.NpuCppWrapperCodegen,
        "WrapperFxCodegen": WrapperFxCodegen,
    }[name]


INDUCTOR_HOOK_NAMES = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")

_DYNAMO_INTERFACE_MODULE = "torch._dynamo.device_interface"


def install_lazy_registration() -> None:
    from torch_npu import npu

    npu._provide_attributes(INDUCTOR_HOOK_NAMES, inductor_hook)
    after_import(_DYNAMO_INTERFACE_MODULE, register_device_interface)
