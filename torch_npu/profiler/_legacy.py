"""The seed-era spelling of the op-level profiler, patched onto torch.autograd.profiler:

    with torch.autograd.profiler.profile(use_npu=True, record_shapes=True, profile_memory=True) as prof:
        ...
    print(prof)                       # Name, Self CPU %, ..., Self NPU %, Self NPU, NPU total, NPU time avg, # of Calls
    prof.export_chrome_trace("trace.json")

use_npu=True means use_device="npu" through the npu activity plugin (device time per op from the tasks each
op launched); use_npu_simple=True keeps only the innermost ops in the table and the exported trace."""

from __future__ import annotations

import torch.autograd.profiler as _autograd_profiler
from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, _format_memory, _format_time, _format_time_share

_TorchProfile = _autograd_profiler.profile


def legacy_table(events, *, profile_memory: bool, record_shapes: bool, sort_by=None, row_limit: int = 100,
                 name_width: int = 55) -> str:
    """The seed's table: exactly its columns, in its order."""
    events = [e for e in events if e.count > 0]
    if sort_by is not None:
        events = sorted(events, key=lambda e: getattr(e, sort_by), reverse=True)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self NPU %",
               "Self NPU", "NPU total", "NPU time avg"]
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem", "NPU Mem", "Self NPU Mem"]
    headers.append("# of Calls")
    shapes = record_shapes and any(e.input_shapes for e in events)
    if shapes:
        headers.append("Input Shapes")
    sum_cpu = sum(e.self_cpu_time_total for e in events)
    sum_npu = sum(e.self_device_time_total for e in events
                  if e.device_type == DeviceType.PrivateUse1 or (e.device_type == DeviceType.CPU and e.is_legacy))
    rows = []
    for e in events[:row_limit]:
        name = e.key if len(e.key) < name_width - 3 else e.key[:name_width - 6] + "..."
        row = [name, _format_time_share(e.self_cpu_time_total, sum_cpu), _format_time(e.self_cpu_time_total),
               _format_time_share(e.cpu_time_total, sum_cpu) if not e.is_async else "0.00%",
               _format_time(e.cpu_time_total), _format_time(e.cpu_time),
               _format_time_share(e.self_device_time_total, sum_npu), _format_time(e.self_device_time_total),
               _format_time(e.device_time_total), _format_time(e.device_time)]
        if profile_memory:
            row += [_format_memory(e.cpu_memory_usage), _format_memory(e.self_cpu_memory_usage),
                    _format_memory(e.device_memory_usage), _format_memory(e.self_device_memory_usage)]
        row.append(str(e.count))
        if shapes:
            row.append(str(e.input_shapes))
        rows.append(row)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    sep = "  ".join("-" * w for w in widths)
    fmt = lambda cells: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    lines = [sep, fmt(headers), sep] + [fmt(r) for r in rows] + [sep,
             f"Self CPU time total: {_format_time(sum_cpu)}", f"Self NPU time total: {_format_time(sum_npu)}"]
    return "\n".join(lines) + "\n"


class profile(_TorchProfile):
    """torch.autograd.profiler.profile, also taking use_npu / use_npu_simple."""

    def __init__(self, enabled=True, *, use_npu: bool = False, use_npu_simple: bool = False, **kwargs):
        if not isinstance(use_npu, bool) or not isinstance(use_npu_simple, bool):
            raise TypeError(f"use_npu and use_npu_simple must be bools; got {use_npu!r}, {use_npu_simple!r}")
        device = kwargs.get("use_device")
        if use_npu:
            if device not in (None, "npu"):
                raise ValueError(f"use_npu=True profiles the npu device; it conflicts with use_device={device!r}")
            kwargs["use_device"] = "npu"
            kwargs.setdefault("use_kineto", True)  # device time from the tasks each op launched
        self._npu_legacy = use_npu  # the seed's table; use_device="npu" keeps PyTorch's
        self._npu_simple = use_npu_simple
        super().__init__(enabled, **kwargs)

    def _simple_events(self) -> EventList:
        """Innermost ops only (with the device work they launched)."""
        events = [e for e in self.function_events if e.device_type == DeviceType.CPU and not e.cpu_children]
        out = EventList(events, use_device=self.use_device, profile_memory=self.profile_memory,
                        with_flops=self.with_flops)
        out._tree_built = True
        return out

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        if self._npu_simple and self.enabled:
            return self._simple_events().key_averages(group_by_input_shape, group_by_stack_n,
                                                      group_by_overload_name)
        return super().key_averages(group_by_input_shape, group_by_stack_n, group_by_overload_name)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False):
        if not (self._npu_legacy and self.enabled):
            return super().table(sort_by, row_limit, max_src_column_width, max_name_column_width,
                                 max_shapes_column_width, header, top_level_events_only)
        averages = self.key_averages(group_by_input_shape=self.record_shapes)
        out = legacy_table(averages, profile_memory=self.profile_memory, record_shapes=self.record_shapes,
                           sort_by=sort_by, row_limit=row_limit, name_width=max_name_column_width)
        return (header + "\n" + out) if header else out

    def __str__(self):
        if self._npu_legacy and self.enabled and getattr(self, "kineto_results", None) is not None:
            return self.table()
        return super().__str__()

    def export_chrome_trace(self, path, metadata=None, use_python_export=False):
        if self._npu_simple and self.enabled:
            return self._export_simple(path)
        return super().export_chrome_trace(path, metadata, use_python_export)

    def _export_simple(self, path) -> None:
        """torch_npu's trace view of the innermost ops and the device tasks they launched."""
        from torch_npu import _C

        from . import _collect
        from .analysis import _trace_view
        from .analysis._model import Run

        host = _collect.host_data(self, with_memory=False)
        device = {"records": [list(r) for r in _C._profiler_activities()] if self.use_device == "npu" else []}
        leaves = {op.id for op in Run(host, device).ops if not op.children and not op.user_annotation
                  and not op.python}
        host["ops"] = [o for o in host["ops"] if o["id"] in leaves]
        device["records"] = [r for r in device["records"] if r[3] in leaves]
        _trace_view.write(Run(host, device), path)


def install() -> None:
    """torch.autograd.profiler.profile accepts the npu arguments (torch.profiler.profile builds on it too)."""
    if _autograd_profiler.profile is not profile:
        _autograd_profiler.profile = profile
