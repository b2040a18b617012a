"""The toolkit's library links (stdlib only: set_env.sh runs this file as a script, without torch).

A wheel cannot carry symbolic links, so toolkit/lib64 is made on first use: libascendcl.so,
libopapi.so / libnnopbase.so (the op library under CANN's names) and the libraries they load, each a
link to torch_npu/lib. Where the package directory is read-only, a copy of the toolkit in the user's
cache directory gets the links instead; `ensure()` returns the directory that is complete."""

import hashlib
import os
import shutil
import sys

# lib64 name -> the library in torch_npu/lib it stands for
LIBRARIES = {
    "libascendcl.so": "libascendcl.so",
    "libopapi.so": "libnpu_opslib.so",
    "libnnopbase.so": "libnpu_opslib.so",
    "libnpu_opslib.so": "libnpu_opslib.so",
    "libnpu_runtime.so": "libnpu_runtime.so",
}


def _package_dir() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _complete(home: str) -> bool:
    return all(os.path.exists(os.path.join(home, "lib64", name)) for name in LIBRARIES)


def _link(home: str, lib_dir: str, relative: bool) -> None:
    lib64 = os.path.join(home, "lib64")
    os.makedirs(lib64, exist_ok=True)
    for name, target in LIBRARIES.items():
        path = os.path.join(lib64, name)
        if os.path.exists(path):
            continue
        source = os.path.relpath(os.path.join(lib_dir, target), lib64) if relative else os.path.join(lib_dir, target)
        # Concurrent imports (one per rank) may race: each makes its own link and renames it in place.
        temp = f"{path}.{os.getpid()}.tmp"
        os.symlink(source, temp)
        os.replace(temp, path)


def ensure():
    """The toolkit directory with its lib64 links, or None when the package has no toolkit."""
    package = _package_dir()
    home = os.path.join(package, "toolkit")
    lib_dir = os.path.join(package, "lib")
    if not os.path.isdir(home) or not os.path.exists(os.path.join(lib_dir, "libascendcl.so")):
        return None  # the source tree, not an installed package
    if _complete(home):
        return home
    try:
        _link(home, lib_dir, relative=True)
        return home
    except OSError:
        pass
    cache_root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    tag = hashlib.sha256(home.encode()).hexdigest()[:12]
    cache = os.path.join(cache_root, "torch_npu", f"toolkit-{tag}")
    if not _complete(cache):
        shutil.copytree(home, cache, ignore=shutil.ignore_patterns("lib64"), dirs_exist_ok=True)
        _link(cache, lib_dir, relative=False)
    return cache


if __name__ == "__main__":
    print(ensure() or "")
