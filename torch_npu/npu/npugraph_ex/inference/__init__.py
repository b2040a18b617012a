"""Compiled inference functions whose compilation is cached on disk across processes.

`cache_compile(func)` compiles `func` with the npugraph_ex backend. The first process to compile it
saves the compile artifacts (Inductor's kernels and graphs: torch.compiler.save_cache_artifacts) to
`cache_dir`, one file per function and rank; later processes load them before compiling, so the
compile reuses them instead of generating code again. `readable_cache(path)` describes such a file.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import sys

import torch

__all__ = ["cache_compile", "readable_cache"]


def _cache_path(func, cache_dir, global_rank, tp_rank, pp_rank) -> str:
    name = getattr(func, "__qualname__", type(func).__name__)
    where = getattr(getattr(func, "__code__", None), "co_filename", "")
    key = hashlib.sha256(f"{where}:{name}".encode()).hexdigest()[:16]
    ranks = "".join(f"_{tag}{r}" for tag, r in (("g", global_rank), ("tp", tp_rank), ("pp", pp_rank)) if r is not None)
    return os.path.join(cache_dir, f"{name.replace('.', '_').replace('<', '').replace('>', '')}_{key}{ranks}.bin")


def cache_compile(func, *, dynamic: bool = True, cache_dir=None, global_rank=None, tp_rank=None, pp_rank=None,
                  **kwargs):
    """`func` compiled with the npugraph_ex backend (keyword arguments are its options), its compile
    cached in `cache_dir` (default: ./.npugraph_ex_cache) per function and rank."""
    from torch_npu.npu.npugraph_ex._backend import compile_fx

    cache_dir = cache_dir or os.path.join(os.getcwd(), ".npugraph_ex_cache")
    path = _cache_path(func, cache_dir, global_rank, tp_rank, pp_rank)
    backend = functools.partial(compile_fx, options=kwargs or None)
    compiled = torch.compile(func, backend=backend, dynamic=dynamic)
    state = {"loaded": False, "saved": False}

    @functools.wraps(func)
    def run(*args, **call_kwargs):
        if not state["loaded"]:
            state["loaded"] = True
            if os.path.exists(path):
                with open(path, "rb") as f:
                    torch.compiler.load_cache_artifacts(f.read())
        out = compiled(*args, **call_kwargs)
        if not state["saved"]:
            state["saved"] = True
            saved = torch.compiler.save_cache_artifacts()
            if saved is not None:
                os.makedirs(cache_dir, exist_ok=True)
                tmp = f"{path}.tmp{os.getpid()}"
                with open(tmp, "wb") as f:
                    f.write(saved[0])
                os.replace(tmp, path)
        return out

    run.cache_path = path
    return run


def readable_cache(cache_bin, print_output=True, file=None):
    """A text description of a cache file written by cache_compile: its size and the artifacts it
    holds, by kind. Printed (to `file`, default stdout) when `print_output`; returned either way."""
    with open(cache_bin, "rb") as f:
        data = f.read()
    from torch.compiler._cache import CacheArtifactManager

    lines = [f"{cache_bin}: {len(data)} bytes"]
    try:
        artifacts = CacheArtifactManager.deserialize(data)
    except Exception as e:  # noqa: BLE001  (a file that is not a cache: say so)
        raise ValueError(f"{cache_bin} is not an npugraph_ex compile cache: {e}") from e
    if isinstance(artifacts, dict):
        for kind, items in sorted(artifacts.items()):
            items = list(items)
            lines.append(f"  {kind}: {len(items)} artifact(s)")
            for item in items:
                key = getattr(item, "key", "")
                content = getattr(item, "content", b"")
                lines.append(f"    {key} ({len(content) if hasattr(content, '__len__') else '?'} bytes)")
    text = "\n".join(lines)
    if print_output:
        print(text, file=file if file is not None else sys.stdout)
    return text
