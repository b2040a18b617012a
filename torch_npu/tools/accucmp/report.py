"""CSV and HTML reports of a comparison."""

import csv
import html
import math
import os
import time
from typing import List, Optional

from torch_npu.tools.accucmp.metrics import NO, UNMATCHED
from torch_npu.tools.accucmp.result import CONTAMINATED, LIKELY_ROOT_CAUSE, CompareResult, Row, all_rows, summary_text

COLUMNS = ["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Shape", "Bench Shape", "Cosine",
           "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio",
           "NPU max", "NPU min", "NPU mean", "NPU L2norm", "Bench max", "Bench min", "Bench mean",
           "Bench L2norm", "Accuracy Reached or Not", "Root Cause", "Op", "Python Line", "Module", "Err Message"]


def _num(value: Optional[float]) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    return f"{value:.6g}"


def _cells(row: Row) -> List[str]:
    s, b = row.npu_stats, row.bench_stats
    return [row.npu_name, row.bench_name, row.npu_dtype, row.bench_dtype, row.npu_shape, row.bench_shape,
            _num(row.cosine), _num(row.max_abs), _num(row.max_rel), _num(row.thousandth),
            _num(row.five_thousandths), _num(s.get("max")), _num(s.get("min")), _num(s.get("mean")),
            _num(s.get("norm")), _num(b.get("max")), _num(b.get("min")), _num(b.get("mean")),
            _num(b.get("norm")), row.verdict, row.cause, row.op, row.stack, row.module, row.message]


def write_csv(result: CompareResult, path: str) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for row in all_rows(result):
            writer.writerow(_cells(row))


_STYLE = """body{font-family:sans-serif;font-size:13px}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:2px 6px;white-space:nowrap}th{background:#eee;position:sticky;top:0}
tr.no td{background:#fde2e2}tr.unmatched td{background:#fff3cd}tr.likely td{background:#f5a3a3;font-weight:bold}
tr.contaminated td{background:#fbeeee;color:#777}pre{background:#f6f6f6;padding:8px}"""


def write_html(result: CompareResult, path: str) -> None:
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>accuracy compare</title>"
             f"<style>{_STYLE}</style></head><body>",
             f"<h2>NPU {html.escape(result.npu_path)} vs benchmark {html.escape(result.bench_path)}</h2>",
             f"<pre>{html.escape(summary_text(result))}</pre><table><tr>",
             "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS), "</tr>"]
    for row in all_rows(result):
        cls = ("likely" if row.cause == LIKELY_ROOT_CAUSE else "contaminated" if row.cause == CONTAMINATED
               else "no" if row.verdict == NO else "unmatched" if row.verdict == UNMATCHED else "")
        parts.append(f"<tr class='{cls}'>" + "".join(f"<td>{html.escape(c)}</td>" for c in _cells(row)) + "</tr>")
    parts.append("</table></body></html>")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def write_reports(result: CompareResult, out_dir: str) -> None:
    """compare_result_{time}.csv and .html in `out_dir` (created if needed)."""
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, f"compare_result_{time.strftime('%Y%m%d%H%M%S')}")
    result.csv_path, result.html_path = stem + ".csv", stem + ".html"
    write_csv(result, result.csv_path)
    write_html(result, result.html_path)
