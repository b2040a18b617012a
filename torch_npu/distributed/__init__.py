"""torch_npu.distributed: the ``hccl`` backend of torch.distributed for npu tensors.

Importing torch_npu registers it, so that ``init_process_group("hccl")``,
``init_process_group(device_id=torch.device("npu", r))``, ``backend=None`` on a machine with npus,
``"cpu:gloo,npu:hccl"`` and ``init_device_mesh("npu", ...)`` all select it. Collectives run on
PyTorch's Gloo (TCP, so they also work across machines) over zero-copy CPU views of device memory,
on each device's communication stream (docs/distributed.md).
"""

import importlib

import torch
import torch.distributed as dist

from torch_npu import _C
from torch_npu.distributed import _ddp, _default_backend, _errors, _gloo
from torch_npu.distributed._uneven import all_gather_into_tensor_uneven, reduce_scatter_tensor_uneven
from torch_npu.distributed.distributed_c10d import is_hccl_available, reinit_process_group
from torch_npu.utils._after_import import after_import

__all__ = ["is_hccl_available", "reinit_process_group", "ProcessGroupHCCL", "all_gather_into_tensor_uneven",
           "reduce_scatter_tensor_uneven"]

class _HcclOptions:
    """ProcessGroupHCCL.Options: what init_process_group(pg_options=...) / new_group(pg_options=...) may
    say about an hccl group. `hccl_config` keys as torch_npu takes them (hccl_buffer_size in MB,
    hccl_buffer_name (groups naming the same buffer share it), group_name, qos_service_level,
    qos_traffic_class, hccl_sdma_qos, hccl_op_expansion_mode, hccl_world_rank_id, hccl_job_id,
    hccl_exec_timeout); `is_high_priority_stream`
    asks for a high-priority stream. The software NPU's collectives run over Gloo on the group's own
    threads: the options are checked and kept on the object (with the group's ranks, id and timeout filled
    in once the group exists), and have nothing to tune."""

    _CONFIG_KEYS = {"hccl_buffer_size": int, "hccl_buffer_name": str, "group_name": str, "qos_service_level": int,
                    "qos_traffic_class": int, "hccl_sdma_qos": int, "hccl_op_expansion_mode": int,
                    "hccl_world_rank_id": int, "hccl_job_id": int, "hccl_exec_timeout": int}

    def __init__(self, is_high_priority_stream: bool = False):
        self.is_high_priority_stream = is_high_priority_stream
        self.hccl_config = {}
        self.global_ranks_in_group = []
        self.group_id = ""
        self._timeout = None

    def _check(self):
        if not isinstance(self.is_high_priority_stream, bool):
            raise TypeError(f"ProcessGroupHCCL.Options.is_high_priority_stream must be a bool, got "
                            f"{self.is_high_priority_stream!r}")
        if not isinstance(self.hccl_config, dict):
            raise TypeError(f"ProcessGroupHCCL.Options.hccl_config must be a dict, got {self.hccl_config!r}")
        for key, value in self.hccl_config.items():
            kind = self._CONFIG_KEYS.get(key)
            if kind is None:
                raise ValueError(f"ProcessGroupHCCL.Options.hccl_config: unknown key {key!r}; known: "
                                 f"{', '.join(sorted(self._CONFIG_KEYS))}")
            if not isinstance(value, kind) or isinstance(value, bool):
                raise TypeError(f"ProcessGroupHCCL.Options.hccl_config[{key!r}] must be {kind.__name__}, got {value!r}")


def _create_hccl_backend(backend_options, pg_options):
    """Backend.register_backend's creator (extended API): two Gloo groups under one hccl backend."""
    if pg_options is not None:
        if not isinstance(pg_options, _HcclOptions):
            raise TypeError(f"the hccl backend takes pg_options=torch_npu._C._distributed_c10d.ProcessGroupHCCL"
                            f".Options(), got {type(pg_options).__name__}")
        pg_options._check()
    store = backend_options.store
    rank, size = backend_options.group_rank, backend_options.group_size
    timeout = backend_options.timeout
    data, meta = _gloo.connect(store, rank, size, timeout, backend_options.group_id)
    global_ranks = [int(r) for r in backend_options.global_ranks_in_group]
    if pg_options is not None:  # filled in as torch fills its backends' options
        pg_options.global_ranks_in_group = global_ranks
        pg_options.group_id = backend_options.group_id
        pg_options._timeout = timeout
    return ProcessGroupHCCL(store, rank, size, timeout, data, meta, global_ranks)


def _is_support_hccl_comm_name() -> bool:
    """Whether hccl groups have names (ProcessGroupHCCL.get_hccl_comm_name / _set_hccl_comm_name): always."""
    return True


def _get_stream_id(self, is_p2p=False, peer=-1) -> int:
    """The stream id (torch.npu.Stream(stream_id=...)) of the stream this group's work runs on, for
    collectives or (is_p2p) point-to-point work with `peer`: both run on the device's communication
    stream."""
    stream_id, _, _ = _C._communication_stream(torch.npu.current_device())
    return stream_id


def _register() -> None:
    _C._distributed._init()
    global ProcessGroupHCCL
    ProcessGroupHCCL = _C._distributed.ProcessGroupHCCL
    ProcessGroupHCCL.Options = _HcclOptions
    ProcessGroupHCCL._get_stream_id = _get_stream_id
    # torch_npu's module name for its c10d bindings (tests and libraries import ProcessGroupHCCL from it).
    _C._distributed_c10d = _C._distributed
    if "hccl" not in dist.Backend.backend_list:
        dist.Backend.register_backend("hccl", _create_hccl_backend, extended_api=True, devices=["npu"])
    # torch_npu's names in torch.distributed.
    dist.is_hccl_available = is_hccl_available
    dist.distributed_c10d.is_hccl_available = is_hccl_available
    _errors.install()
    _default_backend.install(ProcessGroupHCCL)
    _ddp.install()
    importlib.import_module("torch_npu.distributed.rpc")  # the NPU_TENSORPIPE RPC backend
    # DTensor's rules for torch_npu's ops, once a program uses DTensor.
    after_import("torch.distributed.tensor", lambda: importlib.import_module("torch_npu.distributed.tensor"))


ProcessGroupHCCL = None
if dist.is_available():
    _register()
