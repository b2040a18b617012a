"""torch_npu.profiler.profile: PyTorch's profiler with the npu device activity, writing torch_npu's run
directories (tensorboard_trace_handler) and trace format, plus the offline analyse()."""

from __future__ import annotations

import gzip
import os
import time

import torch
import torch.profiler

from . import _collect, _run_dir
from ._activity import ProfilerActivity
from .profiler_interface import supported_activities
from .experimental_config import ProfilerLevel, _ExperimentalConfig

__all__ = ["profile", "tensorboard_trace_handler", "analyse", "ProfilerActivity", "supported_activities"]




def _activity_names(activities) -> list[str]:
    return sorted("NPU" if a == ProfilerActivity.NPU else "CPU" for a in activities)


def _check_activities(activities) -> set:
    if activities is None:
        return supported_activities()
    if isinstance(activities, torch.profiler.ProfilerActivity):
        activities = [activities]
    try:
        acts = set(activities)
    except TypeError:
        raise TypeError(f"activities must be a list of ProfilerActivity.CPU / ProfilerActivity.NPU; got {activities!r}") \
            from None
    unknown = [a for a in acts if a not in supported_activities()]
    if unknown:
        raise ValueError(f"activities {unknown} are not supported on npu; use ProfilerActivity.CPU and/or "
                         "ProfilerActivity.NPU")
    if not acts:
        raise ValueError("activities is empty: pass ProfilerActivity.CPU and/or ProfilerActivity.NPU")
    return acts


_ACTIVE: list = []  # experimental configs of the profiles recording now


def _mstx_records(domain: str) -> bool:
    """Whether a recording profile takes torch.npu.mstx markers of `domain`."""
    return any(config.mstx_domain_recorded(domain) for config in _ACTIVE)


class profile(torch.profiler.profile):
    """torch_npu.profiler.profile(activities, schedule, on_trace_ready, record_shapes, profile_memory,
    with_stack, with_flops, with_modules, experimental_config): PyTorch's profiler (start / stop / step,
    key_averages, events, add_metadata) whose NPU activity records every device task, and whose
    export_chrome_trace writes torch_npu's trace view."""

    def __init__(self, activities=None, schedule=None, on_trace_ready=None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config: _ExperimentalConfig | None = None,
                 use_cuda=None, custom_trace_id_callback=None):
        acts = _check_activities(activities)
        if schedule is not None and not callable(schedule):
            raise TypeError(f"schedule must be callable (torch_npu.profiler.schedule(...)); got {schedule!r}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError("on_trace_ready must be callable, e.g. torch_npu.profiler.tensorboard_trace_handler"
                            f"('./result'); got {on_trace_ready!r}")
        if experimental_config is None:
            experimental_config = _ExperimentalConfig()
        elif not isinstance(experimental_config, _ExperimentalConfig):
            raise TypeError("experimental_config must be torch_npu.profiler._ExperimentalConfig(...); got "
                            f"{experimental_config!r}")
        for name, value in (("record_shapes", record_shapes), ("profile_memory", profile_memory),
                            ("with_stack", with_stack), ("with_flops", with_flops), ("with_modules", with_modules)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool; got {value!r}")
        if experimental_config.profiler_level == ProfilerLevel.Level_none:
            acts.discard(ProfilerActivity.NPU)
            if not acts:
                raise ValueError("profiler_level Level_none collects no device data: add ProfilerActivity.CPU")
        self._npu_experimental = experimental_config
        self._npu_metadata: dict = {}
        self._npu_raw: tuple[dict, dict] | None = None
        self._npu_window = (0, 0)
        self._npu_common = {"activities": _activity_names(acts), "record_shapes": record_shapes,
                            "profile_memory": profile_memory, "with_stack": with_stack, "with_flops": with_flops,
                            "with_modules": with_modules,
                            "schedule": schedule.to_dict() if hasattr(schedule, "to_dict") else None}
        super().__init__(activities=acts, schedule=schedule, on_trace_ready=on_trace_ready,
                         record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules,
                         custom_trace_id_callback=custom_trace_id_callback)

    # The raw data of a window is taken when it stops, before on_trace_ready and any later window.
    def start_trace(self) -> None:
        self._npu_window = (time.time_ns(), 0)
        super().start_trace()
        _ACTIVE.append(self._npu_experimental)  # torch.npu.mstx records while a window is open

    def stop_trace(self) -> None:
        if self._npu_experimental in _ACTIVE:
            _ACTIVE.remove(self._npu_experimental)
        super().stop_trace()
        self._npu_window = (self._npu_window[0], time.time_ns())
        host = _collect.host_data(self.profiler, self._npu_common["profile_memory"])
        device = _collect.device_data() if ProfilerActivity.NPU in self.activities else {"records": [], "warning": ""}
        self._npu_raw = (host, device)

    def add_metadata(self, key: str, value: str) -> None:
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"add_metadata takes a str key and a str value; got {key!r}: {value!r}")
        self._npu_metadata[key] = value
        super().add_metadata(key, value)

    def add_metadata_json(self, key: str, value: str) -> None:
        import json

        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"add_metadata_json takes a str key and a JSON str value; got {key!r}: {value!r}")
        try:
            self._npu_metadata[key] = json.loads(value)
        except ValueError as e:
            raise ValueError(f"add_metadata_json: the value of {key!r} is not valid JSON: {e}") from None
        super().add_metadata_json(key, value)

    @property
    def profiler_level(self) -> str:
        return self._npu_experimental.profiler_level

    def _npu_config(self) -> dict:
        return {"common_config": self._npu_common, "experimental_config": self._npu_experimental.to_dict()}

    def export_chrome_trace(self, path: str) -> None:
        """Writes the last recorded window as torch_npu's trace view (host ops, device rows per stream, flow
        arrows, memory counters); `.gz` paths are compressed."""
        from .analysis import _trace_view
        from .analysis._model import Run

        if self._npu_raw is None:
            raise RuntimeError("export_chrome_trace: nothing recorded yet; call it after the profiler stopped "
                               "(after the with block, stop(), or in on_trace_ready)")
        trace = _trace_view.build(Run(*self._npu_raw), self.profiler_level)
        import json

        data = json.dumps(trace, separators=(",", ":"))
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "wt") as f:
            f.write(data)

    def _write_run(self, run_dir: str, analyse_flag: bool) -> None:
        if self._npu_raw is None:
            raise RuntimeError("the profiler has not recorded a window yet")
        host, device = self._npu_raw
        _collect.write_raw(run_dir, host, device)
        _run_dir.write_info(run_dir, self._npu_config(), self._npu_window[0], self._npu_window[1],
                            self._npu_metadata, device.get("warning", ""))
        if analyse_flag:
            from . import analysis

            analysis.export(run_dir)


def tensorboard_trace_handler(dir_name: str | None = None, worker_name: str | None = None,
                              analyse_flag: bool = True, async_mode: bool = False):
    """on_trace_ready handler: each recorded window becomes `{dir_name}/{worker}_{pid}_{timestamp}_ascend_pt/`
    (raw data, profiler_info, and with analyse_flag the ASCEND_PROFILER_OUTPUT files). The directory is
    checked now, so that an unwritable path fails before the run, not after it. `async_mode` is accepted for
    compatibility; the files are written before the handler returns."""
    parent = _run_dir.check_writable_dir(dir_name or _run_dir.default_dir(), "dir_name")
    if worker_name is not None and (not isinstance(worker_name, str) or not worker_name or os.sep in worker_name):
        raise ValueError(f"worker_name must be a non-empty name without '{os.sep}'; got {worker_name!r}")
    if not isinstance(analyse_flag, bool):
        raise TypeError(f"analyse_flag must be a bool; got {analyse_flag!r}")

    def handler(prof) -> None:
        if not isinstance(prof, profile):
            raise TypeError("tensorboard_trace_handler needs torch_npu.profiler.profile (or torch.npu's profilers), "
                            f"not {type(prof).__name__}")
        run_dir = _run_dir.create(parent, worker_name)
        prof._write_run(run_dir, analyse_flag)
        handler.run_dirs.append(run_dir)

    handler.dir_name = parent
    handler.run_dirs = []
    return handler


def analyse(profiler_path: str, max_process_number: int | None = None, export_type: str | None = None) -> list[str]:
    """Offline analysis: writes ASCEND_PROFILER_OUTPUT/ for the run directory `profiler_path`, or for every
    *_ascend_pt directory in it (runs written with analyse_flag=False). Returns the output directories."""
    from . import analysis

    if export_type is not None and export_type not in ("text", "db"):
        raise ValueError(f"export_type must be 'text' or 'db'; got {export_type!r}")
    return [analysis.export(run, export_type=export_type) for run in _run_dir.find_runs(profiler_path)]
