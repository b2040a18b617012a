"""Runs Ascend/pytorch's own unit tests (its `test/` folders) against this build, file by file.

Each file runs unchanged under pytest in its own process (junit XML, a timeout per file, at most --jobs at
a time); the output is one line per file, then a table per folder (files fully passing; tests passed,
failed, errored, skipped) and the failures by cause. Files that test chip-specific behaviour a software
NPU cannot honestly provide are listed in chip_specific.py with the reason and reported, not run.

    python tools/upstream_tests/run.py /path/to/Ascend-pytorch [--jobs 2] [--timeout 300] [--doc docs/conformance.md]
    python tools/upstream_tests/run.py /path/to/Ascend-pytorch --dirs npu optim
    python tools/upstream_tests/run.py /path/to/Ascend-pytorch --files npu/test_npu.py contrib/test_roll.py
    python tools/upstream_tests/run.py /path/to/Ascend-pytorch --rerun-failed build/upstream_tests/results.json
"""

import argparse
import json
import os
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "optests"))
from causes import CAUSES  # noqa: E402  (the op tests' failure causes, shared)
from chip_specific import CHIP_SPECIFIC  # noqa: E402
from processes import run_with_timeout, stop_children_on_signals  # noqa: E402
from tables import summary_lines, write_doc  # noqa: E402

# The folders of upstream's test/ that say what the Python API must do; distributed: its hccl, c10d and
# ddp files only (the rest drive hardware collectives' private options).
DEFAULT_DIRS = ["npu", "contrib", "optim", "allocator", "trans_contiguous", "profiler", "distributed"]
DISTRIBUTED_KEYS = ("hccl", "c10d", "ddp")
# Files that are slow by design on 2 cores, with the time they get instead of --timeout:
# test_fault_mode starts 100 processes that each import torch; test_optim runs every optimizer's
# full PyTorch test matrix.
SLOW_FILES = {"npu/test_fault_mode.py": 900, "optim/test_optim.py": 900}


@dataclass
class FileResult:
    path: str                 # relative to test/ ("npu/test_npu.py")
    status: str               # passed | failed | timeout | crashed | chip-specific
    seconds: float = 0.0
    returncode: int = 0
    tests: int = 0
    passed: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    first_test: str = ""
    first_error: str = ""
    cause: str = ""
    detail: str = ""
    tail: list = field(default_factory=list)

    @property
    def folder(self):
        return self.path.split("/", 1)[0]


def find_test_root(root: Path) -> Path:
    for candidate in (root / "test", root):
        if (candidate / "npu").is_dir():
            return candidate
    raise SystemExit(f"error: no test/npu under {root}; pass the root of an Ascend/pytorch checkout "
                     "(PYTORCH_NPU=/path/to/pytorch)")


def select_files(test_root: Path, args):
    files = []
    for folder in args.dirs:
        for p in sorted((test_root / folder).rglob("test_*.py")):
            rel = p.relative_to(test_root).as_posix()
            if folder == "distributed" and not any(k in p.name for k in DISTRIBUTED_KEYS):
                continue
            files.append(rel)
    if args.files:
        missing = [f for f in args.files if not (test_root / f).is_file()]
        if missing:
            raise SystemExit(f"error: not under {test_root}: {', '.join(missing)}")
        files = list(args.files)
    if args.rerun_failed:
        previous = json.loads(Path(args.rerun_failed).read_text())
        failed = {r["path"] for r in previous["files"] if r["status"] not in ("passed", "chip-specific")}
        files = [f for f in files if f in failed]
    return files


def run_file(test_root: Path, rel: str, python: str, timeout: float, workdir: Path, env: dict) -> FileResult:
    """pytest on one file, from its own folder (upstream's tests import their neighbours)."""
    path = test_root / rel
    xml = workdir / (rel.replace("/", "__") + ".xml")
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", f"--junitxml={xml}",
           "-o", "junit_family=xunit1", path.name]
    returncode, text, timed_out, seconds = run_with_timeout(cmd, path.parent, env, timeout)
    result = FileResult(path=rel, status="failed", seconds=round(seconds, 1), returncode=returncode,
                        tail=text.rstrip().splitlines()[-8:])
    if xml.exists() and not timed_out:
        _read_junit(xml, result)
    if timed_out:
        result.status = "timeout"
    elif returncode < 0 or returncode in (134, 139):
        result.status = "crashed"
    elif returncode in (0, 5) and result.failures + result.errors == 0:
        result.status = "passed"  # 5: no tests collected (every test skipped at import by upstream's markers)
    if result.status != "passed":
        result.cause, result.detail = classify(result, text)
    return result


def _read_junit(xml: Path, result: FileResult):
    try:
        suite = ET.parse(xml).getroot()
    except ET.ParseError:
        return
    for case in suite.iter("testcase"):
        result.tests += 1
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if case.find("skipped") is not None:
            result.skipped += 1
        elif bad is not None:
            if bad.tag == "failure":
                result.failures += 1
            else:
                result.errors += 1
            if not result.first_test:
                result.first_test = f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name')}".strip(".")
                result.first_error = _exception_line(bad.get("message") or "", bad.text or "")
        else:
            result.passed += 1


def _exception_line(message: str, body: str) -> str:
    """The error's `Type: message` line: pytest's message, else the last `E   ` line of its report."""
    lines = [ln[1:].strip() for ln in body.splitlines() if ln.startswith("E ")]
    typed = [ln for ln in lines if ":" in ln.split(" ", 1)[0]]
    text = (typed[0] if typed else message.splitlines()[0] if message else lines[0] if lines else "")
    return text[:400]


def classify(result: FileResult, output: str):
    if result.status == "timeout":
        return "timeout (hang or too slow)", ""
    if result.status == "crashed":
        return ("killed (out of host memory)" if result.returncode == -9 else "crash"), ""
    text = result.first_error
    if not text:
        lines = [ln for ln in output.splitlines() if ln.startswith("E ")]
        text = lines[0][1:].strip() if lines else ""
        result.first_error = text[:400]
    for cause, pattern in CAUSES:
        m = pattern.search(text)
        if m:
            groups = [g for g in m.groups() if g]
            detail = groups[0] if groups and cause not in ("runtime error in op", "wrong result") else ""
            return cause, detail.replace("' has no attribute '", ".")
    return ("no result" if not text else "other"), ""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pytorch_npu", type=Path, help="Ascend/pytorch checkout (or its test/)")
    parser.add_argument("--dirs", nargs="+", default=DEFAULT_DIRS, help="folders of test/ to run")
    parser.add_argument("--files", nargs="+", help="only these files (paths relative to test/)")
    parser.add_argument("--jobs", type=int, default=2, help="files run at once (default 2)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per file (default 300)")
    parser.add_argument("--python", default=sys.executable, help="interpreter with torch_npu installed")
    parser.add_argument("--rerun-failed", help="re-run the files that failed in this results.json, merged into it")
    parser.add_argument("--merge", action="store_true",
                        help="with --files: their results replace theirs in --json's earlier run (else a new run)")
    parser.add_argument("--json", type=Path, default=Path("build/upstream_tests/results.json"))
    parser.add_argument("--doc", type=Path, help="write the tables into this markdown file's upstream-tests section")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: print (and with --doc write) the tables of the results in --json")
    args = parser.parse_args(argv)
    if args.report_only:
        saved = json.loads(args.json.read_text())
        fields = set(FileResult.__dataclass_fields__)
        results = [FileResult(**{k: v for k, v in d.items() if k in fields}) for d in saved["files"]]
        for line in summary_lines(results):
            print(line)
        if args.doc:
            write_doc(args.doc, results, saved["meta"])
        return 0
    if args.jobs < 1:
        raise SystemExit("error: --jobs must be at least 1")
    test_root = find_test_root(args.pytorch_npu.resolve())
    files = select_files(test_root, args)
    if not files:
        raise SystemExit("error: no test files selected")
    skipped = [f for f in files if f in CHIP_SPECIFIC]
    to_run = [f for f in files if f not in CHIP_SPECIFIC]
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    env.setdefault("OMP_NUM_THREADS", "1")  # --jobs processes share the cores
    # As in an activated environment: the tests start `python` / `torchrun` by name.
    env["PATH"] = os.pathsep.join([str(Path(args.python).parent), env.get("PATH", "")])
    print(f"running {len(to_run)} files of {test_root} ({args.jobs} at a time, {args.timeout:.0f}s timeout "
          f"each; {len(skipped)} chip-specific files listed, not run)", flush=True)
    stop_children_on_signals()
    started = time.monotonic()
    # A re-run's earlier results are read now: the saves below may write to the same file.
    previous = json.loads(Path(args.rerun_failed).read_text()) if args.rerun_failed else None
    if args.merge and args.json.exists():
        previous = json.loads(args.json.read_text())
    results = [FileResult(path=f, status="chip-specific", cause="chip-specific", detail=CHIP_SPECIFIC[f])
               for f in skipped]
    with tempfile.TemporaryDirectory(prefix="upstream-tests-") as workdir, \
            ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_file, test_root, f, args.python, max(args.timeout, SLOW_FILES.get(f, 0)),
                               Path(workdir), env) for f in to_run]
        for future in futures:
            r = future.result()
            results.append(r)
            print(file_line(r), flush=True)
            so_far = {"test_root": str(test_root), "seconds": round(time.monotonic() - started),
                      "selection": f"the first {len(results)} files of a run in progress"}
            _save(args.json, *(_merge(previous, results, so_far) if previous else (results, so_far)))
    meta = {"test_root": str(test_root), "seconds": round(time.monotonic() - started),
            "selection": "chosen files" if args.files else "folders " + ", ".join(args.dirs)}
    if previous:
        results, meta = _merge(previous, results, meta)
    print()
    for line in summary_lines(results):
        print(line)
    _save(args.json, results, meta)
    if args.doc:
        write_doc(args.doc, results, meta)
        print(f"\ntables written to {args.doc}")
    return 0


def _save(path: Path, results, meta):
    """Results so far: a stopped run still leaves what it measured (see --report-only)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "files": [asdict(r) for r in results]}, indent=1))


def file_line(r: FileResult) -> str:
    counts = f"{r.passed} passed, {r.failures} failed, {r.errors} errors, {r.skipped} skipped, {r.seconds:.0f}s"
    if r.status == "passed":
        return f"PASS {r.path} [{counts}]"
    where = f" {r.first_test}:" if r.first_test else ""
    return f"{r.status.upper()} {r.path} [{counts}] [{r.cause}]{where} {r.first_error or (r.tail[-1] if r.tail else '')}"


def _merge(previous: dict, rerun, meta):
    fresh = {r.path: r for r in rerun}
    fields = set(FileResult.__dataclass_fields__)
    merged = [fresh.pop(d["path"], None) or FileResult(**{k: v for k, v in d.items() if k in fields})
              for d in previous["files"]]
    merged += fresh.values()  # files the earlier run did not have
    old = previous["meta"]
    return merged, dict(meta, seconds=old.get("seconds", 0) + meta["seconds"],
                        selection=f"{old.get('selection')}, {len(rerun)} files re-run")


if __name__ == "__main__":
    sys.exit(main())
