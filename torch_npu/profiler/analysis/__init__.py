"""Turns a profiling run's raw data (FRAMEWORK/) into torch_npu's output files (ASCEND_PROFILER_OUTPUT/)."""

from __future__ import annotations

import json
import os
import sqlite3

from . import _memory_comm, _tables, _trace_view
from ._model import Run

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
LEVELS = ("Level_none", "Level0", "Level1", "Level2")


def _info(run_dir: str) -> dict:
    for name in sorted(os.listdir(run_dir)):
        if name.startswith("profiler_info") and name.endswith(".json"):
            with open(os.path.join(run_dir, name)) as f:
                return json.load(f)
    return {}


def export(run_dir: str, level: str | None = None, export_type: str | None = None) -> str:
    """Writes ASCEND_PROFILER_OUTPUT/ of `run_dir` and returns its path. Level and export type default to the
    run's own (profiler_info.json)."""
    info = _info(run_dir)
    exp = info.get("config", {}).get("experimental_config", {})
    level = level or exp.get("profiler_level", "Level0")
    export_type = export_type or exp.get("export_type", "text")
    rank = info.get("rank_id")
    run = Run.load(run_dir)
    out = os.path.join(run_dir, OUTPUT_DIR)
    os.makedirs(out, exist_ok=True)

    views = [("kernel_details", _tables.kernel_rows(run, level)),
             ("operator_details", _tables.operator_rows(run)),
             ("op_statistic", _tables.op_statistic_rows(run)),
             ("step_trace_time", _tables.step_trace_rows(run))]
    if run.memory:
        views += [("operator_memory", _memory_comm.operator_memory_rows(run)),
                  ("memory_record", _memory_comm.memory_record_rows(run))]
    if level in ("Level1", "Level2"):
        views.append(("api_statistic", _tables.api_statistic_rows(run)))

    if export_type == "db":
        suffix = f"_{rank}" if rank is not None else ""
        db_path = os.path.join(out, f"ascend_pytorch_profiler{suffix}.db")
        if os.path.exists(db_path):
            os.remove(db_path)
        with sqlite3.connect(db_path) as db:
            for name, (headers, rows) in views:
                cols = ", ".join(f'"{h}"' for h in headers)
                db.execute(f'CREATE TABLE "{name}" ({cols})')
                db.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(headers))})', rows)
            db.execute('CREATE TABLE "trace_view" ("json")')
            db.execute('INSERT INTO "trace_view" VALUES (?)', (json.dumps(_trace_view.build(run, level)),))
    else:
        for name, (headers, rows) in views:
            _tables.write_csv(os.path.join(out, name + ".csv"), headers, rows)
        _trace_view.write(run, os.path.join(out, "trace_view.json"), level)
    _memory_comm.write_communication(run, os.path.join(out, "communication.json"))
    return out
