"""Inductor for the npu device: Inductor's C++ kernel codegen over device memory, a Python wrapper
that launches the kernels on the current npu stream, and the device's wrapper-code snippets.

The kernels are the CPU backend's (vectorised, OpenMP): the software NPU computes on the host and its
memory is host-addressable, so they run over npu tensors' data with no copies. Buffers come from
`empty_strided(..., device="npu")` (the npu caching allocator); extern kernels (mm, conv, ...) and
fallbacks are npu ops, queued on the same stream as the kernels.
"""

from __future__ import annotations

import os
import re
import threading

import torch
from torch._inductor.codegen.common import DeviceOpOverrides
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.virtualized import V

# Set while NpuScheduling defines a kernel, so the wrapper (which may be a subgraph's or a parent's)
# knows the kernel it is writing is an npu kernel and which graph nodes it computes.
_defining = threading.local()

# Marks npu kernel sources, so that a CPU kernel with the same code is never shared with them.
_NPU_KERNEL_MARK = "// torch_npu kernel\n"

_STACK_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _user_frames(fx_node) -> list[tuple[str, int, str]]:
    """(file, line, function) of each frame of an FX node's stack trace, outermost first."""
    trace = fx_node.meta.get("stack_trace") if hasattr(fx_node, "meta") else None
    if not trace:
        return []
    return [(f, int(line), fn) for f, line, fn in _STACK_FRAME.findall(trace)]


def _source_lines(fx_nodes, limit: int = 4) -> str:
    """The user's source lines an npu kernel computes ("model.py:12, model.py:13")."""
    seen = []
    for node in sorted(fx_nodes, key=lambda n: n.name):
        frames = _user_frames(node)
        if frames:
            site = f"{frames[-1][0]}:{frames[-1][1]}"
            if site not in seen:
                seen.append(site)
    seen.sort(key=lambda s: (s.rsplit(":", 1)[0], int(s.rsplit(":", 1)[1])))
    if len(seen) > limit:
        return ", ".join(seen[:limit]) + f" and {len(seen) - limit} more"
    return ", ".join(seen)


def _origins(scheduler_nodes) -> list:
    origins = []
    for snode in scheduler_nodes:
        for node in snode.get_nodes():
            if node.node is not None:
                origins.extend(node.node.get_origins())
    return origins


def graph_label() -> str:
    """How errors name the graph being compiled: the user's function, where it starts, the phase.

    It is written into the generated module, which Inductor's cache shares between identical graphs;
    the npu backend keys that cache on the graph's source lines too (backend.py), so the label and
    the kernels' source lines always describe the code that was compiled."""
    phase = V.graph.get_training_phase() if hasattr(V.graph, "get_training_phase") else ""
    where = ""
    gm = getattr(V.graph, "orig_gm", None) or getattr(V.graph, "module", None)
    if gm is not None:
        for node in gm.graph.nodes:
            frames = _user_frames(node)
            if frames:
                file, line, fn = frames[0]
                where = f" of {fn}() at {file}:{line}"
                break
    return f"compiled graph ({phase}){where}" if phase else f"compiled graph{where}"


def source_key(gm) -> str:
    """The user's source lines of a graph's ops (distinguishes identical graphs written in different places)."""
    sites = set()
    for node in gm.graph.nodes:
        for file, line, fn in _user_frames(node):
            sites.add(f"{file}:{line}:{fn}")
    return ";".join(sorted(sites))


class NpuScheduling(CppScheduling):
    """Inductor's C++ scheduling; its kernels are defined as npu kernels (see kernels.py)."""

    def define_kernel(self, src_code, nodes, kernel_args=None):
        _defining.sources = _source_lines(_origins(nodes))
        try:
            return super().define_kernel(_NPU_KERNEL_MARK + src_code, nodes, kernel_args)
        finally:
            _defining.sources = None


_PYBINDING = "async_compile.cpp_pybinding("


class _NpuWrapperMixin:
    """What npu changes in the Python wrapper: kernel definitions and calls."""

    def define_kernel(self, kernel_name, kernel_body, metadata=None, gpu=True, cpp_definition=None):
        sources = getattr(_defining, "sources", None)
        if sources is not None and kernel_body.startswith(_PYBINDING):
            what = f"compiled kernel {kernel_name}" + (f" (from {sources})" if sources else "")
            kernel_body = f"npu_compile_kernel(async_compile, {what!r}, " + kernel_body[len(_PYBINDING):]
        super().define_kernel(kernel_name, kernel_body, metadata, gpu, cpp_definition)

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, **kwargs):
        device = device or V.graph.get_current_device_or_throw()
        if device.type == "npu":
            # An npu kernel is called like a CPU one; the launcher queues it on the stream.
            device = torch.device("cpu")
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, **kwargs)


class NpuSubgraphWrapperCodegen(_NpuWrapperMixin, SubgraphPythonWrapperCodegen):
    """Wrapper of a subgraph (torch.cond / while_loop bodies) inside an npu graph."""


class NpuWrapperCodegen(_NpuWrapperMixin, PythonWrapperCodegen):
    """The Python wrapper of an npu graph. Its `call` runs inside the graph's context, so that any
    device work it queues that later fails names the compiled graph, and on base formats: inputs in a
    private storage format are converted in place first, and the graph's npu ops return base formats."""

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return NpuSubgraphWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return NpuWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.header.splice(
            """
            from torch_npu.dynamo.kernels import compile_kernel as npu_compile_kernel
            from torch_npu._C import _graph_context as npu_graph_context
            from torch_npu._C import _graph_enter_formats as npu_graph_enter_formats
            from torch_npu._C import _graph_exit_formats as npu_graph_exit_formats
            """,
            strip=True,
        )

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
        line = super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        if device.type == "npu" and device.index is not None:
            # Inductor names only the device type here; a graph is compiled for one device index.
            line = line.replace("device='npu'", f"device='npu:{device.index}'", 1)
        return line

    def generate_end(self, result) -> None:
        super().generate_end(result)
        result.splice(
            f"""

            _npu_graph_call = call
            def call(args):
                previous = npu_graph_context({graph_label()!r})
                formats = npu_graph_enter_formats(args)
                try:
                    return _npu_graph_call(args)
                finally:
                    npu_graph_exit_formats(formats)
                    npu_graph_context(previous)
            """,
            strip=False,
        )


class NpuCppWrapperCodegen:
    """Placeholder for Inductor's C++ wrapper on npu, which torch_npu does not provide."""

    @staticmethod
    def create(*args, **kwargs):
        raise RuntimeError(
            "torch_npu: Inductor's C++ wrapper (cpp_wrapper=True, AOTInductor) is not supported on npu; "
            "compile with the Python wrapper (the default)")


class NpuDeviceOpOverrides(DeviceOpOverrides):
    """Wrapper-code snippets for npu (device guards, synchronisation, raw streams)."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from torch_npu.dynamo.device_interface import get_raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.npu.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.npu.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.npu.device({device_idx})"


def inductor_cache_dir() -> str:
    from torch._inductor.runtime.runtime_utils import cache_dir

    return os.path.realpath(cache_dir())
