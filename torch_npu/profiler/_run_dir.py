"""Run directories: `{worker}_{pid}_{timestamp}_ascend_pt/` with profiler_info(_{rank}).json and
profiler_metadata.json, named so that runs and ranks writing side by side never collide."""

from __future__ import annotations

import datetime
import json
import os
import socket
import tempfile

import torch

from torch_npu.version import __version__

SUFFIX = "_ascend_pt"


def rank_id() -> int | None:
    """The process's rank: torch.distributed's when initialised, else $RANK, else None."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    value = os.environ.get("RANK")
    return int(value) if value is not None and value.strip().lstrip("-").isdigit() else None


def check_writable_dir(path: str, what: str) -> str:
    """The absolute path of a directory, created if needed, that this process can write to; a clear error
    otherwise (raised when the handler is created, not after a long run)."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise TypeError(f"{what} must be a directory path (str); got {path!r}")
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(f"{what} {path!r} is a file, not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except (NotADirectoryError, FileExistsError):
        raise NotADirectoryError(f"{what} {path!r} cannot be created: a parent of it is a file") from None
    except OSError as e:
        raise PermissionError(f"{what} {path!r} cannot be created ({e.strerror}); choose a directory you can "
                              "write to") from None
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise PermissionError(f"{what} {path!r} is not writable ({e.strerror}); choose a directory you can "
                              "write to") from None
    return path


def default_dir() -> str:
    work = os.environ.get("ASCEND_WORK_PATH")
    return os.path.join(os.path.abspath(work), "profiling_data") if work else os.getcwd()


def create(dir_name: str | None, worker_name: str | None) -> str:
    parent = check_writable_dir(dir_name or default_dir(), "dir_name")
    if worker_name is not None and (not isinstance(worker_name, str) or not worker_name or os.sep in worker_name):
        raise ValueError(f"worker_name must be a non-empty name without '{os.sep}'; got {worker_name!r}")
    worker = worker_name or socket.gethostname()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d%H%M%S%f")[:-3]
    base = os.path.join(parent, f"{worker}_{os.getpid()}_{stamp}")
    path, n = base + SUFFIX, 0
    while True:
        try:
            os.makedirs(path)
            return path
        except FileExistsError:  # same worker, pid and millisecond: a second window of the same run
            n += 1
            path = f"{base}_{n}{SUFFIX}"


def write_info(run_dir: str, config: dict, start_ns: int, end_ns: int, metadata: dict, warning: str = "") -> None:
    rank = rank_id()
    info = {"config": config, "start_info": {"collectionTimeBegin": start_ns},
            "end_info": {"collectionTimeEnd": end_ns}, "rank_id": rank, "pid": os.getpid(),
            "hostname": socket.gethostname(), "torch_version": torch.__version__.split("+")[0],
            "torch_npu_version": __version__}
    if warning:
        info["device_warning"] = warning
    name = f"profiler_info_{rank}.json" if rank is not None else "profiler_info.json"
    with open(os.path.join(run_dir, name), "w") as f:
        json.dump(info, f, indent=1)
    meta = dict(metadata)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        meta.setdefault("distributed_args", {"rank": torch.distributed.get_rank(),
                                             "world_size": torch.distributed.get_world_size(),
                                             "backend": str(torch.distributed.get_backend())})
    with open(os.path.join(run_dir, "profiler_metadata.json"), "w") as f:
        json.dump(meta, f, indent=1)


def find_runs(path: str) -> list[str]:
    """`path` itself if it is a run directory, else the run directories directly below it."""
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"profiling data path {path!r} does not exist")
    if path.endswith(SUFFIX) or os.path.isdir(os.path.join(path, "FRAMEWORK")):
        return [path]
    runs = sorted(os.path.join(path, d) for d in os.listdir(path)
                  if d.endswith(SUFFIX) and os.path.isdir(os.path.join(path, d)))
    if not runs:
        raise FileNotFoundError(f"{path!r} holds no *{SUFFIX} run directory to analyse")
    return runs
