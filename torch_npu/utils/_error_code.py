"""torch_npu's error codes (ERR<submodule><code>) as suffixes of exception messages: pta_error(ErrCode.TYPE)
gives "\n[ERROR] <time> (PID:.., Device:.., RankID:..) ERR00002 PTA invalid type". Libraries and tests written
for torch_npu build their messages with it; TORCH_NPU_COMPACT_ERROR_OUTPUT=1 leaves the suffix out."""

import os
import time
from enum import Enum

__all__ = ["ErrCode", "pta_error", "ops_error", "dist_error", "graph_error", "prof_error"]


class _SubModuleID(Enum):
    PTA = 0
    OPS = 1
    DIST = 2
    GRAPH = 3
    PROF = 4
    UNKNOWN = 99


class ErrCode(Enum):
    """(number, meaning) of each error kind."""

    SUCCESS = (0, "success")
    PARAM = (1, "invalid parameter")
    TYPE = (2, "invalid type")
    VALUE = (3, "invalid value")
    PTR = (4, "invalid pointer")
    INTERNAL = (5, "internal error")
    MEMORY = (6, "memory error")
    NOT_SUPPORT = (7, "feature not supported")
    NOT_FOUND = (8, "resource not found")
    UNAVAIL = (9, "resource unavailable")
    SYSCALL = (10, "system call failed")
    TIMEOUT = (11, "timeout error")
    PERMISSION = (12, "permission error")
    ACL = (100, "call acl api failed")
    HCCL = (200, "call hccl api failed")
    GE = (300, "call ge api failed")
    EXCEPT = (999, "applicaiton exception")  # torch_npu's spelling: messages are matched on it

    @property
    def code(self) -> int:
        return self.value[0]

    @property
    def msg(self) -> str:
        return self.value[1]


def _device() -> int:
    try:
        import torch

        return torch.npu.current_device() if torch.npu.is_initialized() else -1
    except (ImportError, AttributeError, RuntimeError):
        return -1


def _rank() -> int:
    try:
        import torch.distributed as dist

        return dist.get_rank() if dist.is_available() and dist.is_initialized() else -1
    except (ImportError, RuntimeError, ValueError):
        return -1


def _suffix(submodule: _SubModuleID, error: ErrCode) -> str:
    if os.environ.get("TORCH_NPU_COMPACT_ERROR_OUTPUT", "0") == "1":
        return ""
    stamp = time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime())
    return (f"\n[ERROR] {stamp} (PID:{os.getpid()}, Device:{_device()}, RankID:{_rank()}) "
            f"ERR{submodule.value:02d}{error.code:03d} {submodule.name} {error.msg}")


def pta_error(error: ErrCode) -> str:
    return _suffix(_SubModuleID.PTA, error)


def ops_error(error: ErrCode) -> str:
    return _suffix(_SubModuleID.OPS, error)


def dist_error(error: ErrCode) -> str:
    return _suffix(_SubModuleID.DIST, error)


def graph_error(error: ErrCode) -> str:
    return _suffix(_SubModuleID.GRAPH, error)


def prof_error(error: ErrCode) -> str:
    return _suffix(_SubModuleID.PROF, error)
