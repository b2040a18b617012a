"""The converter's output files: change_list.csv, unsupported_op.csv / .xlsx, msFmkTranspltlog.txt and, in analysis
mode, cuda_op_list.csv and unsupported_api.csv."""

from __future__ import annotations

import csv
import datetime
import os

from torch_npu.tools.transplt import changes as ch

CHANGE_COLUMNS = ["File", "Start Line", "End Line", "Operation Type", "Message"]
UNSUPPORTED_OP_COLUMNS = ["File", "Line", "API", "ATen Op", "Verdict", "Suggestion"]
CUDA_OP_COLUMNS = ["File", "Line", "Operation Type", "CUDA API and its npu counterpart"]
UNSUPPORTED_API_COLUMNS = ["File", "Line", "API", "What to do"]


def _write_csv(path: str, columns: list[str], rows: list[list]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerows(rows)
    os.replace(tmp, path)


def _write_xlsx(path: str, columns: list[str], rows: list[list], title: str) -> None:
    from openpyxl import Workbook
    from openpyxl.styles import Font

    wb = Workbook()
    ws = wb.active
    ws.title = title
    ws.append(columns)
    for cell in ws[1]:
        cell.font = Font(bold=True)
    for row in rows:
        ws.append(row)
    for i, col in enumerate(columns, start=1):
        width = max([len(str(col))] + [len(str(r[i - 1])) for r in rows]) + 2
        ws.column_dimensions[ws.cell(row=1, column=i).column_letter].width = min(width, 80)
    ws.freeze_panes = "A2"
    tmp = path + ".tmp"
    wb.save(tmp)
    os.replace(tmp, path)


def _sorted(items, key):
    return sorted(items, key=key)


def write_change_list(out_dir: str, changes: list[ch.Change]) -> str:
    path = os.path.join(out_dir, "change_list.csv")
    rows = [[c.file, c.start_line, c.end_line, c.operation, c.message]
            for c in _sorted(changes, lambda c: (c.file, c.start_line, c.operation != ch.MANUAL))]
    _write_csv(path, CHANGE_COLUMNS, rows)
    return path


def write_unsupported_ops(out_dir: str, ops) -> list[str]:
    rows = [[o.file, o.line, o.api, o.op, o.verdict, o.suggestion] for o in _sorted(ops, lambda o: (o.file, o.line))]
    csv_path = os.path.join(out_dir, "unsupported_op.csv")
    xlsx_path = os.path.join(out_dir, "unsupported_op.xlsx")
    _write_csv(csv_path, UNSUPPORTED_OP_COLUMNS, rows)
    _write_xlsx(xlsx_path, UNSUPPORTED_OP_COLUMNS, rows, "unsupported_op")
    return [csv_path, xlsx_path]


def write_analysis(out_dir: str, changes: list[ch.Change], ops) -> list[str]:
    cuda = [[c.file, c.start_line, c.operation, c.message]
            for c in _sorted(changes, lambda c: (c.file, c.start_line)) if c.operation not in (ch.MANUAL,
                                                                                              ch.UNPARSABLE)]
    manual = [[c.file, c.start_line, c.message.split(": ", 1)[0] if ": " in c.message else "", c.message]
              for c in changes if c.operation in (ch.MANUAL, ch.UNPARSABLE)]
    manual += [[o.file, o.line, o.api, f"reaches {o.op}: {o.suggestion}"] for o in ops]
    paths = [os.path.join(out_dir, "cuda_op_list.csv"), os.path.join(out_dir, "unsupported_api.csv")]
    _write_csv(paths[0], CUDA_OP_COLUMNS, cuda)
    _write_csv(paths[1], UNSUPPORTED_API_COLUMNS, sorted(manual, key=lambda r: (r[0], r[1])))
    return paths


class Log:
    """msFmkTranspltlog.txt: what the converter did, file by file, with timestamps."""

    def __init__(self, path: str):
        self.path = path
        self.lines: list[str] = []

    def __call__(self, level: str, message: str) -> None:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        self.lines.append(f"{stamp} [{level}] {message}")

    def save(self) -> None:
        with open(self.path, "w", encoding="utf-8") as f:
            f.write("\n".join(self.lines) + "\n")
