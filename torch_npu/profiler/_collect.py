"""Raw data of a finished PyTorch profiling session: host ops and memory events from PyTorch's profiler,
device tasks from the npu activity plugin (torch_npu._C). Written to FRAMEWORK/ of a run directory, from
which every output file is derived (also offline, by analyse())."""

from __future__ import annotations

import json
import os
import threading
import warnings

import torch

from .analysis._model import DEVICE_FILE, HOST_FILE, RAW_DIR


def _walk(nodes):
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.children)


def _device_name(device: torch.device) -> str:
    return "npu" if device.type == "npu" else device.type


def host_data(prof, with_memory: bool) -> dict:
    """`prof`: a stopped torch.profiler.profile or torch.autograd.profiler.profile."""
    result = getattr(prof, "kineto_results", None) or getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if result is None:
        return {"pid": os.getpid(), "ops": [], "memory": []}
    ops = []
    for e in result.events():
        if e.device_type() != torch.autograd.DeviceType.CPU or e.name() in ("[memory]", "[OutOfMemory]"):
            continue
        ops.append({"id": e.correlation_id(), "name": e.name(), "start": e.start_ns(), "end": e.end_ns(),
                    "tid": e.start_thread_id(), "shapes": [list(s) for s in e.shapes()], "dtypes": list(e.dtypes()),
                    "stack": list(e.stack()), "user_annotation": e.is_user_annotation(),
                    "python": e.is_python_function()})
    memory = []
    if with_memory:
        from torch._C._profiler import _EventType

        for node in _walk(result.experimental_event_tree()):
            if node.tag != _EventType.Allocation:
                continue
            f = node.extra_fields
            parent = node.parent
            while parent is not None and parent.tag != _EventType.TorchOp:
                parent = parent.parent
            memory.append({"ts": node.start_time_ns, "ptr": f.ptr, "bytes": f.alloc_size,
                           "total_allocated": f.total_allocated, "total_reserved": f.total_reserved,
                           "device_type": _device_name(f.device), "device": f.device.index or 0,
                           "op": parent.name if parent is not None else ""})
    threads = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    return {"pid": os.getpid(), "trace_start_ns": result.trace_start_ns(), "ops": ops, "memory": memory,
            "threads": {str(k): v for k, v in threads.items()}}


def device_data() -> dict:
    """The device tasks of the npu session that just stopped; warns when some could not be collected."""
    from torch_npu import _C

    warning = _C._profiler_warning()
    if warning:
        warnings.warn(f"npu profiler: {warning}")
    return {"records": [list(r) for r in _C._profiler_activities()], "warning": warning}


def write_raw(run_dir: str, host: dict, device: dict) -> None:
    raw = os.path.join(run_dir, RAW_DIR)
    os.makedirs(raw, exist_ok=True)
    with open(os.path.join(raw, HOST_FILE), "w") as f:
        json.dump(host, f, separators=(",", ":"))
    with open(os.path.join(raw, DEVICE_FILE), "w") as f:
        json.dump(device, f, separators=(",", ":"))
