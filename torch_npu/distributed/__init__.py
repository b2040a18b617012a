"""torch_npu.distributed: the ``hccl`` backend of torch.distributed for npu tensors.

Importing torch_npu registers it, so that ``init_process_group("hccl")``,
``init_process_group(device_id=torch.device("npu", r))``, ``backend=None`` on a machine with npus,
``"cpu:gloo,npu:hccl"`` and ``init_device_mesh("npu", ...)`` all select it. Collectives run on
PyTorch's Gloo (TCP, so they also work across machines) over zero-copy CPU views of device memory,
on each device's communication stream (docs/distributed.md).
"""

import os
from datetime import timedelta

import torch
import torch.distributed as dist

from torch_npu import _C
from torch_npu.distributed import _ddp, _default_backend, _errors

__all__ = ["is_hccl_available", "ProcessGroupHCCL"]

_DEFAULT_CONNECT_TIMEOUT = timedelta(seconds=120)  # HCCL_CONNECT_TIMEOUT's default


def is_hccl_available() -> bool:
    """True: the hccl backend is built into torch_npu."""
    return True


def _connect_timeout(timeout: timedelta) -> timedelta:
    """How long ranks may take to connect when a group is created (HCCL_CONNECT_TIMEOUT, seconds)."""
    raw = os.environ.get("HCCL_CONNECT_TIMEOUT", "").strip()
    if not raw:
        return min(timeout, _DEFAULT_CONNECT_TIMEOUT)
    try:
        seconds = int(raw)
    except ValueError:
        raise ValueError(f"HCCL_CONNECT_TIMEOUT={raw!r} is not valid: expected a whole number of seconds") from None
    if seconds <= 0:
        raise ValueError(f"HCCL_CONNECT_TIMEOUT={raw!r} is not valid: expected a positive number of seconds")
    return timedelta(seconds=seconds)


def _gloo_device():
    """The network device for the group's Gloo connections: the interface named by GLOO_SOCKET_IFNAME
    (or torch_npu's HCCL_SOCKET_IFNAME), else the address the host name resolves to."""
    ifname = os.environ.get("GLOO_SOCKET_IFNAME") or os.environ.get("HCCL_SOCKET_IFNAME")
    if ifname:
        return dist.ProcessGroupGloo.create_device(interface=ifname.split(",")[0].strip())
    return dist.ProcessGroupGloo.create_default_device()


def _gloo_group(store, rank, size, timeout, device):
    options = dist.ProcessGroupGloo._Options()
    options._devices = [device]
    options._timeout = timeout
    options._threads = 1  # each Gloo group is called from one stream or thread at a time
    return dist.ProcessGroupGloo(store, rank, size, options)


def _create_hccl_backend(backend_options, pg_options):
    """Backend.register_backend's creator (extended API): two Gloo groups under one hccl backend."""
    if pg_options is not None:
        raise TypeError(
            f"the hccl backend takes no pg_options (got {type(pg_options).__name__}); set the timeout with "
            "init_process_group(timeout=...) / new_group(timeout=...)"
        )
    store = backend_options.store
    rank, size = backend_options.group_rank, backend_options.group_size
    timeout = backend_options.timeout
    connect = _connect_timeout(timeout)
    try:
        device = _gloo_device()
        data = _gloo_group(dist.PrefixStore("hccl_data/", store), rank, size, connect, device)
        meta = _gloo_group(dist.PrefixStore("hccl_meta/", store), rank, size, connect, device)
    except (RuntimeError, ValueError) as e:
        raise dist.DistBackendError(
            f"hccl: rank {rank} of process group {backend_options.group_id} could not connect to the other "
            f"{size - 1} rank(s) within {connect.total_seconds():g} s (HCCL_CONNECT_TIMEOUT, capped by timeout=). "
            "Check that every rank creates the group, that MASTER_ADDR / MASTER_PORT are the same everywhere, "
            "and, across machines, that GLOO_SOCKET_IFNAME (or HCCL_SOCKET_IFNAME) names an interface the "
            f"other machines can reach. Transport error: {e}"
        ) from e
    global_ranks = [int(r) for r in backend_options.global_ranks_in_group]
    return ProcessGroupHCCL(store, rank, size, timeout, data, meta, global_ranks)


def _register() -> None:
    _C._distributed._init()
    global ProcessGroupHCCL
    ProcessGroupHCCL = _C._distributed.ProcessGroupHCCL
    if "hccl" not in dist.Backend.backend_list:
        dist.Backend.register_backend("hccl", _create_hccl_backend, extended_api=True, devices=["npu"])
    # torch_npu's names in torch.distributed.
    dist.is_hccl_available = is_hccl_available
    dist.distributed_c10d.is_hccl_available = is_hccl_available
    _errors.install()
    _default_backend.install(ProcessGroupHCCL)
    _ddp.install()


ProcessGroupHCCL = None
if dist.is_available():
    _register()
