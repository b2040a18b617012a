"""What the npu profiler can record on this machine (supported_activities)."""

from torch_npu.profiler._activity import ProfilerActivity

__all__ = ["supported_activities"]


def supported_activities() -> set:
    """The activities torch_npu.profiler.profile records here: host (CPU) ops and npu device tasks."""
    return {ProfilerActivity.CPU, ProfilerActivity.NPU}
