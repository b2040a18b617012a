"""Shared fixtures for the torch_npu test suite.

Run from this directory (``cd tests && ../.venv/bin/python -m pytest -q -p no:cacheprovider .``) so the
source tree's ``torch_npu`` package does not shadow the installed one.
"""

import gc
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_npu  # noqa: F401  (import torch already loads it; make the dependency explicit)

# Variables that change what the software NPU or the plugin loading does; subprocesses start clean.
_CONTROL_VARS = ("NPU_SIM_DEVICES", "NPU_SIM_MEMORY", "NPU_SIM_FALLBACK", "NPU_SIM_SOC_VERSION",
                 "NPU_SIM_CANN_VERSION", "TORCH_DEVICE_BACKEND_AUTOLOAD", "TORCH_TRANSFER_TO_NPU",
                 "PYTORCH_NPU_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "NPU_SIM_FAULT", "NPU_SIM_TASK_TIMEOUT",
                 "NPU_SIM_FAULT_REPORT", "NPU_SIM_HOST_MEMORY", "NPU_SIM_HOST_RESERVE")


# Where this run's torch_npu comes from when it is not the venv's install (make sanitize-adapter's
# instrumented build on PYTHONPATH): children import the same one.
_PACKAGE_ROOT = (os.path.dirname(os.path.dirname(os.path.abspath(torch_npu.__file__)))
                 if "site-packages" not in torch_npu.__file__ else "")


def pytest_configure(config):
    # Ops without an npu kernel warn once per op; the dedicated tests check that in subprocesses.
    config.addinivalue_line("filterwarnings", "ignore:.*is not supported on npu:UserWarning")


def default_env() -> bool:
    """True when the test process runs with the software NPU's default configuration."""
    return not any(v in os.environ for v in _CONTROL_VARS)


def stall_stream(device=None):
    """Queue some tens of milliseconds of work on the current stream of `device` (default: current).

    Work queued right after it waits on the stream, which makes ordering bugs between queued work and
    what the host does next show up reliably instead of by chance. Move host data to the device
    before the stall: a blocking host-to-device copy waits for the stream, as on CUDA. Returns
    nothing: the queued copy keeps its tensors alive.
    """
    dev = torch.device("npu", torch.npu.current_device() if device is None else device)
    src = torch.empty(2048, 2048, device=dev)
    dst = torch.empty(2048, 2048, device=dev)
    for _ in range(3):
        dst.copy_(src.t())  # a strided copy: runs as a host task on the stream


@pytest.fixture
def run_python(tmp_path):
    """Run `code` in a fresh interpreter with extra environment variables.

    The child starts in an empty directory (so `python -c` cannot import the source tree) with the
    control variables removed unless given in `env`. Returns the CompletedProcess; with check=True
    (the default) a non-zero exit fails the test with the child's output.
    """

    def run(code, env=None, check=True, timeout=180):
        child_env = {k: v for k, v in os.environ.items() if k not in _CONTROL_VARS}
        child_env.update(env or {})
        child_env.pop("PYTHONPATH", None)
        if _PACKAGE_ROOT:
            child_env["PYTHONPATH"] = _PACKAGE_ROOT
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            cwd=tmp_path,
            env=child_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check:
            assert proc.returncode == 0, (
                f"child exited with {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
            )
        return proc

    return run


@pytest.fixture(autouse=True)
def _restore_npu_state():
    """Every test starts on npu:0 with the default streams current, and leaves it that way."""
    torch.npu.set_device(0)
    yield
    torch.npu.synchronize()
    for i in range(torch.npu.device_count()):
        torch.npu.set_stream(torch.npu.default_stream(i))
    torch.npu.set_device(0)


@pytest.fixture
def deterministic():
    # Bitwise-equal runs need deterministic algorithms: the stream workers' thread teams then keep one
    # size, so CPU reductions sum in one order whatever the host thread is doing.
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield
    torch.use_deterministic_algorithms(False)


@pytest.fixture
def quiet_allocator():
    """Collect garbage and drain the device so allocator statistics only move with the test's tensors."""
    gc.collect()
    torch.npu.synchronize()
    yield
