"""Which chips a test file is written for, and the merged verdict of one file run once per chip.

op-plugin's tests mark chip-specific cases with `@SupportedDevices(['Ascend950'])` and skip them elsewhere.
The software NPU can be any chip (NPU_SIM_SOC_VERSION), so a file runs under every chip family its marks
name, and a test counts as skipped only when it skipped on every one of them.
"""

import ast
import re
from dataclasses import replace

# The SoC a family is run as; families the software NPU does not model (e.g. "Ascend910C") are ignored.
FAMILY_SOC = {
    "Ascend910B": "Ascend910B1",
    "Ascend910_93": "Ascend910_9391",
    "Ascend950": "Ascend950PR",
    "Ascend310P": "Ascend310P3",
    "Ascend910A": "Ascend910A",
}
DEFAULT_FAMILY = "Ascend910B"

def family_of(soc: str) -> str:
    """The family SupportedDevices matches for a SoC name ("Ascend910B1" -> "Ascend910B")."""
    if soc.startswith("Ascend950"):
        return soc[:9]
    return soc[:12] if soc.startswith("Ascend910_") else soc[:10]


_MARK = re.compile(r"SupportedDevices\(\s*(\[[^\]]*\])\s*\)")


def marked_families(source: str):
    """The chip families named by the file's SupportedDevices marks that the software NPU can be, in order."""
    found = []
    for m in _MARK.finditer(source):
        try:
            names = ast.literal_eval(m.group(1))
        except (ValueError, SyntaxError):
            continue
        for name in names:
            if isinstance(name, str) and name in FAMILY_SOC and name not in found:
                found.append(name)
    return found


def extra_socs(source: str, default_family: str = DEFAULT_FAMILY):
    """(family, SoC name) to run the file under besides the default chip."""
    return [(f, FAMILY_SOC[f]) for f in marked_families(source) if f != default_family]


def _is_unittest_skip(decorator) -> bool:
    """`@unittest.skip("...")` (or `@skip(...)`): a skip no runtime can lift, unlike skipIf / SupportedDevices."""
    func = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(func, ast.Attribute) and func.attr == "skip") or (isinstance(func, ast.Name) and func.id == "skip")


def skipped_by_source(source: str) -> bool:
    """True when every test of the file carries an unconditional unittest.skip (its own or its class's): the
    file cannot run unchanged on any device, real or software."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    verdicts = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        cls_skip = any(_is_unittest_skip(d) for d in cls.decorator_list)
        for fn in cls.body:
            if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test"):
                verdicts.append(cls_skip or any(_is_unittest_skip(d) for d in fn.decorator_list))
    return bool(verdicts) and all(verdicts)


_RANK = {"failed": 3, "passed": 2, "skipped": 1}


def merge_runs(runs):
    """One FileResult from the per-chip runs of a file ([(family, FileResult)], the default chip first).

    Per test: failed if it failed on some chip, else passed if it passed on some chip, else skipped. The
    file passes when every run passed; the first failing run gives the first error, named with its chip.
    """
    first_family, first = runs[0]
    if len(runs) == 1:
        return replace(first, socs=[first_family])
    tests = {}
    for _family, r in runs:
        for test, status in r.tests.items():
            if _RANK[status] > _RANK.get(tests.get(test), 0):
                tests[test] = status
    merged = replace(first, tests=tests, socs=[f for f, _ in runs],
                     seconds=sum(r.seconds for _, r in runs))
    merged.ran = len(tests)
    merged.failures = sum(s == "failed" for s in tests.values())
    merged.errors = 0
    merged.skipped = sum(s == "skipped" for s in tests.values())
    bad = [(f, r) for f, r in runs if not r.passed]
    if bad:
        family, r = bad[0]
        merged.status, merged.returncode, merged.cause, merged.detail = r.status, r.returncode, r.cause, r.detail
        merged.first_test = f"{r.first_test} [{family}]" if r.first_test else f"[{family}]"
        merged.first_error, merged.tail, merged.in_cpu_reference = r.first_error, r.tail, r.in_cpu_reference
    else:
        merged.status = "passed"
    return merged
