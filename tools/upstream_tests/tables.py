"""The upstream-tests summary: a table per test folder, failures by cause, and its section of
docs/conformance.md."""

import re
from collections import Counter, defaultdict
from pathlib import Path

from doc_sections import replace_section  # tools/optests, on the path run.py sets

BEGIN = "<!-- upstream-tests:begin (written by make upstream-tests) -->"
END = "<!-- upstream-tests:end -->"


def folder_rows(results):
    """folder -> [files run, files fully passing, tests passed, failed, errored, skipped, chip-specific]."""
    rows = {}
    for r in results:
        row = rows.setdefault(r.folder, [0] * 7)
        if r.status == "chip-specific":
            row[6] += 1
            continue
        row[0] += 1
        row[1] += r.status == "passed"
        row[2] += r.passed
        row[3] += r.failures
        row[4] += r.errors
        row[5] += r.skipped
    return dict(sorted(rows.items()))


def _pct(passed, failed, errored):
    total = passed + failed + errored
    return f"{100.0 * passed / total:.1f}%" if total else "-"


def _by_cause(results):
    groups = defaultdict(list)
    for r in results:
        if r.status not in ("passed", "chip-specific"):
            groups[r.cause].append(r)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def summary_lines(results):
    lines = [f"{'folder':18s} {'files':>5s} {'pass':>5s} {'tests ok':>8s} {'failed':>7s} {'errors':>7s} "
             f"{'skipped':>7s} {'ok rate':>8s} {'chip':>5s}"]
    for folder, (n, ok, p, f, e, s, chip) in folder_rows(results).items():
        lines.append(f"{folder:18s} {n:5d} {ok:5d} {p:8d} {f:7d} {e:7d} {s:7d} {_pct(p, f, e):>8s} {chip:5d}")
    lines.append("failing files by cause:")
    for cause, group in _by_cause(results):
        details = Counter(r.detail for r in group if r.detail)
        top = ", ".join(f"{d} ({n})" if n > 1 else d for d, n in details.most_common(8))
        lines.append(f"  {len(group):4d}  {cause}" + (f": {top}" if top else ""))
    return lines


def _short(text, limit=100):
    text = re.sub(r"\s+", " ", text).replace("|", "/").replace("`", "'")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _doc_section(results, meta):
    out = [BEGIN, "## Ascend/pytorch's unit tests (`make upstream-tests`)", "",
           "`make upstream-tests PYTORCH_NPU=<Ascend/pytorch checkout>` runs the files of upstream's `test/npu`, "
           "`contrib`, `optim`, `allocator`, `trans_contiguous`, `profiler` and the hccl / c10d / ddp files of "
           "`distributed` unchanged, each under pytest in its own process (300 s timeout, 900 s for the two slow "
           "files, 2 at a time). "
           "A file passes when none of its tests fails or errors. The ok rate is tests passed over tests "
           "that ran and did not skip.", "",
           f"Latest run: {meta.get('selection', '')}, {meta['seconds'] // 60} min.", "",
           "| folder | files | fully passing | tests passed | failed | errors | skipped | ok rate | chip-specific |",
           "|---|---|---|---|---|---|---|---|---|"]
    totals = [0] * 7
    api = [0] * 7  # without profiler/, whose files mostly test upstream's private analysis modules
    for folder, row in folder_rows(results).items():
        totals = [a + b for a, b in zip(totals, row)]
        if folder != "profiler":
            api = [a + b for a, b in zip(api, row)]
        n, ok, p, f, e, s, chip = row
        out.append(f"| {folder} | {n} | {ok} | {p} | {f} | {e} | {s} | {_pct(p, f, e)} | {chip} |")
    for label, row in (("all but profiler", api), ("all", totals)):
        n, ok, p, f, e, s, chip = row
        out.append(f"| **{label}** | {n} | {ok} | {p} | {f} | {e} | {s} | {_pct(p, f, e)} | {chip} |")
    chip_files = [r for r in results if r.status == "chip-specific"]
    if chip_files:
        out += ["", "### Chip-specific files (not run)", ""]
        out += [f"* `{r.path}`: {r.detail}" for r in sorted(chip_files, key=lambda r: r.path)]
    out += ["", "### Failing files by cause", "", "| cause | files | what |", "|---|---|---|"]
    for cause, group in _by_cause(results):
        details = Counter(r.detail for r in group if r.detail)
        what = ", ".join(f"`{d}` ({n})" if n > 1 else f"`{d}`" for d, n in details.most_common(10))
        out.append(f"| {cause} | {len(group)} | {what} |")
    out += [""]
    for cause, group in _by_cause(results):
        out.append(f"* **{cause}**: " + ", ".join(
            f"`{r.path}` ({_short(r.first_error)})" if r.first_error else f"`{r.path}`"
            for r in sorted(group, key=lambda r: r.path)))
    out.append(END)
    return "\n".join(out) + "\n"


def write_doc(path: Path, results, meta):
    """Replace (or append) the upstream-tests section of `path`, leaving the rest of the file as it is."""
    replace_section(path, BEGIN, END, _doc_section(results, meta))
