"""torch_npu.profiler.dynamic_profile: start a profile in a running job by editing a JSON file.

    from torch_npu.profiler import dynamic_profile as dp
    dp.init("./dyn")          # writes ./dyn/profiler_config.json (a template) if it is missing
    for batch in loader:
        train_step(batch)
        dp.step()             # polls the file; after an edit, records `active` steps from `start_step`

Each collection is written like tensorboard_trace_handler does, under `prof_dir` (default: the init path)."""

from __future__ import annotations

import json
import os
import warnings

from . import _run_dir
from .experimental_config import _ExperimentalConfig
from .profiler import ProfilerActivity, profile, tensorboard_trace_handler
from .scheduler import Schedule

__all__ = ["init", "step", "start"]

CONFIG_NAME = "profiler_config.json"
TEMPLATE = {
    "activities": ["CPU", "NPU"], "prof_dir": "", "analyse": False, "record_shapes": False,
    "profile_memory": False, "with_stack": False, "with_flops": False, "with_modules": False, "active": 1,
    "start_step": 0, "is_rank": False, "rank_list": [],
    "experimental_config": {"profiler_level": "Level0", "aic_metrics": "AiCoreNone", "l2_cache": False,
                            "op_attr": False, "gc_detect_threshold": None, "data_simplification": True,
                            "record_op_args": False, "export_type": "text", "msprof_tx": False},
    "metadata": {},
}


class _DynamicProfile:
    def __init__(self):
        self.path: str | None = None
        self.mtime: float | None = None
        self.step_num = 0
        self.pending: dict | None = None  # parsed config waiting for its start step
        self.prof: profile | None = None
        self.handler = None
        self.remaining = 0
        self.run_dirs: list[str] = []

    def init(self, path: str) -> None:
        path = _run_dir.check_writable_dir(path, "dynamic_profile.init path")
        os.makedirs(path, exist_ok=True)
        cfg = os.path.join(path, CONFIG_NAME)
        if not os.path.exists(cfg):
            with open(cfg, "w") as f:
                json.dump(TEMPLATE, f, indent=4)
        self.path = path
        self.mtime = os.stat(cfg).st_mtime_ns
        self.step_num = 0

    def _parse(self, cfg_path: str) -> dict | None:
        try:
            with open(cfg_path) as f:
                data = json.load(f)
            if not isinstance(data, dict):
                raise ValueError("the file must hold a JSON object")
            acts = set()
            for name in data.get("activities", ["CPU", "NPU"]):
                if str(name).upper() not in ("CPU", "NPU"):
                    raise ValueError(f"unknown activity {name!r} (use \"CPU\" and/or \"NPU\")")
                acts.add(getattr(ProfilerActivity, str(name).upper()))
            active = data.get("active", 1)
            start_step = data.get("start_step", 0)
            if not isinstance(active, int) or active < 1:
                raise ValueError(f"active must be an int >= 1; got {active!r}")
            if not isinstance(start_step, int) or start_step < 0:
                raise ValueError(f"start_step must be an int >= 0; got {start_step!r}")
            exp = dict(data.get("experimental_config") or {})
            exp_kwargs = {k: exp[k] for k in ("profiler_level", "l2_cache", "msprof_tx", "data_simplification",
                                               "record_op_args", "op_attr", "gc_detect_threshold", "export_type")
                          if k in exp}
            if "aic_metrics" in exp:
                from .experimental_config import AiCMetrics

                exp_kwargs["aic_metrics"] = getattr(AiCMetrics, exp["aic_metrics"], exp["aic_metrics"])
            return {"activities": acts, "active": active, "start_step": start_step,
                    "prof_dir": data.get("prof_dir") or self.path, "analyse": bool(data.get("analyse", False)),
                    "kwargs": {k: bool(data.get(k, False)) for k in ("record_shapes", "profile_memory", "with_stack",
                                                                     "with_flops", "with_modules")},
                    "experimental_config": _ExperimentalConfig(**exp_kwargs),
                    "ranks": set(data.get("rank_list", [])) if data.get("is_rank") else None,
                    "metadata": data.get("metadata") or {}}
        except (OSError, ValueError, TypeError) as e:
            warnings.warn(f"dynamic_profile: {cfg_path} is not a valid profiler config, nothing is collected: {e}")
            return None

    def _poll(self) -> None:
        cfg = os.path.join(self.path, CONFIG_NAME)
        try:
            mtime = os.stat(cfg).st_mtime_ns
        except OSError:
            return
        if mtime == self.mtime:
            return
        self.mtime = mtime
        parsed = self._parse(cfg)
        if parsed is None:
            return
        if parsed["ranks"] is not None and _run_dir.rank_id() not in parsed["ranks"]:
            return
        self.pending = parsed

    def _begin(self, cfg: dict) -> None:
        handler = tensorboard_trace_handler(cfg["prof_dir"], analyse_flag=cfg["analyse"])
        with warnings.catch_warnings():  # no warm-up: the job is already warm
            warnings.filterwarnings("ignore", message=".*warmup.*")
            self.prof = profile(activities=cfg["activities"], on_trace_ready=handler,
                                schedule=Schedule(wait=0, active=cfg["active"], repeat=1),
                                experimental_config=cfg["experimental_config"], **cfg["kwargs"])
        for key, value in cfg["metadata"].items():
            self.prof.add_metadata_json(str(key), json.dumps(value))
        self.handler = handler
        self.remaining = cfg["active"]
        self.prof.start()

    def _finish(self) -> None:
        prof, self.prof = self.prof, None
        prof.stop()
        self.run_dirs.extend(self.handler.run_dirs)

    def step(self) -> None:
        if self.path is None:
            raise RuntimeError("dynamic_profile.step() before dynamic_profile.init(path)")
        self.step_num += 1
        if self.prof is not None:
            self.prof.step()  # the window's last step hands the trace to the handler
            self.remaining -= 1
            if self.remaining == 0:
                self._finish()
            return
        self._poll()
        if self.pending is not None and self.step_num >= self.pending["start_step"]:
            cfg, self.pending = self.pending, None
            self._begin(cfg)

    def start(self, config_path: str | None = None) -> None:
        if self.path is None:
            raise RuntimeError("dynamic_profile.start() before dynamic_profile.init(path)")
        parsed = self._parse(config_path or os.path.join(self.path, CONFIG_NAME))
        if parsed is not None and self.prof is None:
            self._begin(parsed)


_state = _DynamicProfile()


def init(path: str) -> None:
    """Watches `path`/profiler_config.json (written from a template if missing)."""
    _state.init(path)


def step() -> None:
    """Marks a step boundary: records the next step of a running collection, or starts one after the config
    file changed."""
    _state.step()


def start(config_path: str | None = None) -> None:
    """Starts a collection now with `config_path` (default: the watched file)."""
    _state.start(config_path)
