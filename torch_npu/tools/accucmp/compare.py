"""Matching two dumps op by op, per-tensor rows, and root-cause marking.

An op whose outputs fail while its inputs pass computed wrongly itself: a root cause. One whose
inputs already differ was contaminated by an op before it. The first root cause in execution order
is the likely root cause.
"""

from typing import Iterable, List, Optional, Tuple

import numpy as np

from torch_npu.tools.accucmp.metrics import UNMATCHED, compare_arrays, compare_stats
from torch_npu.tools.accucmp.report import write_reports
from torch_npu.tools.accucmp.result import (CONTAMINATED, LIKELY_ROOT_CAUSE, ONLY_BENCH, ONLY_NPU, ROOT_CAUSE,
                                            CompareResult, OpResult, Row)
from torch_npu.utils.dump_file import DumpFile, TensorRecord

# The result types and cause labels live in result.py (reports use them too); they stay importable
# from here, where callers have always found them.
__all__ = ["CONTAMINATED", "LIKELY_ROOT_CAUSE", "ONLY_BENCH", "ONLY_NPU", "ROOT_CAUSE", "CompareResult", "OpResult",
           "Row", "compare_files", "mark_causes", "tensor_row"]


def tensor_row(npu_name: str, bench_name: str, npu: Optional[TensorRecord], bench: Optional[TensorRecord],
               kind: str) -> Row:
    """The row of one tensor pair: metrics from the data when both sides have it, from the
    statistics otherwise; Unmatched when the shapes differ."""
    row = Row(npu_name=npu_name, bench_name=bench_name, kind=kind)
    if npu is not None:
        row.npu_dtype, row.npu_shape, row.npu_stats = npu.dtype, str(list(npu.shape)), dict(npu.stats or {})
    if bench is not None:
        row.bench_dtype, row.bench_shape, row.bench_stats = bench.dtype, str(list(bench.shape)), dict(bench.stats or {})
    if npu is None or bench is None:
        row.verdict = UNMATCHED
        row.message = "no counterpart"
        return row
    if tuple(npu.shape) != tuple(bench.shape):
        row.verdict = UNMATCHED
        row.message = "shapes differ"
        return row
    if npu.data is not None and bench.data is not None:
        metrics = compare_arrays(np.asarray(npu.data), np.asarray(bench.data))
    else:
        metrics = compare_stats(row.npu_stats, row.bench_stats)
    row.cosine, row.max_abs, row.max_rel = metrics["cosine"], metrics["max_abs"], metrics["max_rel"]
    row.thousandth, row.five_thousandths = metrics["thousandth"], metrics["five_thousandths"]
    row.verdict, row.message = metrics["verdict"], metrics["message"]
    return row


def mark_causes(ops: List[OpResult]) -> None:
    """Marks failing ops as root causes (inputs pass) or contaminated (inputs differ); the first
    root cause in execution order becomes the likely root cause. `ops` must be in order."""
    first = True
    for op in ops:
        op.cause = ""
        if not op.failed():
            continue
        if op.inputs_pass():
            op.cause = LIKELY_ROOT_CAUSE if first else ROOT_CAUSE
            first = False
        else:
            op.cause = CONTAMINATED
        for row in op.inputs + op.outputs:
            row.cause = op.cause


def _op_rows(npu: DumpFile, bench: DumpFile, name: str, seqid: int, kind: str) -> List[Row]:
    n_npu, n_bench = npu.tensor_count(name, seqid, kind), bench.tensor_count(name, seqid, kind)
    rows = []
    for i in range(max(n_npu, n_bench)):
        path = f"{name}/{seqid}/{kind}/{i}"
        a = npu.tensor(name, seqid, kind, i) if i < n_npu else None
        b = bench.tensor(name, seqid, kind, i) if i < n_bench else None
        rows.append(tensor_row(path if a is not None else "", path if b is not None else "", a, b, kind))
    return rows


def compare_files(npu_path: str, bench_path: str, out_dir: Optional[str] = None,
                  progress: bool = True) -> CompareResult:
    """Compares the dump of an NPU run with a benchmark dump (e.g. the CPU's). Writes CSV and
    HTML reports into `out_dir` when given."""
    with DumpFile(npu_path) as npu, DumpFile(bench_path) as bench:
        npu_keys, bench_keys = set(npu.keys()), set(bench.keys())
        matched = npu_keys & bench_keys

        def order_of(key: Tuple[str, int]) -> Tuple[int, str, int]:
            source = bench if key in bench_keys else npu
            return int(source.attrs(*key).get("order", 0)), key[0], key[1]

        ops: List[OpResult] = []
        keys = sorted(matched, key=order_of)
        for name, seqid in _progress(keys, progress, "comparing"):
            meta = bench.attrs(name, seqid)
            result = OpResult(name=name, seqid=seqid, op=str(meta.get("op", "")), order=int(meta.get("order", 0)),
                              phase=str(meta.get("phase", "")), stack=str(npu.attrs(name, seqid).get("stack", "")),
                              module=str(npu.attrs(name, seqid).get("module", "")))
            result.inputs = _op_rows(npu, bench, name, seqid, "input")
            result.outputs = _op_rows(npu, bench, name, seqid, "output")
            for row in result.inputs + result.outputs:
                row.op, row.stack, row.module = result.op, result.stack, result.module
            ops.append(result)
        mark_causes(ops)
        unmatched = [f"{k[0]}/{k[1]} ({ONLY_NPU})" for k in sorted(npu_keys - matched, key=order_of)]
        unmatched += [f"{k[0]}/{k[1]} ({ONLY_BENCH})" for k in sorted(bench_keys - matched, key=order_of)]
    result = CompareResult(ops=ops, unmatched=unmatched, npu_path=npu_path, bench_path=bench_path)
    if out_dir is not None:
        write_reports(result, out_dir)
    return result


def _progress(items: List, enabled: bool, what: str) -> Iterable:
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=what, unit="op", leave=False)
