"""torch_npu.profiler: PyTorch's profiler with npu device activity and torch_npu's output files.

    with torch_npu.profiler.profile(
            activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
            schedule=torch_npu.profiler.schedule(wait=1, warmup=1, active=2, repeat=1),
            on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./result")) as prof:
        for batch in loader:
            train_step(batch)
            prof.step()

See docs/profiling.md for the files and how to read them."""

from . import dynamic_profile
from .experimental_config import (AiCMetrics, ExportType, HostSystem, ProfilerLevel, _ExperimentalConfig,
                                  supported_ai_core_metrics, supported_export_type, supported_profiler_level)
from .profiler import ProfilerActivity, analyse, profile, supported_activities, tensorboard_trace_handler
from .scheduler import ProfilerAction
from .scheduler import Schedule as schedule

__all__ = ["profile", "ProfilerActivity", "supported_activities", "tensorboard_trace_handler", "schedule",
           "ProfilerAction", "_ExperimentalConfig", "ProfilerLevel", "AiCMetrics", "ExportType", "HostSystem",
           "supported_profiler_level", "supported_ai_core_metrics", "supported_export_type", "dynamic_profile",
           "analyse"]
