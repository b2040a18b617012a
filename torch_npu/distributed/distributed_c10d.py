"""torch_npu.distributed.distributed_c10d: the hccl backend's group-level functions (upstream's module
path): is_hccl_available, and reinit_process_group to bring a group back after a communication failure."""

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as _c10d

from torch_npu.distributed import _gloo

__all__ = ["is_hccl_available", "reinit_process_group"]

_rebuilds = {}  # group name -> how many times it was rebuilt


def is_hccl_available() -> bool:
    """True: the hccl backend is built into torch_npu."""
    return True


def _hccl_backend(group):
    """The hccl backend of `group` (a ProcessGroup), or None when its npu work runs on another backend."""
    try:
        backend = group._get_backend(torch.device("npu"))
    except RuntimeError:
        return None
    from torch_npu import _C  # bound once torch_npu.distributed has registered the class
    return backend if isinstance(backend, _C._distributed.ProcessGroupHCCL) else None


def reinit_process_group(group=None, rebuild_link=True):
    """Brings an hccl process group back into use after a communication failure (a rank that timed out,
    disagreeing collectives, a lost link), without destroying it. Every rank of the group calls it at
    the same point, like a collective.

    rebuild_link=True (default): the group's links are made anew (new connections over the group's
    store, within HCCL_CONNECT_TIMEOUT); its collectives count again from #1, the earlier failure is
    forgotten, and the group object, its ranks and its name stay the same. Returns the group.
    group=None means the default group.

    rebuild_link=False: resumes every hccl group's communicators after the device was stopped and
    restarted, and returns None. The software NPU's links are never paused (stop_device is a
    hardware-recovery call), so there is nothing to resume and the groups keep their state.
    """
    if not dist.is_initialized():
        raise RuntimeError("reinit_process_group: the default process group is not initialized; call "
                           "torch.distributed.init_process_group first")
    if not rebuild_link:
        return None
    if group is None:
        group = _c10d._get_default_group()
    if group is dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError("reinit_process_group: this rank is not a member of the group")
    backend = _hccl_backend(group)
    if backend is None:
        raise ValueError(f"reinit_process_group: group {group.group_name!r} does not run npu work on the hccl "
                         "backend; only hccl groups are rebuilt (create other groups anew)")
    store = _c10d._world.pg_map[group][1]
    # The same count on every rank of the group, so the new connections meet under one fresh prefix
    # of the group's store.
    _rebuilds[group.group_name] = _rebuilds.get(group.group_name, 0) + 1
    prefix = dist.PrefixStore(f"hccl_reinit/{_rebuilds[group.group_name]}/", store)
    timeout = backend._timeout
    data, meta = _gloo.connect(prefix, group.rank(), group.size(), timeout, group.group_name)
    backend._rebuild(prefix, data, meta)
    return group
