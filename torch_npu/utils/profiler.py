"""torch_npu.utils.profiler.Profile: profile one chosen training step by calling start() / end() around
every step, then stop the program (the step-profiling helper of torch_npu's training scripts).

profile_type "TORCH" writes a Chrome trace (torch_prof_<time>.json) of torch.autograd.profiler.profile
with npu activity; "ASCEND_PROFILER" writes a torch_npu.profiler run directory (tensorboard_trace_handler)
under save_path; None (default) turns the helper off, so the calls can stay in the script."""

import os
import sys
import time
from typing import Optional

import torch

from torch_npu.profiler import ProfilerLevel, _ExperimentalConfig, profile, tensorboard_trace_handler

__all__ = ["Profile", "Singleton"]

_TORCH_ARGS = {"enabled", "use_cuda", "record_shapes", "with_flops", "profile_memory", "with_stack", "use_kineto",
               "use_cpu", "use_npu_simple"}
_ASCEND_ARGS = {"activities", "schedule", "record_shapes", "profile_memory", "with_stack"}


def Singleton(cls):
    """Class decorator: the first call constructs the one instance; later calls return it (their
    arguments are ignored)."""
    instances = {}

    def get(*args, **kwargs):
        if cls not in instances:
            instances[cls] = cls(*args, **kwargs)
        return instances[cls]

    get.__wrapped__ = cls
    get.__doc__ = cls.__doc__
    return get


@Singleton
class Profile:
    """Profiles step number `start_step` (counted by start() calls) and exits the program after its end()
    has written the data to `save_path`. kwargs go to the profiler: for "TORCH" any of enabled, use_cuda,
    record_shapes, with_flops, profile_memory, with_stack, use_kineto, use_cpu, use_npu_simple; for
    "ASCEND_PROFILER" any of activities, schedule, record_shapes, profile_memory, with_stack."""

    def __init__(self, start_step: int = 10, save_path: str = "./npu_profiling", profile_type: str = None,
                 use_npu=True, record_shape: bool = True,
                 experimental_config: Optional[_ExperimentalConfig] = None, **kwargs):
        if profile_type not in (None, "TORCH", "ASCEND_PROFILER"):
            raise ValueError(f"Profile: profile_type must be None, 'TORCH' or 'ASCEND_PROFILER', got {profile_type!r}")
        if not isinstance(start_step, int) or start_step < 1:
            raise ValueError(f"Profile: start_step must be a positive step number, got {start_step!r}")
        self.step_count = 0
        self.count = 0
        self.save_path = save_path
        self.profile_type = profile_type
        self.enable = profile_type is not None
        self.start_step = start_step
        self.use_npu = use_npu
        self.record_shape = record_shape
        self.experimental_config = experimental_config if experimental_config is not None else \
            _ExperimentalConfig(profiler_level=ProfilerLevel.Level2)
        if not self.enable:
            return
        allowed = _TORCH_ARGS if profile_type == "TORCH" else _ASCEND_ARGS
        unknown = set(kwargs) - allowed
        if unknown:
            raise ValueError(f"Profile: {sorted(unknown)} are not arguments of the {profile_type} profiler; it takes "
                             f"{sorted(allowed)}")
        if profile_type == "TORCH":
            kwargs.setdefault("record_shapes", record_shape)
            self.prof = torch.autograd.profiler.profile(use_npu=use_npu, **kwargs)
        else:
            kwargs.setdefault("record_shapes", record_shape)
            self.prof = profile(on_trace_ready=tensorboard_trace_handler(save_path),
                                experimental_config=self.experimental_config, **kwargs)
        try:
            os.makedirs(save_path, exist_ok=True)
        except OSError as e:
            raise ValueError(f"Profile: cannot create save_path {save_path!r}: {e}") from e

    def start(self):
        """Call at the start of every step."""
        if self.count != 0:
            raise RuntimeError("Profile.start: the step already started; call end() at the end of each step")
        self.count = 1
        if self.enable:
            self.step_count += 1
            if self.step_count == self.start_step:
                self.prof.__enter__()

    def end(self):
        """Call at the end of every step; after the profiled step it writes the data and exits."""
        if self.count == 0:
            raise RuntimeError("Profile.end: no step started; call start() at the start of each step")
        self.count = 0
        if self.enable and self.step_count == self.start_step:
            self.prof.__exit__(None, None, None)
            if self.profile_type == "TORCH":
                name = "torch_prof_" + time.strftime("%Y%m%d%H%M%S") + ".json"
                self.prof.export_chrome_trace(os.path.join(self.save_path, name))
            sys.exit()
