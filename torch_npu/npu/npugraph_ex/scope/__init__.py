"""Scopes for npugraph_ex code: core limits and deterministic computation for the ops launched inside."""

import contextlib

__all__ = ["limit_core_num", "deterministic"]


@contextlib.contextmanager
def limit_core_num(op_aicore_num: int, op_vectorcore_num: int, stream=None):
    """Ops launched on `stream` (default: the current one) inside the scope use at most these cores
    (torch.npu.set_stream_limit); the stream's limits are restored on exit."""
    import torch_npu

    target = stream if stream is not None else torch_npu.npu.current_stream()
    before = torch_npu.npu.get_stream_limit(target)
    torch_npu.npu.set_stream_limit(target, op_aicore_num, op_vectorcore_num)
    try:
        yield
    finally:
        torch_npu.npu.set_stream_limit(target, before["cube_core_num"], before["vector_core_num"])


@contextlib.contextmanager
def deterministic(level: int):
    """Ops launched inside the scope compute deterministically at `level` (torch.npu.set_deterministic_level)."""
    from torch_npu.npu import deterministic as _deterministic

    before = _deterministic._get_deterministic_level()
    _deterministic.set_deterministic_level(level)
    try:
        yield
    finally:
        _deterministic.set_deterministic_level(before)
