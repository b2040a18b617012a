"""Writes an OpReport as markdown, HTML and CSV (op_report.md / .html / .csv)."""

from __future__ import annotations

import csv
import html
import os

from ._verdicts import EXPLAIN, ORDER

HEADERS = ["Op", "Verdict", "Calls", "Input shapes (most common)", "Dtypes", "Devices", "Detail"]


def _rows(report):
    for u in report.ops:
        shapes = ", ".join(f"({s})" if s else "()" for s, _ in u.shapes.most_common(3))
        if len(u.shapes) > 3:
            shapes += f", ... ({len(u.shapes)} distinct)"
        dtypes = ", ".join(d or "-" for d, _ in u.dtypes.most_common(3))
        devices = ", ".join(sorted(u.devices)) or "-"
        yield [u.op, u.verdict, u.calls, shapes, dtypes, devices, u.detail]


def write_reports(report, out_dir: str, title: str = "Op-support report") -> dict:
    out_dir = os.path.abspath(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise OSError(f"op report: cannot create the output directory {out_dir!r}: {e.strerror}") from None
    rows = list(_rows(report))
    paths = {ext: os.path.join(out_dir, f"op_report.{ext}") for ext in ("md", "html", "csv")}
    legend = [(v, EXPLAIN[v]) for v in sorted(EXPLAIN, key=ORDER.get)]

    with open(paths["csv"], "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADERS)
        w.writerows(rows)

    def md_cell(x) -> str:
        return str(x).replace("|", "\\|")

    md = [f"# {title}", "", f"**{report.summary()}**", "", "| " + " | ".join(HEADERS) + " |",
          "|" + "---|" * len(HEADERS)]
    md += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows]
    md += ["", "Verdicts, blockers first:", ""] + [f"- **{v}**: {e}" for v, e in legend]
    with open(paths["md"], "w") as f:
        f.write("\n".join(md) + "\n")

    colors = {"CPU fallback": "#f8d7da", "generic executor": "#fff3cd", "unknown": "#e2e3e5"}
    body = "".join(
        f'<tr style="background:{colors.get(r[1], "#ffffff")}">' + "".join(f"<td>{html.escape(str(c))}</td>" for c in r)
        + "</tr>\n" for r in rows)
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
            "padding:3px 6px;font-size:13px}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p><b>{html.escape(report.summary())}</b></p><table><tr>"
            + "".join(f"<th>{html.escape(h)}</th>" for h in HEADERS) + "</tr>\n" + body + "</table><ul>"
            + "".join(f"<li><b>{html.escape(v)}</b>: {html.escape(e)}</li>" for v, e in legend)
            + "</ul></body></html>\n")
    with open(paths["html"], "w") as f:
        f.write(page)
    return paths
