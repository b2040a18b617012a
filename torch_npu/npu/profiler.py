"""torch.npu's end-to-end profilers (seed-era API): torch.npu.profile(profiler_result_path, use_e2e_profiler,
config=torch.npu.profileConfig(...)), prof_init / prof_start / prof_stop / prof_finalize, and
iteration_start / iteration_end. Each collection writes a PROF_* folder (analysis/_msprof.py) whose
timeline/msprof.json opens in chrome://tracing."""

from __future__ import annotations

import datetime
import os
import random
import string
import time

__all__ = ["profile", "profileConfig", "aiCoreMetrics", "prof_init", "prof_start", "prof_stop", "prof_finalize",
           "iteration_start", "iteration_end"]


class aiCoreMetrics:
    ACL_AICORE_ARITHMETIC_UTILIZATION = 0
    ACL_AICORE_PIPE_UTILIZATION = 1
    ACL_AICORE_MEMORY_BANDWIDTH = 2
    ACL_AICORE_L0B_AND_WIDTH = 3
    ACL_AICORE_RESOURCE_CONFLICT_RATIO = 4
    ACL_AICORE_NONE = 0xFF


_SWITCHES = ("ACL_PROF_ACL_API", "ACL_PROF_TASK_TIME", "ACL_PROF_AICORE_METRICS", "ACL_PROF_AICPU",
             "ACL_PROF_L2CACHE", "ACL_PROF_HCCL_TRACE", "ACL_PROF_TRAINING_TRACE")


class profileConfig:
    """Which layers an E2E profile collects (defaults as the seed documents them)."""

    def __init__(self, ACL_PROF_ACL_API=True, ACL_PROF_TASK_TIME=True, ACL_PROF_AICORE_METRICS=True,
                 ACL_PROF_AICPU=True, ACL_PROF_L2CACHE=False, ACL_PROF_HCCL_TRACE=True,
                 ACL_PROF_TRAINING_TRACE=False, TORCH_CALL_STACK=False,
                 aiCoreMetricsType=aiCoreMetrics.ACL_AICORE_ARITHMETIC_UTILIZATION):
        values = dict(zip(_SWITCHES, (ACL_PROF_ACL_API, ACL_PROF_TASK_TIME, ACL_PROF_AICORE_METRICS, ACL_PROF_AICPU,
                                      ACL_PROF_L2CACHE, ACL_PROF_HCCL_TRACE, ACL_PROF_TRAINING_TRACE)))
        for name, value in list(values.items()) + [("TORCH_CALL_STACK", TORCH_CALL_STACK)]:
            if not isinstance(value, bool):
                raise TypeError(f"profileConfig: {name} must be True or False; got {value!r}")
        valid = {v for k, v in vars(aiCoreMetrics).items() if k.startswith("ACL_")}
        if aiCoreMetricsType not in valid:
            raise ValueError(f"profileConfig: aiCoreMetricsType must be one of {sorted(valid)} (aiCoreMetrics.*); "
                             f"got {aiCoreMetricsType!r}")
        self.switches = values
        self.TorchCallStack = TORCH_CALL_STACK
        self.AiCoreMetricsConfig = aiCoreMetricsType

    def __repr__(self) -> str:
        on = [k for k, v in self.switches.items() if v]
        return f"profileConfig({', '.join(on)}, aiCoreMetricsType={self.AiCoreMetricsConfig})"


class _Session:
    """One collection at a time (as on the device)."""

    def __init__(self):
        self.path: str | None = None
        self.prof = None
        self.config: profileConfig | None = None
        self.framework = False
        self.iterations: list[list[int]] = []
        self.counter = 0
        self.last_dir: str | None = None

    def init(self, path) -> None:
        if not isinstance(path, (str, os.PathLike)) or not os.path.isdir(path):
            raise FileNotFoundError(f"profiler result path {path!r} does not exist: create the directory first")
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"profiler result path {path!r} is not writable")
        self.path = os.path.realpath(path)

    def start(self, config: profileConfig, framework: bool) -> None:
        from torch_npu import profiler as npu_profiler

        if self.path is None:
            raise RuntimeError("prof_start() before prof_init(path)")
        if self.prof is not None:
            raise RuntimeError("an npu profile is already running: call prof_stop() first")
        if not isinstance(config, profileConfig):
            raise TypeError(f"config must be torch.npu.profileConfig(...); got {config!r}")
        acts = [npu_profiler.ProfilerActivity.NPU]
        if framework:
            acts.append(npu_profiler.ProfilerActivity.CPU)
        self.config, self.framework, self.iterations = config, framework, []
        self.prof = npu_profiler.profile(activities=acts, with_stack=config.TorchCallStack and framework)
        self.prof.start()

    def stop(self) -> str:
        from torch_npu.profiler import _collect
        from torch_npu.profiler.analysis import _msprof
        from torch_npu.profiler.analysis._model import Run

        if self.prof is None:
            raise RuntimeError("prof_stop() without a running profile (prof_start() first)")
        prof, self.prof = self.prof, None
        prof.stop()
        if self.iterations and len(self.iterations[-1]) == 1:
            self.iterations[-1].append(time.time_ns())
        host, device = prof._npu_raw
        host = dict(host, iterations=[tuple(i) for i in self.iterations])
        self.counter += 1
        stamp = datetime.datetime.now().strftime("%Y%m%d%H%M%S%f")[:-3]
        tag = "".join(random.choices(string.ascii_uppercase, k=10))
        prof_dir = os.path.join(self.path, f"PROF_{self.counter:06d}_{stamp}_{tag}")
        _collect.write_raw(prof_dir, host, device)
        switches = dict(self.config.switches, framework=self.framework)
        _msprof.write_prof_dir(Run(host, device), prof_dir, switches)
        self.last_dir = prof_dir
        return prof_dir

    def finalize(self) -> None:
        if self.prof is not None:
            self.stop()
        self.path = None

    def iteration(self, begin: bool) -> None:
        if self.prof is None:
            return
        now = time.time_ns()
        if begin:
            if self.iterations and len(self.iterations[-1]) == 1:
                self.iterations[-1].append(now)
            self.iterations.append([now])
        elif self.iterations and len(self.iterations[-1]) == 1:
            self.iterations[-1].append(now)


_session = _Session()


class profile:
    """with torch.npu.profile(profiler_result_path="./result", use_e2e_profiler=True, config=profileConfig()):
    collects device tasks and runtime API calls (and, with use_e2e_profiler, the PyTorch ops) into
    profiler_result_path/PROF_*/."""

    def __init__(self, profiler_result_path: str = "./", use_e2e_profiler: bool = False, config: profileConfig | None = None):
        if not isinstance(use_e2e_profiler, bool):
            raise TypeError(f"use_e2e_profiler must be True or False; got {use_e2e_profiler!r}")
        self.result_path = profiler_result_path
        self.use_e2e_profiler = use_e2e_profiler
        self.config = config if config is not None else profileConfig()
        self.entered = False
        self.prof_dir: str | None = None

    def __enter__(self):
        if self.entered:
            raise RuntimeError("torch.npu.profile is not reentrant")
        self.entered = True
        prof_init(self.result_path)
        _session.start(self.config, framework=self.use_e2e_profiler)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.prof_dir = _session.stop()
        prof_finalize()
        return False


def prof_init(path) -> None:
    """Where the next collections write their PROF_* folders (the directory must exist)."""
    _session.init(path)


def prof_start(config: profileConfig | None = None) -> None:
    _session.start(config if config is not None else profileConfig(), framework=False)


def prof_stop() -> str:
    """Stops the collection and writes its PROF_* folder; returns its path."""
    return _session.stop()


def prof_finalize() -> None:
    _session.finalize()


def iteration_start() -> None:
    """Marks the start of a training iteration in a running collection (the Step Trace layer)."""
    _session.iteration(True)


def iteration_end() -> None:
    _session.iteration(False)
