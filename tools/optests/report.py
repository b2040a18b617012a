"""The optests summary: pass rate, failures by cause, and its section of docs/conformance.md."""

import re
from collections import Counter, defaultdict
from pathlib import Path

from doc_sections import replace_section

# The docs section of each suite.
MARKERS = {"base": ("<!-- optests:begin (written by make optests) -->", "<!-- optests:end -->"),
           "custom": ("<!-- optests-custom:begin (written by make optests) -->", "<!-- optests-custom:end -->")}
SUITE_DIRS = {"base": "test/test_base_ops", "custom": "test/test_custom_ops"}


def _by_cause(results):
    groups = defaultdict(list)
    for r in results:
        if not r.passed:
            groups[r.cause].append(r)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def _rate(results):
    """(files passed, files, percent): a file passes when unittest said OK and at least one of its tests
    ran; a file whose every test skipped is not a pass."""
    passed = sum(r.passed and not r.all_skipped for r in results)
    return passed, len(results), (100.0 * passed / len(results)) if results else 0.0


def _test_counts(results):
    """(tests, passed, failed or errored, skipped) over every file that reported its tests."""
    tests = sum(r.ran for r in results)
    bad = sum(r.failures + r.errors for r in results)
    skipped = sum(r.skipped for r in results)
    return tests, tests - bad - skipped, bad, skipped


def summary_lines(results, meta):
    passed, total, pct = _rate(results)
    skipped_only = sum(r.all_skipped for r in results)
    tests, ok, bad_tests, skipped = _test_counts(results)
    by_source = sum(r.skipped_by_source for r in results)
    runnable = total - by_source
    lines = [f"files: {passed}/{total} passed ({pct:.1f}%); {skipped_only} more with every test skipped "
             f"(not passes); {meta['seconds']}s",
             f"files the source itself skips entirely (unittest.skip on every test): {by_source}; "
             f"passed of the other {runnable}: {100.0 * passed / runnable if runnable else 0.0:.1f}%",
             f"tests: {tests} ran, {ok} passed, {bad_tests} failed or errored, {skipped} skipped on every chip "
             f"(files that fail to import count no tests)",
             "failures by cause:"]
    for cause, group in _by_cause(results):
        details = Counter(r.detail for r in group if r.detail)
        top = ", ".join(f"{d} ({n})" if n > 1 else d for d, n in details.most_common(8))
        lines.append(f"  {len(group):4d}  {cause}" + (f": {top}" if top else ""))
    return lines


def _doc_section(results, meta, suite):
    passed, total, pct = _rate(results)
    by_source = sum(r.skipped_by_source for r in results)
    runnable = total - by_source
    skipped_only = sum(r.all_skipped for r in results)
    failed = sum(not r.passed for r in results)
    tests, ok, bad_tests, skipped = _test_counts(results)
    rerun = Counter(f for r in results for f in r.socs[1:])
    chips = ", ".join(f"{n} as {f}" for f, n in rerun.most_common()) or "none"
    begin, end = MARKERS[suite]
    where = SUITE_DIRS[suite]
    title = ("torch_npu's operator tests" if suite == "base" else "torch_npu's custom-op tests")
    args = "" if suite == "base" else ' OPTESTS_ARGS="--suite custom"'
    out = [begin, f"## {title} (op-plugin `{where}`)", "",
           f"`make optests OPPLUGIN=<op-plugin checkout>{args}` runs every file of the checkout's `{where}` "
           f"unchanged, each in its own process (`python test_xxx.py -v`, {meta.get('timeout', 600):.0f} s timeout, "
           f"{meta.get('jobs', 2)} at a time), and "
           "prints one line per file with the first error, then the failures by cause. The software NPU can be "
           "any chip, so a file whose `SupportedDevices` marks name other chip families runs again as each of "
           "them (`NPU_SIM_SOC_VERSION`); a test counts as skipped only when it skipped on every chip, and as "
           "failed when it failed on any. A file passes when every run reports OK and at least one test ran: "
           "a file whose every test skipped is not counted as a pass.", "",
           f"Latest run: {meta.get('selection', 'all files')}; torch {meta.get('torch', '?')}, default SoC "
           f"{meta.get('soc', '?')}, CANN version {meta.get('cann', '?')}, {meta['seconds'] // 60} min; "
           f"files run again as other chips: {chips}.", "",
           "| files | passed | failed | every test skipped | of them by the file's own `unittest.skip` | "
           "pass rate | pass rate of files not skipped by their source |",
           "|---|---|---|---|---|---|---|",
           f"| {total} | {passed} | {failed} | {skipped_only} | {by_source} | {pct:.1f}% | "
           f"{100.0 * passed / runnable if runnable else 0.0:.1f}% |", "",
           "A file whose every test carries an unconditional `unittest.skip` (most say \"skip until CANN is "
           "updated\" or \"for now\") runs no test unchanged on any device, real or software; the last column "
           "leaves those files out.", "",
           "| tests | passed | failed or errored | skipped on every chip |",
           "|---|---|---|---|",
           f"| {tests} | {ok} | {bad_tests} | {skipped} |", "",
           "Files that fail before their tests start (an import error) count no tests.", "",
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
    if skipped_only:
        out += ["", "### Files whose every test skipped", "",
                ", ".join(f"`{r.name}`" for r in sorted(results, key=lambda r: r.name) if r.all_skipped)]
    out.append(end)
    return "\n".join(out) + "\n"


def _short(text, limit=90):
    text = re.sub(r"\s+", " ", text).replace("|", "/").replace("`", "'")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def write_doc(path: Path, results, meta, suite="base"):
    """Replace (or append) the suite's optests section of `path`, leaving the rest of the file as it is."""
    begin, end = MARKERS[suite]
    replace_section(path, begin, end, _doc_section(results, meta, suite))
