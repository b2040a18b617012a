"""Inductor's C++ kernels as npu kernels: compiled like CPU kernels, launched in stream order.

Inductor writes each kernel as `extern "C" void kernel(...)` over raw pointers. torch_npu compiles the
same source (Inductor's code cache, so the cache and its compile flags are shared with the CPU
backend) with one more entry point, `npu_kernel_entry`, that takes the arguments as 64-bit slots and
reports a C++ exception as a message instead of letting it escape. `torch_npu._C._CompiledKernel`
calls that entry from a host task on the current npu stream: a kernel call returns as soon as it is
queued, like an eager op, and a failure surfaces at the next synchronisation naming the kernel, its
source lines, the compiled graph and the user's line.

A kernel that can fail (Inductor emits `TORCH_CHECK` for out-of-range indices) runs without OpenMP:
an exception cannot leave an OpenMP region (the process would abort), and these kernels are rare
(gathers and scatters with data-dependent indices).
"""

from __future__ import annotations

import ctypes
import re

from torch._inductor.codecache import CppPythonBindingsCodeCache, LambdaFuture

from torch_npu import _C

_ENTRY = "npu_kernel_entry"

_SUFFIX = """
// torch_npu: the kernel's arguments as 64-bit slots; C++ exceptions become an error message.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
static inline double npu_slot_double(uint64_t bits) {{ double d; std::memcpy(&d, &bits, sizeof d); return d; }}
extern "C" __attribute__((visibility("default"))) int {entry}(const uint64_t* a, char* error, uint64_t error_size) {{
  try {{
    kernel({args});
    return 0;
  }} catch (const std::exception& e) {{
    std::snprintf(error, error_size, "%s", e.what());
  }} catch (...) {{
    std::snprintf(error, error_size, "unknown C++ exception");
  }}
  return 1;
}}
"""

_OMP_PRAGMA = re.compile(r"^[ \t]*#pragma omp\b.*$", re.MULTILINE)


def _slot(i: int, argtype: str) -> tuple[str, str]:
    """(argument expression, kind letter) for the i-th kernel argument of C++ type `argtype`."""
    if "*" in argtype:
        return f"reinterpret_cast<{argtype}>(a[{i}])", "p"
    base = argtype.replace("const ", "").strip()
    if base in ("float", "double"):
        return f"static_cast<{base}>(npu_slot_double(a[{i}]))", "f"
    return f"static_cast<{base}>(a[{i}])", "i"


def _can_throw(source: str) -> bool:
    return "TORCH_CHECK(" in source


def npu_source(source: str) -> str:
    """The kernel source as compiled for npu: OpenMP removed from kernels that can throw."""
    if _can_throw(source):
        source = _OMP_PRAGMA.sub("", source)
    return source


class NpuKernelCodeCache(CppPythonBindingsCodeCache):
    """Inductor's C++ code cache, loading the library with ctypes and adding the npu entry point."""

    cache: dict = {}

    @staticmethod
    def cache_clear() -> None:
        NpuKernelCodeCache.cache.clear()

    @staticmethod
    def _load_library_inner(path: str, key: str):
        return ctypes.cdll.LoadLibrary(path)

    @classmethod
    def load_kernel_async(cls, argtypes: list[str], source: str, what: str, submit_fn=None):
        """A callable that waits for the compile and returns the kernel's launcher."""
        slots = [_slot(i, t) for i, t in enumerate(argtypes)]
        suffix = _SUFFIX.format(entry=_ENTRY, args=", ".join(expr for expr, _ in slots))
        kinds = "".join(kind for _, kind in slots)
        get_library = cls.load_async(npu_source(source) + suffix, "cpu", submit_fn=submit_fn)

        def launcher():
            from torch_npu.dynamo.backend import compile_stats

            library = get_library()
            compile_stats.kernels += 1
            entry = ctypes.cast(getattr(library, _ENTRY), ctypes.c_void_p).value
            return _C._CompiledKernel(entry, kinds, what, library)

        return launcher


def compile_kernel(async_compile, what: str, argtypes: list[str], source: str):
    """Used by the generated wrapper module: the kernel's launcher, or a future of it when Inductor
    compiles in parallel (its `async_compile.wait(globals())` resolves the future)."""
    from torch._inductor.async_compile import get_compile_threads

    if get_compile_threads() <= 1:
        return NpuKernelCodeCache.load_kernel_async(argtypes, source, what)()
    launcher = NpuKernelCodeCache.load_kernel_async(argtypes, source, what, submit_fn=async_compile.submit)
    return LambdaFuture(launcher)
