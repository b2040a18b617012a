"""Device selection, synchronisation and device properties for npu."""

import atexit
import os
import re
import socket
import uuid
import sys
import time
import warnings

import torch

from torch_npu import _C

# Set by torch_npu.contrib.transfer_to_npu: CUDA code's "cuda" / torch.device("cuda", N) then name npu devices.
_cuda_is_npu = False


def _check_index(index: int, written) -> int:
    """The index if the device exists (-1, "no device", passes); otherwise an error naming what the
    caller wrote: torch.device would wrap 999 to -25 (its index is 8 bits), so check before it."""
    count = _C._device_count()
    if -1 <= index < count:
        return index
    env = os.environ.get("NPU_SIM_DEVICES")
    plural = "device is" if count == 1 else "devices are"
    name = f"npu:{written}" if isinstance(written, int) else written.strip()
    raise RuntimeError(f"{name} does not exist: {count} {plural} configured "
                       f"(NPU_SIM_DEVICES={env if env else 'unset, default 8'}): use an index in [0, {count})")


def _index(dev=None, optional=True) -> int:
    """Device index from an int, 'npu:N', torch.device or None (current device)."""
    if dev is None:
        return _C._current_device()
    if isinstance(dev, str):
        match = re.fullmatch(r"\s*npu\s*:\s*(-?\d+)\s*", dev)
        if match:
            return _check_index(int(match.group(1)), dev)
        dev = torch.device(dev)
    if isinstance(dev, torch.device):
        if dev.type == "cuda" and _cuda_is_npu:
            dev = torch.device("npu", dev.index)
        if dev.type != "npu":
            raise ValueError(f"Expected a npu device, but got {dev} (pass \"npu:N\", torch.device(\"npu\", N) or N)")
        return _C._current_device() if dev.index is None else dev.index
    if isinstance(dev, bool):
        raise TypeError(f"expected a device index, 'npu:N' or torch.device, got {dev!r}")
    if isinstance(dev, int):
        return _check_index(dev, dev)
    raise TypeError(f"expected a device index, 'npu:N' or torch.device, got {type(dev).__name__}")


def is_available() -> bool:
    return _C._device_count() > 0


def is_initialized() -> bool:
    return True


def init() -> None:
    """Initialises the process's device state now rather than at the first device use."""
    _lazy_init()


# Run once before the process's first device use (torch_npu.npu registers the acl.json checks); a
# hook that raises leaves initialisation undone, so the next use raises again.
_first_use_hooks: list = []
_initialized_hooks = False


def _lazy_init() -> None:
    """Called by torch before the first npu tensor is made, and by set_device."""
    global _initialized_hooks
    if _initialized_hooks:
        return
    for hook in _first_use_hooks:
        hook()
    _initialized_hooks = True


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return _C._device_count()


def current_device() -> int:
    return _C._current_device()


def set_device(device) -> None:
    idx = _index(device)
    if idx >= 0:
        _lazy_init()
        _C._set_device(idx)


def synchronize(device=None) -> None:
    """Wait for all work queued on every stream of the device; raises a failed task's error."""
    _C._synchronize(_index(device))
    if _REPORT_FAULTS_AT_SYNC:
        _warn_unmatched_faults()


# NPU_SIM_FAULT_REPORT=sync: synchronize() warns about injected faults with op= that have matched no
# task so far, each once (the runtime reports them at exit in any case; docs/reliability.md).
_REPORT_FAULTS_AT_SYNC = os.environ.get("NPU_SIM_FAULT_REPORT") == "sync"
_warned_faults: set = set()


def _warn_unmatched_faults() -> None:
    lines = _C._unmatched_faults().splitlines()
    faults = [line for line in lines if line.startswith("NPU_SIM_FAULT fault") and line not in _warned_faults]
    if not faults:
        return
    _warned_faults.update(faults)
    hint = [line.strip() for line in lines if not line.startswith("NPU_SIM_FAULT fault")]
    warnings.warn("\n".join(faults + hint), RuntimeWarning, stacklevel=3)


def _drain_at_exit() -> None:
    """Before the interpreter shuts down, let queued device work finish. A stream task that still
    holds tensors would otherwise release them on a worker thread after Python has finalized (an
    abort at exit), and a collective this rank queued last would never reach its peers. A forked
    child drains its own runtime (the parent's work is not there)."""
    for index in range(device_count()):
        try:
            _C._synchronize(index)
        except Exception as e:  # noqa: BLE001 - a failure nobody synchronised for: report, exit normally
            print(f"torch_npu: queued work on npu:{index} failed before exit: {e}", file=sys.stderr)


def _autograd_device_threads() -> list:
    """/proc paths of the autograd engine's device threads (named pt_autograd_<index>)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return []
    found = []
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                if f.read().startswith("pt_autograd_"):
                    found.append(f"/proc/self/task/{task}/stat")
        except OSError:
            continue
    return found


def _all_waiting(stat_paths) -> bool:
    for path in stat_paths:
        try:
            with open(path) as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "S":
                    return False
        except OSError:
            continue  # the thread is gone
    return True


def _settle_autograd_at_exit() -> None:
    """The autograd engine runs npu backward passes on a thread per device, which drops its last
    reference to a finished graph task just after the caller's backward() returns. That reference
    can hold Python objects (the thread-local state the task captured), and releasing them once the
    interpreter has begun finalizing aborts the process. So before exit: one tiny backward through
    each used device's thread (it runs after the thread has finished with earlier tasks), then a
    wait, with the GIL released, until every device thread sleeps in its queue again."""
    threads = _autograd_device_threads()
    if not threads:
        return
    for index in range(device_count()):
        try:
            if torch.npu.memory_stats(index).get("allocation.all.allocated", 0) == 0:
                continue  # never used: its thread ran nothing
            x = torch.zeros((), device=f"npu:{index}", requires_grad=True)
            (x * 1).backward()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        time.sleep(0.001)  # releases the GIL a releasing thread may be waiting for
        if _all_waiting(threads):
            return


def _release_at_exit() -> None:
    """Objects that device tasks kept alive (tensors Python also sees) are released on a thread of
    their own, which takes the GIL to do it. Once the interpreter finalizes, a thread Python does not
    know must not take it: release everything now, and leak what later tasks hand over."""
    try:
        _C._drain_releases(stop=True)
    except Exception:  # noqa: BLE001 - best effort at exit
        pass


# atexit runs the last registered first: the release thread is drained after the device work.
atexit.register(_release_at_exit)
atexit.register(_drain_at_exit)
# atexit runs the last registered first: the backward passes queue work that the drain then waits for.
atexit.register(_settle_autograd_at_exit)


def get_device_status(dev=None) -> str:
    """"ok", or "lost" once an injected device fault (NPU_SIM_FAULT=device_lost:...) took the device:
    every later call on a lost device raises, other devices keep working."""
    return _C._get_device_status(_index(dev))


def get_device_name(device_name=None) -> str:
    """The SoC the device reports: NPU_SIM_SOC_VERSION, default "Ascend910B1"."""
    _C._check_device(_index(device_name))
    return _C._get_soc_name()


class _NPUDeviceProperties:
    """What torch.npu.get_device_properties() returns (name, total_memory, core counts, uuid)."""

    def __init__(self, name, total_memory, cube_core_num, vector_core_num, index=0):
        self.name = name
        self.total_memory = total_memory
        self.cube_core_num = cube_core_num
        self.vector_core_num = vector_core_num
        # A software NPU has no serial number: a UUID fixed by the SoC name, the device's index and the
        # host, the same in every process (what libraries that key caches by device UUID need).
        self.uuid = uuid.uuid5(uuid.NAMESPACE_DNS, f"{socket.gethostname()}/torch_npu/{name}/{index}")

    def __repr__(self):
        return (f"_NPUDeviceProperties(name='{self.name}', total_memory={self.total_memory >> 20}MB, "
                f"cube_core_num={self.cube_core_num}, vector_core_num={self.vector_core_num})")


def get_device_properties(device_name=None) -> _NPUDeviceProperties:
    idx = _index(device_name)
    _C._check_device(idx)
    return _NPUDeviceProperties(*_C._get_device_properties(idx), index=idx)


def get_device_capability(device=None):
    """(major, minor) from TORCH_NPU_DEVICE_CAPABILITY ("8.0"), else None: NPUs have no CUDA-style
    compute capability; the value only serves libraries that ask for one."""
    text = os.environ.get("TORCH_NPU_DEVICE_CAPABILITY", "")
    match = re.fullmatch(r"(\d+)\.(\d+)", text.strip())
    if not match:
        if text:
            warnings.warn(f"TORCH_NPU_DEVICE_CAPABILITY={text!r} is not 'major.minor' (e.g. '8.0'); ignored")
        return None
    return int(match.group(1)), int(match.group(2))


class device:
    """Context manager that makes `device` the current npu device."""

    def __init__(self, device):
        self.idx = _index(device) if device is not None else -1
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = _C._current_device()
            _C._set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.prev_idx >= 0:
            _C._set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of tensor `obj` current (no-op for CPU tensors)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_npu else None)


def can_device_access_peer(device_id, peer_device_id) -> bool:
    """Whether `device_id` can read `peer_device_id`'s memory directly (as torch.cuda answers: False for
    a device and itself). Every software NPU lives in this process's memory, so any two distinct
    devices can."""
    return _index(device_id) != _index(peer_device_id)  # _index names a device that does not exist


def _get_device_index(device, optional: bool = False, allow_cpu: bool = False) -> int:
    """The device index of `device` (an int, "npu:N", torch.device, or None with optional=True: the current
    device), as torch.cuda._get_device_index answers it; a CPU device is -1 when allow_cpu."""
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type == "cpu" and allow_cpu:
            return -1
        if device.type not in ("npu",) and not (device.type == "cuda" and _cuda_is_npu):
            raise ValueError(f"Expected a npu device, but got: {device}")
        if device.index is None:
            if not optional:
                raise ValueError(f"Expected a npu device with a specified index or an integer, but got: {device}")
            return current_device()
        return device.index
    if device is None:
        if not optional:
            raise ValueError("Expected a npu device with a specified index or an integer, but got: None")
        return current_device()
    if isinstance(device, int):
        return device
    raise ValueError(f"Expected a npu device, an index or None, but got: {device!r}")


def utilization(device=None) -> int:
    """Percent (0-100) of the time since the previous call for this device (or since the process started)
    during which the device was running work: at least one of its streams executing a task. torch.cuda
    samples over the driver's last period; here the period is the time between calls."""
    idx = _index(device)
    _C._check_device(idx)
    return _C._utilization(idx)
