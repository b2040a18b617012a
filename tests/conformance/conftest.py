"""Conformance summary: pass / expected failure / fail / skip counts per test kind and dtype, printed at the end."""

import collections
import re

_ID = re.compile(r"::test_(grad_compare_cpu|compare_cpu)_.*_npu_(\w+)$")


def pytest_terminal_summary(terminalreporter):
    counts = collections.defaultdict(collections.Counter)
    for outcome in ("passed", "failed", "xfailed", "skipped", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            m = _ID.search(getattr(report, "nodeid", ""))
            if m and (outcome != "passed" or report.when == "call"):
                kind = "gradients" if m.group(1) == "grad_compare_cpu" else "outputs"
                counts[(kind, m.group(2))][outcome] += 1
    if not counts:
        return
    tr = terminalreporter
    tr.write_sep("=", "npu conformance with PyTorch's OpInfo tests")
    tr.write_line(f"{'check':<10} {'dtype':<8} {'passed':>7} {'expected failures':>18} {'failed':>7} {'skipped':>8} {'total':>6}")
    for (kind, dtype), c in sorted(counts.items()):
        total = sum(c.values())
        tr.write_line(f"{kind:<10} {dtype:<8} {c['passed']:>7} {c['xfailed']:>18} {c['failed'] + c['error']:>7} "
                      f"{c['skipped']:>8} {total:>6}")
