"""The optests summary: pass rate, failures by cause, and its section of docs/conformance.md."""

import re
from collections import Counter, defaultdict
from pathlib import Path

from doc_sections import replace_section

BEGIN = "<!-- optests:begin (written by make optests) -->"
END = "<!-- optests:end -->"


def _by_cause(results):
    groups = defaultdict(list)
    for r in results:
        if not r.passed:
            groups[r.cause].append(r)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def _rate(results):
    passed = sum(r.passed for r in results)
    return passed, len(results), (100.0 * passed / len(results)) if results else 0.0


def summary_lines(results, meta):
    passed, total, pct = _rate(results)
    skipped_only = sum(r.all_skipped for r in results)
    tests = sum(r.ran for r in results)
    bad_tests = sum(r.failures + r.errors for r in results)
    skipped = sum(r.skipped for r in results)
    lines = [f"files: {passed}/{total} passed ({pct:.1f}%), {skipped_only} of them with every test skipped; "
             f"{meta['seconds']}s",
             f"tests: {tests} ran, {bad_tests} failed or errored, {skipped} skipped "
             f"(files that fail to import count no tests)",
             "failures by cause:"]
    for cause, group in _by_cause(results):
        details = Counter(r.detail for r in group if r.detail)
        top = ", ".join(f"{d} ({n})" if n > 1 else d for d, n in details.most_common(8))
        lines.append(f"  {len(group):4d}  {cause}" + (f": {top}" if top else ""))
    return lines


def _doc_section(results, meta):
    passed, total, pct = _rate(results)
    skipped_only = sum(r.all_skipped for r in results)
    tests = sum(r.ran for r in results)
    bad_tests = sum(r.failures + r.errors for r in results)
    skipped = sum(r.skipped for r in results)
    out = [BEGIN, "## torch_npu's operator tests (op-plugin `test/test_base_ops`)", "",
           "`make optests OPPLUGIN=<op-plugin checkout>` runs every file of the checkout's "
           "`test/test_base_ops` unchanged, each in its own process (`python test_xxx.py`, 600 s timeout, "
           "2 at a time), and prints one line per file with the first error, then the failures by cause. "
           "A file passes when unittest reports OK (tests that `SupportedDevices` or "
           "`SkipIfNotGteCANNVersion` skip on the reported chip count as skipped, as on that chip).", "",
           f"Latest run: {meta.get('selection', 'all files')}; torch {meta.get('torch', '?')}, SoC "
           f"{meta.get('soc', '?')}, CANN version {meta.get('cann', '?')}, {meta['seconds'] // 60} min.", "",
           "| files | passed | failed | pass rate | files with every test skipped |",
           "|---|---|---|---|---|",
           f"| {total} | {passed} | {total - passed} | {pct:.1f}% | {skipped_only} |", "",
           f"Tests inside the files that ran: {tests}, of which {bad_tests} failed or errored and {skipped} "
           "were skipped.", "",
           "### Remaining failures by cause", "",
           "| cause | files | what |", "|---|---|---|"]
    for cause, group in _by_cause(results):
        details = Counter(r.detail for r in group if r.detail)
        what = ", ".join(f"`{d}` ({n})" if n > 1 else f"`{d}`" for d, n in details.most_common(12))
        out.append(f"| {cause} | {len(group)} | {what} |")
    out += ["", "### Failing files", ""]
    for cause, group in _by_cause(results):
        out.append(f"* **{cause}**: " + ", ".join(
            f"`{r.name}` ({_short(r.first_error)})" if r.first_error else f"`{r.name}`"
            for r in sorted(group, key=lambda r: r.name)))
    out.append(END)
    return "\n".join(out) + "\n"


def _short(text, limit=90):
    text = re.sub(r"\s+", " ", text).replace("|", "/").replace("`", "'")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def write_doc(path: Path, results, meta):
    """Replace (or append) the optests section of `path`, leaving the rest of the file as it is."""
    replace_section(path, BEGIN, END, _doc_section(results, meta))
