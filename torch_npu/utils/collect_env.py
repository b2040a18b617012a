"""torch_npu.utils.collect_env: the environment report to attach to a bug report (PyTorch's, plus
torch_npu, CANN and the npu devices). Run it as `python -m torch_npu.utils.collect_env`."""

import sys
from collections import namedtuple

import torch
from torch.utils import collect_env as _torch_env

__all__ = ["SystemEnv", "get_env_info", "get_pretty_env_info", "pretty_str", "get_cann_version",
           "get_torch_npu_version", "main"]

SystemEnv = namedtuple("SystemEnv", [
    "torch_version", "torch_npu_version", "is_debug_build", "gcc_version", "clang_version", "cmake_version", "os",
    "libc_version", "python_version", "python_platform", "pip_version", "pip_packages", "conda_packages",
    "caching_allocator_config", "is_xnnpack_available", "cpu_info", "cann_version", "npu_info",
])

_FORMAT = """
PyTorch version: {torch_version}
Torch-npu version: {torch_npu_version}
Is debug build: {is_debug_build}
OS: {os}
GCC version: {gcc_version}
Clang version: {clang_version}
CMake version: {cmake_version}
Libc version: {libc_version}

Python version: {python_version}
Python platform: {python_platform}
Is XNNPACK available: {is_xnnpack_available}
NPU caching allocator config: {caching_allocator_config}

CPU:
{cpu_info}

CANN:
{cann_version}

NPU:
{npu_info}

Versions of relevant libraries:
{pip_packages}
{conda_packages}
""".strip()


def get_torch_npu_version() -> str:
    try:
        from torch_npu.version import __version__
    except ImportError:
        return "N/A"
    return __version__


def get_cann_version() -> str:
    """The CANN version torch_npu reports (the toolkit it runs against), or "not known"."""
    try:
        from torch_npu.npu.utils import get_cann_version as cann
    except ImportError:
        return "not known"
    return cann() or "not known"


def _npu_info() -> str:
    try:
        if not torch.npu.is_available():
            return "no npu available"
        lines = [f"device count: {torch.npu.device_count()} (the software NPU: devices computed on this host)"]
        for i in range(torch.npu.device_count()):
            p = torch.npu.get_device_properties(i)
            lines.append(f"npu:{i}: {p.name}, {p.total_memory // 2 ** 20} MiB, {p.cube_core_num} cube / "
                         f"{p.vector_core_num} vector cores")
        return "\n".join(lines)
    except (AttributeError, RuntimeError) as e:
        return f"not known ({e})"


def _allocator_config() -> str:
    import os

    return os.environ.get("PYTORCH_NPU_ALLOC_CONF", "")


def get_env_info() -> SystemEnv:
    run = _torch_env.run
    pip_version, pip_packages = _torch_env.get_pip_packages(run, ["torch", "numpy", "mypy", "flake8", "onnx",
                                                                  "transformers", "accelerate", "deepspeed", "apex"])
    return SystemEnv(
        torch_version=torch.__version__,
        torch_npu_version=get_torch_npu_version(),
        is_debug_build=str(torch.version.debug),
        gcc_version=_torch_env.get_gcc_version(run),
        clang_version=_torch_env.get_clang_version(run),
        cmake_version=_torch_env.get_cmake_version(run),
        os=_torch_env.get_os(run),
        libc_version=_torch_env.get_libc_version(),
        python_version=f"{sys.version.replace(chr(10), ' ')} ({sys.maxsize.bit_length() + 1}-bit runtime)",
        python_platform=_torch_env.get_python_platform(),
        pip_version=pip_version,
        pip_packages=pip_packages,
        conda_packages=_torch_env.get_conda_packages(run),
        caching_allocator_config=_allocator_config(),
        is_xnnpack_available=str(torch.backends.xnnpack.enabled) if hasattr(torch.backends, "xnnpack") else "not known",
        cpu_info=_torch_env.get_cpu_info(run),
        cann_version=get_cann_version(),
        npu_info=_npu_info(),
    )


def pretty_str(envinfo: SystemEnv) -> str:
    fields = envinfo._asdict()
    for key, value in fields.items():
        if value is None:
            fields[key] = "Could not collect"
    prefix = lambda tag, text: "\n".join(f"[{tag}] {line}" for line in text.splitlines()) if text else ""  # noqa: E731
    fields["pip_packages"] = prefix(fields["pip_version"], envinfo.pip_packages or "")
    fields["conda_packages"] = prefix("conda", envinfo.conda_packages or "")
    return _FORMAT.format(**fields)


def get_pretty_env_info() -> str:
    return pretty_str(get_env_info())


def main() -> None:
    print("Collecting environment information...")
    print(get_pretty_env_info())


if __name__ == "__main__":
    main()
