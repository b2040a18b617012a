"""Reading one test file's output: its verdict, test counts, first error, and the cause of failure."""

import re
from dataclasses import dataclass, field

# unittest's closing lines.
_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s", re.M)
_COUNTS = re.compile(r"(failures|errors|skipped|expected failures|unexpected successes)=(\d+)")
_BLOCK = re.compile(r"^(ERROR|FAIL): (\S+) \(([^)]*)\)\n-{10,}\n(.*?)(?=^={10,}|^-{10,}\nRan |\Z)",
                    re.M | re.S)


@dataclass
class FileResult:
    name: str                  # file name inside test_base_ops
    status: str                # passed | failed | timeout | crashed
    seconds: float = 0.0
    returncode: int = 0
    ran: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    first_test: str = ""       # the first failing test, when tests ran
    first_error: str = ""      # its exception line ("ValueError: ...")
    cause: str = ""            # one of CAUSES' names, for failed files
    detail: str = ""           # the op or API the cause names, when there is one
    tail: list = field(default_factory=list)
    in_cpu_reference: bool = False  # the first error comes from the test's CPU reference code
    tests: dict = field(default_factory=dict)  # "Class.test" -> passed | failed | skipped (from `-v` output)
    socs: list = field(default_factory=list)   # chip families the file ran as
    skipped_by_source: bool = False             # every test carries an unconditional unittest.skip

    @property
    def passed(self):
        return self.status == "passed"

    @property
    def all_skipped(self):
        return self.passed and self.ran > 0 and self.skipped == self.ran


# unittest's verbose lines: "test_x (__main__.TestX.test_x) ... ok", an optional docstring line before
# the dots; the verdict may come after lines the test printed.
_TEST_HEAD = re.compile(r"^(\w+) \(([\w.]+)\)(?:\n[^\n]*?)? \.\.\. ", re.M)
_VERDICT = re.compile(r"(?:\A|\n)(ok|FAIL|ERROR|skipped|expected failure|unexpected success)\b")
_VERDICTS = {"ok": "passed", "expected failure": "passed", "skipped": "skipped",
             "FAIL": "failed", "ERROR": "failed", "unexpected success": "failed"}


def parse_tests(output):
    """{"Class.test": passed | failed | skipped} from unittest's verbose output; a test whose verdict
    never came (the file was killed) counts as failed."""
    heads = list(_TEST_HEAD.finditer(output))
    tests = {}
    for i, m in enumerate(heads):
        region = output[m.end():heads[i + 1].start() if i + 1 < len(heads) else len(output)]
        verdict = _VERDICT.search(region)
        parts = [p for p in m.group(2).split(".") if p != m.group(1)]
        name = f"{parts[-1]}.{m.group(1)}" if parts else m.group(1)
        tests[name] = _VERDICTS[verdict.group(1)] if verdict else "failed"
    return tests


def _exception_line(traceback_text):
    """The `Type: message` line that ends a traceback (the first line of a multi-line message)."""
    lines = traceback_text.rstrip().splitlines()
    frames = [i for i, ln in enumerate(lines) if ln.startswith("  File ")]
    i = frames[-1] + 1 if frames else 0
    while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):
        i += 1
    return lines[i].strip()[:400] if i < len(lines) else ""


def _fails_in_cpu_reference(name, body, error):
    """True when the innermost frame of the test file is its CPU reference (cpu_op_exec...): the
    error comes from PyTorch's CPU kernels, not from npu."""
    frames = [fn for path, fn in re.findall(r'File "([^"]+)", line \d+, in (\w+)', body)
              if path.endswith("/" + name)]
    return bool(frames) and "cpu" in frames[-1].lower() and "npu" not in frames[-1].lower() \
        and "npu" not in error.lower()


def parse_output(name, returncode, output, seconds, timed_out):
    """A FileResult from a finished (or killed) `python test_xxx.py` run."""
    result = FileResult(name=name, status="failed", seconds=seconds, returncode=returncode)
    result.tail = output.rstrip().splitlines()[-12:]
    ran = _RAN.findall(output)
    if ran:
        result.ran = int(ran[-1])
        closing = output[output.rfind("\nRan "):]
        counts = dict((k, int(v)) for k, v in _COUNTS.findall(closing))
        result.failures = counts.get("failures", 0)
        result.errors = counts.get("errors", 0)
        result.skipped = counts.get("skipped", 0)
    result.tests = parse_tests(output)
    blocks = _BLOCK.findall(output)
    body = ""
    if blocks:
        kind, test, where, body = blocks[0]
        parts = [p for p in where.split(".") if p != test]  # "__main__.TestAbs[.test_abs]"
        result.first_test = f"{parts[-1]}.{test}" if parts else test
        result.first_error = _exception_line(body)
    elif "Traceback (most recent call last)" in output:
        body = output[output.rfind("Traceback (most recent call last)"):]
        result.first_error = _exception_line(body)
    result.in_cpu_reference = _fails_in_cpu_reference(name, body, result.first_error)
    if timed_out:
        result.status = "timeout"
    elif returncode == 0 and ran and re.search(r"^OK\b", output[output.rfind("\nRan "):], re.M):
        result.status = "passed"
    elif returncode < 0 or returncode in (134, 139):
        result.status = "crashed"
    if not result.passed:
        result.cause, result.detail = classify(result, output)
    return result


# (cause, pattern on the first error) in order; the first match wins. A group, when present, is the
# op or API that the cause names.
CAUSES = [
    ("needs private formats", re.compile(
        r"npu_format \d+ \(\w+\) is not supported yet|has no attribute '(get_npu_format|npu_format_cast_|"
        r"Format)'|has no attribute '(allow_internal_format|config)'")),
    ("missing npu_* op", re.compile(
        r"module 'torch_npu' has no attribute '(npu_\w+|fast_gelu|\w+_npu\w*)'|"
        r"'Tensor' object has no attribute '(npu_\w+)'|_OpNamespace 'npu' object has no attribute '(\w+)'|"
        r"No such operator npu::(\w+)")),
    ("missing torch_npu API", re.compile(
        r"module '((?:torch_npu|torch\.npu)[\w.]*' has no attribute '\w+)'|"
        r"cannot import name '\w+' from '(torch_npu[\w.]*)'|No module named '(torch_npu[\w.]*)'")),
    ("missing Python package", re.compile(r"No module named '([\w.]+)'")),
    ("op not supported on npu", re.compile(
        r"NotImplementedError.*?'?(aten::\w+(?:\.\w+)?)|not implemented for '(?:PrivateUse1|npu)'|"
        r"is not supported on npu")),
    ("wrong result", re.compile(
        r"AssertionError: .*(result error|shape error|dtype error|differ|not less than or equal|"
        r"!=|Tensor-likes are not|Scalars are not|False is not true|True is not false|"
        r"not equal|mismatch)")),
    ("exception differs from torch_npu's", re.compile(
        r"AssertionError: .*(not raised|does not match|Exception not raised)|"
        r"AssertionError: \"")),
    ("test code needs NumPy 1.x", re.compile(
        r"TypeError: only 0-dimensional arrays can be converted to Python scalars|"
        r"np\.(float|int|bool|object)` was a deprecated alias")),
    ("runtime error in op", re.compile(r"^(RuntimeError|ValueError|TypeError|IndexError): (.*)")),
]


def classify(result, output):
    """(cause, detail) of a failed file."""
    if result.status == "timeout":
        return "timeout", ""
    if result.status == "crashed":
        if result.returncode == -9:
            return "killed (out of host memory)", ""
        return "crash", result.first_error or (result.tail[-1] if result.tail else "")
    text = result.first_error
    if result.in_cpu_reference:
        return "CPU reference fails (test predates this torch)", ""
    for cause, pattern in CAUSES:
        m = pattern.search(text)
        if m:
            groups = [g for g in m.groups() if g]
            detail = groups[0] if groups and cause not in ("runtime error in op", "wrong result") else ""
            detail = detail.replace("' has no attribute '", ".")
            return cause, detail
    if not text:
        return "no result", ""
    return "other", ""
