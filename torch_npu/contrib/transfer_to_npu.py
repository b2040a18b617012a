"""CUDA code runs unchanged on npu: importing this module points torch.cuda, "cuda" devices, nccl and the CUDA
profiler activity at npu. `TORCH_TRANSFER_TO_NPU=1` before `import torch` does the same.

    import torch
    import torch_npu.contrib.transfer_to_npu   # prints once what it patched
    model = Net().cuda()                        # an npu model
    ...
    torch_npu.contrib.transfer_to_npu.undo()    # everything back as it was (tests)

Unlike a wholesale swap of torch.cuda, the `torch.cuda` module object stays in place: only its names that
have an npu counterpart are pointed at torch.npu, so `torch.cuda.nvtx`, `torch.version.cuda`, `torch.backends.cudnn`
and the rest that libraries inspect keep their true answers. torch.jit.script keeps working (the wrapped
factories are registered as the TorchScript builtins they wrap). Import it right after `import torch`: names
bound before (`from torch import zeros`) keep their CUDA meaning. Source-level conversion of a script is
`python -m torch_npu.tools.transplt` (docs/migration.md).
"""

from __future__ import annotations

import os
import sys

import torch

import torch_npu.npu as _npu
from torch_npu.contrib import _transfer_devices as _dev

# The module (torch_npu.npu.device is the device class): _index() reads its _cuda_is_npu flag.
_npu_device_module = sys.modules["torch_npu.npu.device"]

__all__ = ["apply", "undo", "is_applied"]


class _Patches:
    """Attribute replacements remembered so that undo() restores exactly what was there."""

    def __init__(self):
        self._saved: list[tuple[object, str, bool, object]] = []
        self._jit_ids: list[int] = []
        self.summary: dict[str, list[str]] = {}

    def set(self, owner, name: str, value, area: str, label: str | None = None) -> None:
        own = name in vars(owner)
        self._saved.append((owner, name, own, vars(owner)[name] if own else None))
        setattr(owner, name, value)
        self.summary.setdefault(area, []).append(label or name)

    def wrap(self, owner, name: str, area: str, wrapper, label: str | None = None) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        new = wrapper(original)
        self.set(owner, name, new, area, label)
        self._keep_scriptable(original, new)

    def _keep_scriptable(self, original, new) -> None:
        # TorchScript resolves torch.xxx calls by the function object's id; the wrapper compiles to the same op.
        from torch.jit import _builtins

        op = _builtins._find_builtin(original)
        if op is not None:
            _builtins._register_builtin(new, op)
            self._jit_ids.append(id(new))

    def restore(self) -> None:
        from torch.jit import _builtins

        for owner, name, own, old in reversed(self._saved):
            if own:
                setattr(owner, name, old)
            else:
                delattr(owner, name)
        table = _builtins._get_builtin_table()
        for i in self._jit_ids:
            table.pop(i, None)
        self._saved.clear()
        self._jit_ids.clear()
        self.summary.clear()


_patches: _Patches | None = None
_printed = False


def is_applied() -> bool:
    return _patches is not None


def _patch_cuda_namespace(p: _Patches) -> None:
    """torch.cuda.<name> -> torch.npu.<name> for every name both have (and the same in torch.cuda's submodules
    that scripts import from: amp, random, memory, streams)."""
    import torch.cuda.amp  # noqa: F401
    import torch.cuda.memory  # noqa: F401
    import torch.cuda.random  # noqa: F401
    import torch.cuda.streams  # noqa: F401

    npu = _npu
    extra = ["_lazy_init", "_is_in_bad_fork", "get_device_properties"]
    for cuda_mod, npu_mod in ((torch.cuda, npu), (torch.cuda.random, npu), (torch.cuda.memory, npu),
                              (torch.cuda.streams, npu), (torch.cuda.amp, npu.amp)):
        names = [n for n in list(npu_mod.__all__) + extra if hasattr(npu_mod, n) and n in vars(cuda_mod)]
        for name in names:
            if callable(getattr(npu_mod, name)):
                label = f"{cuda_mod.__name__}.{name}" if cuda_mod is not torch.cuda else name
                p.set(cuda_mod, name, getattr(npu_mod, name), "torch.cuda", label)
    # Not functions, so not covered above: the generators of each device.
    p.set(torch.cuda, "default_generators", npu.default_generators, "torch.cuda", "default_generators")
    _npu_device_module._cuda_is_npu = True


def _patch_methods(p: _Patches) -> None:
    from torch.nn.utils.rnn import PackedSequence

    p.set(torch.Tensor, "cuda", torch.Tensor.npu, "methods", "Tensor.cuda")
    p.set(torch.Tensor, "is_cuda", torch.Tensor.is_npu, "methods", "Tensor.is_cuda")
    p.set(torch.nn.Module, "cuda", torch.nn.Module.npu, "methods", "Module.cuda")
    for storage in (torch.UntypedStorage, torch.TypedStorage):
        if hasattr(storage, "npu"):
            p.set(storage, "cuda", storage.npu, "methods", f"{storage.__name__}.cuda")
    if hasattr(PackedSequence, "npu"):
        p.set(PackedSequence, "cuda", PackedSequence.npu, "methods", "PackedSequence.cuda")
        p.set(PackedSequence, "is_cuda", PackedSequence.is_npu, "methods", "PackedSequence.is_cuda")


def _patch_device_arguments(p: _Patches) -> None:
    from torch.utils._device import _device_constructors

    factories = sorted({f.__name__ for f in _device_constructors() if getattr(torch, f.__name__, None) is f} |
                       {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
                        "randint_like", "set_default_device"})
    for name in factories:
        p.wrap(torch, name, "devices", _dev.mapping_device_kwargs, f"torch.{name}")
    p.wrap(torch, "load", "devices", _dev.mapping_map_location, "torch.load(map_location)")
    for name in ("fftfreq", "rfftfreq"):
        p.wrap(torch.fft, name, "devices", _dev.mapping_device_kwargs, f"torch.fft.{name}")
    p.wrap(torch, "get_device_module", "devices", _dev.mapping_device_kwargs, "torch.get_device_module")
    # `with torch.device("cuda"):` makes that device the default inside the block.
    from torch.utils import _device as torch_device_context

    p.wrap(torch_device_context.DeviceContext, "__init__", "devices", _dev.mapping_device_kwargs,
           'with torch.device("cuda")')
    for name in ("Generator", "Event"):
        if hasattr(torch, name):
            p.set(torch, name, _dev.mapping_class(getattr(torch, name)), "devices", f'torch.{name}("cuda")')
    for name in ("new_empty", "new_empty_strided", "new_full", "new_ones", "new_tensor", "new_zeros"):
        p.wrap(torch.Tensor, name, "devices", _dev.mapping_device_kwargs, f"Tensor.{name}")
    p.wrap(torch.Tensor, "to", "devices", _dev.mapping_to, "Tensor.to")
    p.wrap(torch.nn.Module, "to", "devices", _dev.mapping_to, "Module.to")
    p.wrap(torch.nn.Module, "to_empty", "devices", _dev.mapping_device_kwargs, "Module.to_empty")
    p.wrap(torch.utils.data.DataLoader, "__init__", "devices", _dev.mapping_device_kwargs,
           "DataLoader(pin_memory_device)")
    # Autocast and GradScaler: "cuda" given or defaulted (torch.amp.GradScaler()'s device is "cuda").
    p.wrap(torch.amp.autocast_mode.autocast, "__init__", "amp", _dev.mapping_bound("device_type"),
           'torch.autocast("cuda")')
    p.wrap(torch.amp.GradScaler, "__init__", "amp", _dev.mapping_bound("device"), 'torch.amp.GradScaler("cuda")')


def _patch_distributed(p: _Patches) -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return
    import torch.distributed.device_mesh as device_mesh
    from torch.nn.parallel import DistributedDataParallel

    for name in ("init_process_group", "new_group"):
        p.wrap(dist, name, "distributed", _dev.mapping_backend, name)
        if name in vars(dist.distributed_c10d):
            p.wrap(dist.distributed_c10d, name, "distributed", _dev.mapping_backend, f"distributed_c10d.{name}")
    original_new = dist.Backend.__new__
    p.set(dist.Backend, "__new__", staticmethod(lambda cls, name: original_new(cls, _dev.backend_name(name))),
          "distributed", "Backend")
    from torch_npu.distributed import ProcessGroupHCCL

    # ProcessGroupNCCL (and its Options) as scripts import it from either module.
    p.set(dist, "ProcessGroupNCCL", ProcessGroupHCCL, "distributed", "ProcessGroupNCCL")
    p.set(dist.distributed_c10d, "ProcessGroupNCCL", ProcessGroupHCCL, "distributed", "distributed_c10d.ProcessGroupNCCL")
    hccl_available = getattr(dist, "is_hccl_available", None)
    if hccl_available is not None:
        p.set(dist, "is_nccl_available", hccl_available, "distributed", "is_nccl_available")
    p.wrap(DistributedDataParallel, "__init__", "distributed", _dev.mapping_device_kwargs, "DDP(device_ids)")
    if hasattr(device_mesh, "init_device_mesh"):
        wrapped = _dev.mapping_bound("device_type")
        p.wrap(device_mesh, "init_device_mesh", "distributed", wrapped, 'init_device_mesh("cuda")')
        if "init_device_mesh" in vars(dist):
            p.set(dist, "init_device_mesh", device_mesh.init_device_mesh, "distributed", "dist.init_device_mesh")


def _patch_profiler(p: _Patches) -> None:
    import torch.autograd.profiler
    import torch.profiler

    p.wrap(torch.profiler.profile, "__init__", "profiler", _dev.mapping_activities, "ProfilerActivity.CUDA")
    p.wrap(torch.autograd.profiler.profile, "__init__", "profiler", _dev.mapping_use_cuda, "profile(use_cuda=True)")


def _report(p: _Patches) -> str:
    s = p.summary
    factories = sum(n.startswith("torch.") and "load" not in n for n in s.get("devices", []))
    lines = ["torch_npu.contrib.transfer_to_npu: CUDA code runs on npu",
             f"  torch.cuda.* -> torch.npu.* ({len(s.get('torch.cuda', []))} names; torch.cuda.nvtx, "
             "torch.backends.cudnn and torch.version.cuda are left as they are)",
             "  Tensor.cuda / is_cuda, Module.cuda, storage .cuda() -> npu",
             f"  \"cuda\" devices -> npu in {factories} tensor factories, Tensor.to / new_*, Module.to, torch.load, "
             "DataLoader, torch.autocast, torch.amp.GradScaler"]
    if s.get("distributed"):
        lines.append("  nccl -> hccl in init_process_group / new_group / Backend; DDP device_ids, "
                     "init_device_mesh(\"cuda\") -> npu")
    lines.append("  profiler: ProfilerActivity.CUDA and use_cuda=True record npu activity")
    lines.append("  torch.jit.script keeps working; torch_npu.contrib.transfer_to_npu.undo() reverts all of this")
    return "\n".join(lines)


def apply(verbose: bool = True) -> None:
    """Patch torch for CUDA code (idempotent). Prints what it patched the first time (rank 0 only)."""
    global _patches, _printed
    if _patches is not None:
        return
    p = _Patches()
    try:
        _patch_cuda_namespace(p)
        _patch_methods(p)
        _patch_device_arguments(p)
        _patch_distributed(p)
        _patch_profiler(p)
    except BaseException:
        p.restore()
        _npu_device_module._cuda_is_npu = False
        raise
    _patches = p
    if verbose and not _printed and os.environ.get("RANK", "0") == "0":
        print(_report(p), file=sys.stderr)
    _printed = True


def undo() -> None:
    """Put back everything apply() changed."""
    global _patches
    if _patches is None:
        return
    _patches.restore()
    _npu_device_module._cuda_is_npu = False
    _patches = None


apply()
