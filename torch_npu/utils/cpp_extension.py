"""Build C++ extensions against torch_npu: setuptools (`NpuExtension`) and just-in-time (`load`,
`load_inline`).

Each adds torch_npu's C++ SDK to what torch.utils.cpp_extension already sets up: the include path of
the headers torch_npu users write (``torch_npu/csrc/framework/utils/OpAdapter.h`` for
``EXEC_NPU_CMD`` / ``OpCommand``, ``torch_npu/csrc/core/npu/NPUStream.h`` for
``c10_npu::getCurrentNPUStream()``, ``npu/opslib.h`` / ``aclnn/aclnn_base.h`` for the op library's C
API, ``npu/kernel_launch.h`` for ``ACLRT_LAUNCH_KERNEL``), and the libraries (``libtorch_npu.so``, the
runtime and the op library) with an rpath to them. Before compiling, the sources are checked for
``torch_npu/...`` includes the SDK does not have, which fail fast with the list of what it has.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

import torch.utils.cpp_extension as _torch_cpp_extension
from torch.utils.cpp_extension import BuildExtension  # noqa: F401  (setup.py's cmdclass)

__all__ = ["NpuExtension", "BuildExtension", "load", "load_inline", "include_paths", "library_paths"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SDK_MARKER = os.path.join("torch_npu", "csrc", "framework", "utils", "OpAdapter.h")
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.MULTILINE)


def include_paths() -> list[str]:
    """torch_npu's include directory (the SDK headers); torch's own come from torch.utils.cpp_extension."""
    return [os.path.join(_PACKAGE_DIR, "include")]


def library_paths() -> list[str]:
    """The directory of libtorch_npu.so, libnpu_opslib.so and libnpu_runtime.so."""
    return [os.path.join(_PACKAGE_DIR, "lib")]


def _check_sdk() -> str:
    include_dir = include_paths()[0]
    if not os.path.isfile(os.path.join(include_dir, _SDK_MARKER)):
        raise RuntimeError(
            f"torch_npu's C++ headers are missing: {os.path.join(include_dir, _SDK_MARKER)} does not "
            f"exist (torch_npu is imported from {_PACKAGE_DIR}). Extensions need an installed torch_npu "
            "wheel: reinstall it (`make build` in a source checkout), and import it from outside the "
            "source tree."
        )
    return include_dir


def _sdk_headers(include_dir: str) -> list[str]:
    root = os.path.join(include_dir, "torch_npu")
    found = []
    for dirpath, _, files in os.walk(root):
        for f in files:
            found.append(os.path.relpath(os.path.join(dirpath, f), include_dir))
    return sorted(found)


def _check_includes(text: str, where: str, include_dir: str) -> list[str]:
    """Raises for a `torch_npu/...` include the SDK lacks; returns the quoted includes to follow."""
    local = []
    for match in _INCLUDE_RE.finditer(text):
        header = match.group(1)
        if header.startswith("torch_npu/"):
            if not os.path.isfile(os.path.join(include_dir, header)):
                line = text.count("\n", 0, match.start()) + 1
                available = "\n  ".join(_sdk_headers(include_dir))
                raise RuntimeError(
                    f'{where}:{line}: #include "{header}": torch_npu\'s C++ SDK has no such header '
                    f"(looked in {include_dir}). Its torch_npu headers are:\n  {available}\n"
                    "EXEC_NPU_CMD and OpCommand come from torch_npu/csrc/framework/utils/OpAdapter.h, "
                    "getCurrentNPUStream from torch_npu/csrc/core/npu/NPUStream.h, ACLRT_LAUNCH_KERNEL "
                    "from npu/kernel_launch.h."
                )
        else:
            local.append(header)
    return local


def _check_sources(sources: Iterable[str], include_dir: str) -> None:
    """Checks the sources and the local headers they include (resolved next to the including file)."""
    pending = [os.path.abspath(s) for s in sources]
    seen: set[str] = set()
    while pending:
        path = pending.pop()
        if path in seen or not os.path.isfile(path):
            continue
        seen.add(path)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for header in _check_includes(text, path, include_dir):
            pending.append(os.path.join(os.path.dirname(path), header))


def _link_flags() -> list[str]:
    lib_dir = library_paths()[0]
    return [f"-L{lib_dir}", "-ltorch_npu", "-lnpu_opslib", "-lnpu_runtime", f"-Wl,-rpath,{lib_dir}"]


def NpuExtension(name: str, sources: list[str], *args, **kwargs):
    """A setuptools Extension for a C++ extension using torch_npu (torch's CppExtension plus the SDK).

    Build it with ``cmdclass={"build_ext": BuildExtension}`` (torch's, re-exported here)."""
    include_dir = _check_sdk()
    _check_sources(sources, include_dir)
    kwargs["include_dirs"] = list(kwargs.get("include_dirs", [])) + include_paths()
    kwargs["library_dirs"] = list(kwargs.get("library_dirs", [])) + library_paths()
    kwargs["libraries"] = list(kwargs.get("libraries", [])) + ["torch_npu", "npu_opslib", "npu_runtime"]
    kwargs["runtime_library_dirs"] = list(kwargs.get("runtime_library_dirs", [])) + library_paths()
    return _torch_cpp_extension.CppExtension(name, sources, *args, **kwargs)


def load(name, sources, extra_cflags=None, extra_ldflags=None, extra_include_paths=None, **kwargs):
    """torch.utils.cpp_extension.load with torch_npu's headers and libraries (same arguments)."""
    include_dir = _check_sdk()
    sources = [sources] if isinstance(sources, str) else list(sources)
    _check_sources(sources, include_dir)
    return _torch_cpp_extension.load(
        name,
        sources,
        extra_cflags=extra_cflags,
        extra_ldflags=list(extra_ldflags or []) + _link_flags(),
        extra_include_paths=list(extra_include_paths or []) + include_paths(),
        **kwargs,
    )


def load_inline(name, cpp_sources, extra_cflags=None, extra_ldflags=None, extra_include_paths=None, **kwargs):
    """torch.utils.cpp_extension.load_inline with torch_npu's headers and libraries (same arguments)."""
    include_dir = _check_sdk()
    texts = [cpp_sources] if isinstance(cpp_sources, str) else list(cpp_sources)
    for i, text in enumerate(texts):
        _check_includes(text, f"<cpp_sources[{i}]>", include_dir)
    return _torch_cpp_extension.load_inline(
        name,
        cpp_sources,
        extra_cflags=extra_cflags,
        extra_ldflags=list(extra_ldflags or []) + _link_flags(),
        extra_include_paths=list(extra_include_paths or []) + include_paths(),
        **kwargs,
    )
