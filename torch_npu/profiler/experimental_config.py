"""torch_npu.profiler._ExperimentalConfig: how much a profile collects (profiler_level) and how it is
exported (export_type), with torch_npu's names and values."""

from __future__ import annotations

import warnings

__all__ = ["_ExperimentalConfig", "ProfilerLevel", "AiCMetrics", "ExportType", "HostSystem", "supported_profiler_level",
           "supported_ai_core_metrics", "supported_export_type"]


class ProfilerLevel:
    """Level_none: host ops only. Level0: host ops and every device task (kernel_details, trace rows per
    stream). Level1: also the runtime API layer ("CANN" rows) and api_statistic.csv. Level2: as Level1 (its
    extra hardware data has no counterpart on the software NPU)."""

    Level0 = "Level0"
    Level1 = "Level1"
    Level2 = "Level2"
    Level_none = "Level_none"


class AiCMetrics:
    PipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    ArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    Memory = "ACL_AICORE_MEMORY_BANDWIDTH"
    MemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    MemoryUB = "ACL_AICORE_MEMORY_UB"
    ResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    L2Cache = "ACL_AICORE_L2_CACHE"
    AiCoreNone = "ACL_AICORE_NONE"


class ExportType:
    Text = "text"
    Db = "db"


class HostSystem:
    """Host system data a profile may ask for (`host_sys=[...]`)."""

    CPU = "cpu"
    MEM = "mem"
    DISK = "disk"
    NETWORK = "network"
    OSRT = "osrt"


_HOST_SYSTEMS = tuple(v for k, v in vars(HostSystem).items() if not k.startswith("_"))


def _domains(name, value):
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(d, str) for d in value):
        raise TypeError(f"{name} must be a list of mstx domain names (str); got {value!r}")
    return list(value)


_LEVELS = (ProfilerLevel.Level0, ProfilerLevel.Level1, ProfilerLevel.Level2, ProfilerLevel.Level_none)
_METRICS = tuple(v for k, v in vars(AiCMetrics).items() if not k.startswith("_"))


def supported_profiler_level() -> set:
    return {ProfilerLevel.Level0, ProfilerLevel.Level1, ProfilerLevel.Level2}


def supported_ai_core_metrics() -> set:
    return set(_METRICS) - {AiCMetrics.AiCoreNone}


def supported_export_type() -> set:
    return {ExportType.Text, ExportType.Db}


class _ExperimentalConfig:
    def __init__(self, profiler_level: str = ProfilerLevel.Level0, aic_metrics: str = AiCMetrics.AiCoreNone,
                 l2_cache: bool = False, msprof_tx: bool = False, mstx: bool = False, data_simplification: bool = True,
                 record_op_args: bool = False, op_attr: bool = False, gc_detect_threshold: float | None = None,
                 export_type: str = ExportType.Text, host_sys: list | None = None,
                 mstx_domain_include: list | None = None, mstx_domain_exclude: list | None = None,
                 sys_io: bool = False, sys_interconnection: bool = False):
        if profiler_level not in _LEVELS:
            raise ValueError(f"profiler_level must be one of {', '.join('ProfilerLevel.' + v for v in _LEVELS)}; "
                             f"got {profiler_level!r}")
        if aic_metrics not in _METRICS:
            raise ValueError(f"aic_metrics must be an AiCMetrics value ({', '.join(_METRICS)}); got {aic_metrics!r}")
        if isinstance(export_type, (list, tuple)):  # torch_npu accepts a list of export types
            export_type = export_type[0] if len(export_type) == 1 else export_type
        if export_type not in (ExportType.Text, ExportType.Db):
            raise ValueError(f"export_type must be ExportType.Text ('text') or ExportType.Db ('db'); got {export_type!r}")
        for name, value in (("l2_cache", l2_cache), ("msprof_tx", msprof_tx), ("mstx", mstx),
                            ("record_op_args", record_op_args), ("sys_io", sys_io),
                            ("sys_interconnection", sys_interconnection),
                            ("op_attr", op_attr), ("data_simplification", data_simplification)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool; got {value!r}")
        if gc_detect_threshold is not None and (not isinstance(gc_detect_threshold, (int, float))
                                                or gc_detect_threshold < 0):
            raise ValueError(f"gc_detect_threshold must be a non-negative number of ms or None; got {gc_detect_threshold!r}")
        if profiler_level in (ProfilerLevel.Level0, ProfilerLevel.Level_none) and aic_metrics != AiCMetrics.AiCoreNone:
            warnings.warn("aic_metrics needs profiler_level Level1 or Level2; it is reset to AiCoreNone")
            aic_metrics = AiCMetrics.AiCoreNone
        if aic_metrics != AiCMetrics.AiCoreNone or l2_cache:
            warnings.warn("AI Core metrics and L2 cache data come from NPU hardware counters, which the software "
                          "NPU does not have: they are not collected")
        host_sys = list(host_sys or [])
        unknown = [h for h in host_sys if h not in _HOST_SYSTEMS]
        if unknown:
            raise ValueError(f"host_sys takes HostSystem values ({', '.join(_HOST_SYSTEMS)}); got {unknown!r}")
        include = _domains("mstx_domain_include", mstx_domain_include)
        exclude = _domains("mstx_domain_exclude", mstx_domain_exclude)
        if include is not None and exclude is not None:
            warnings.warn("mstx_domain_include and mstx_domain_exclude are both set: only the include list is used")
            exclude = None
        if host_sys or sys_io or sys_interconnection:
            warnings.warn("host_sys, sys_io and sys_interconnection are sampled by the Ascend toolkit's system "
                          "profiler on NPU hosts; the software NPU does not collect them")
        self._host_sys = host_sys
        self._mstx_domain_include = include
        self._mstx_domain_exclude = exclude
        self._sys_io = sys_io
        self._sys_interconnection = sys_interconnection
        self._profiler_level = profiler_level
        self._aic_metrics = aic_metrics
        self._l2_cache = l2_cache
        # mstx is torch_npu's newer name of msprof_tx (markers and ranges recorded); either turns it on.
        self._msprof_tx = msprof_tx or mstx
        self._data_simplification = data_simplification
        self.record_op_args = record_op_args
        self._op_attr = op_attr
        self._gc_detect_threshold = gc_detect_threshold
        self._export_type = export_type

    @property
    def profiler_level(self) -> str:
        return self._profiler_level

    @property
    def export_type(self) -> str:
        return self._export_type

    @property
    def mstx(self) -> bool:
        """Whether torch.npu.mstx markers and ranges are recorded."""
        return self._msprof_tx

    def mstx_domain_recorded(self, domain: str) -> bool:
        """Whether markers of `domain` are recorded (mstx on, and the domain lists let it through)."""
        if not self._msprof_tx:
            return False
        if self._mstx_domain_include is not None:
            return domain in self._mstx_domain_include
        return self._mstx_domain_exclude is None or domain not in self._mstx_domain_exclude

    @property
    def with_gc(self) -> bool:
        return self._gc_detect_threshold is not None

    def to_dict(self) -> dict:
        return {"profiler_level": self._profiler_level, "aic_metrics": self._aic_metrics,
                "l2_cache": self._l2_cache, "msprof_tx": self._msprof_tx,
                "data_simplification": self._data_simplification, "record_op_args": self.record_op_args,
                "op_attr": self._op_attr, "gc_detect_threshold": self._gc_detect_threshold,
                "export_type": self._export_type, "host_sys": self._host_sys,
                "mstx_domain_include": self._mstx_domain_include, "mstx_domain_exclude": self._mstx_domain_exclude,
                "sys_io": self._sys_io, "sys_interconnection": self._sys_interconnection}
