"""The Gloo groups an hccl group runs over: which interface they use, how long ranks may take to connect,
and the pair (data, metadata) every ProcessGroupHCCL is made of."""

import os
from datetime import timedelta

import torch.distributed as dist

_DEFAULT_CONNECT_TIMEOUT = timedelta(seconds=120)  # HCCL_CONNECT_TIMEOUT's default


def connect_timeout(timeout: timedelta) -> timedelta:
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


def connect(store, rank: int, size: int, timeout: timedelta, group_id: str):
    """The (data, metadata) Gloo groups of one hccl group over `store`; every rank of the group makes
    them at the same time. Raises DistBackendError saying what to check when the ranks cannot meet."""
    wait = connect_timeout(timeout)
    try:
        device = _gloo_device()
        data = _gloo_group(dist.PrefixStore("hccl_data/", store), rank, size, wait, device)
        meta = _gloo_group(dist.PrefixStore("hccl_meta/", store), rank, size, wait, device)
    except (RuntimeError, ValueError) as e:
        raise dist.DistBackendError(
            f"hccl: rank {rank} of process group {group_id} could not connect to the other "
            f"{size - 1} rank(s) within {wait.total_seconds():g} s (HCCL_CONNECT_TIMEOUT, capped by timeout=). "
            "Check that every rank creates the group, that MASTER_ADDR / MASTER_PORT are the same everywhere, "
            "and, across machines, that GLOO_SOCKET_IFNAME (or HCCL_SOCKET_IFNAME) names an interface the "
            f"other machines can reach. Transport error: {e}"
        ) from e
    return data, meta
