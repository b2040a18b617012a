"""Runs torch_npu's operator tests (test/test_base_ops of an op-plugin checkout, or its custom-op tests,
test/test_custom_ops, with --suite custom) against this build.

Each file runs unchanged in its own process (`python test_xxx.py`) with a timeout, at most --jobs at
a time; the output is one line per file (pass/fail and the first error), then a summary by cause.

    python tools/optests/run.py /path/to/op-plugin [--jobs 2] [--timeout 600] [--doc docs/conformance.md]
    python tools/optests/run.py /path/to/op-plugin --files test_add.py test_mul.py
    python tools/optests/run.py /path/to/op-plugin --suite custom --files test_npu_rms_norm.py
    python tools/optests/run.py /path/to/op-plugin --sample 40 --seed 1
    python tools/optests/run.py /path/to/op-plugin --failed-from build/optests/results.json
    python tools/optests/run.py /path/to/op-plugin --rerun-failed build/optests/results.json

--rerun-failed runs the files that failed in a previous run again and reports the previous run with
their new verdicts (the way to check fixes without running every file again).
"""

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from causes import FileResult, parse_output  # noqa: E402
from processes import run_with_timeout, stop_children_on_signals  # noqa: E402
from report import summary_lines, write_doc  # noqa: E402
from socs import DEFAULT_FAMILY, extra_socs, family_of, merge_runs, skipped_by_source  # noqa: E402


SUITES = {"base": "test_base_ops", "custom": "test_custom_ops"}


def find_test_dir(root: Path, suite: str = "base") -> Path:
    for candidate in (root / "test" / SUITES[suite], root):
        if candidate.is_dir() and any(candidate.glob("test_*.py")):
            return candidate
    raise SystemExit(f"error: no test/{SUITES[suite]}/test_*.py under {root}; pass the root of an "
                     "op-plugin checkout (OPPLUGIN=/path/to/op-plugin)")


# Files that start a process group listen on the fixed MASTER_PORT they set: two at once would collide.
_DISTRIBUTED = threading.Lock()


def run_once(path: Path, python: str, timeout: float, workdir: Path, env: dict):
    """Run one test file once (`python test_xxx.py -v`); returns its FileResult."""
    distributed = "init_process_group" in path.read_text(errors="replace")
    with _DISTRIBUTED if distributed else contextlib.nullcontext():
        returncode, text, timed_out, seconds = run_with_timeout([python, str(path), "-v"], workdir, env, timeout)
    return parse_output(path.name, returncode, text, seconds, timed_out)


def run_file(path: Path, python: str, timeout: float, workdir: Path, env: dict, per_soc: bool = True):
    """Run one test file on the default chip and, with per_soc, again as every other chip family its
    SupportedDevices marks name (when its tests could run at all); returns the merged FileResult."""
    default = family_of(env.get("NPU_SIM_SOC_VERSION", "")) if env.get("NPU_SIM_SOC_VERSION") else DEFAULT_FAMILY
    source = path.read_text(errors="replace")
    runs = [(default, run_once(path, python, timeout, workdir, env))]
    # Other chips only when the file ran to its end here: a hang or crash would only repeat.
    if per_soc and runs[0][1].tests and runs[0][1].status in ("passed", "failed"):
        for family, soc in extra_socs(source, default):
            runs.append((family, run_once(path, python, timeout, workdir, dict(env, NPU_SIM_SOC_VERSION=soc))))
    merged = merge_runs(runs)
    merged.skipped_by_source = skipped_by_source(source)
    return merged


def file_line(r) -> str:
    if r.passed:
        note = " (all tests skipped)" if r.all_skipped else (f" ({r.skipped} skipped)" if r.skipped else "")
        return f"PASS {r.name} [{r.ran} tests, {r.seconds:.0f}s]{note}"
    where = f" {r.first_test}:" if r.first_test else ""
    error = r.first_error or (r.tail[-1] if r.tail else "no output")
    return f"FAIL {r.name} [{r.cause}]{where} {error}"


def select_files(test_dir: Path, args):
    files = sorted(p for p in test_dir.glob("test_*.py"))
    if args.files:
        wanted = {Path(f).name for f in args.files}
        missing = wanted - {p.name for p in files}
        if missing:
            raise SystemExit(f"error: not in {test_dir}: {', '.join(sorted(missing))}")
        files = [p for p in files if p.name in wanted]
    if args.failed_from or args.rerun_failed:
        previous = json.loads(Path(args.failed_from or args.rerun_failed).read_text())
        failed = {r["name"] for r in previous["files"] if r["status"] != "passed"}
        files = [p for p in files if p.name in failed]
    if args.sample:
        files = sorted(random.Random(args.seed).sample(files, min(args.sample, len(files))))
    return files


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("opplugin", type=Path, help="op-plugin checkout (or its test/test_base_ops)")
    parser.add_argument("--suite", choices=sorted(SUITES), default="base",
                        help="base: test/test_base_ops (ATen ops); custom: test/test_custom_ops (torch_npu's own ops)")
    parser.add_argument("--jobs", type=int, default=2, help="files run at once (default 2)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per file (default 600)")
    parser.add_argument("--one-soc", action="store_true",
                        help="run each file on the default chip only (not once per chip its marks name)")
    parser.add_argument("--python", default=sys.executable, help="interpreter with torch_npu installed")
    parser.add_argument("--files", nargs="+", help="only these files (names inside the suite's folder)")
    parser.add_argument("--sample", type=int, help="a random sample of this many files")
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample")
    parser.add_argument("--failed-from", help="only the files that failed in this results.json")
    parser.add_argument("--rerun-failed", help="re-run the files that failed in this results.json and report "
                        "that run with their new verdicts")
    parser.add_argument("--json", type=Path, default=Path("build/optests/results.json"),
                        help="where to write per-file results (default build/optests/results.json)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the verdicts of the files --json already holds (a stopped run) and run the rest")
    parser.add_argument("--doc", type=Path, help="write the summary into this markdown file's optests section")
    parser.add_argument("--record-partial", action="store_true",
                        help="write --doc for a partial run too (the section says which part ran)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        raise SystemExit("error: --jobs must be at least 1")

    test_dir = find_test_dir(args.opplugin.resolve(), args.suite)
    files = select_files(test_dir, args)
    if not files:
        raise SystemExit("error: no test files selected")
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    env.setdefault("OMP_NUM_THREADS", "1")  # --jobs processes share the cores
    print(f"running {len(files)} files from {test_dir} ({args.jobs} at a time, {args.timeout:.0f}s "
          f"timeout each)", flush=True)

    stop_children_on_signals()
    started = time.monotonic()
    results, earlier_seconds = [], 0
    # Read before the run: --json may name the same file, and it is rewritten after every file.
    previous_run = json.loads(Path(args.rerun_failed).read_text()) if args.rerun_failed else None
    if args.resume and args.json.exists():
        # Files a stopped run already finished keep their verdicts; the rest run now.
        done = json.loads(args.json.read_text())
        fields = set(FileResult.__dataclass_fields__)
        kept = {d["name"]: FileResult(**{k: v for k, v in d.items() if k in fields}) for d in done["files"]}
        for f in files:
            if f.name in kept:
                kept[f.name].skipped_by_source = skipped_by_source(f.read_text(errors="replace"))
        results = [kept[f.name] for f in files if f.name in kept]
        earlier_seconds = done["meta"].get("seconds", 0)
        files = [f for f in files if f.name not in kept]
        print(f"resuming: {len(results)} files done earlier, {len(files)} to run", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="optests-") as workdir, \
            ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_file, f, args.python, args.timeout, Path(workdir), env,
                               not args.one_soc) for f in files]
        for future in futures:
            r = future.result()
            results.append(r)
            print(file_line(r), flush=True)
            # Written after every file, so that a stopped run can --resume.
            progress = {"seconds": earlier_seconds + round(time.monotonic() - started)}
            args.json.write_text(json.dumps({"meta": progress, "files": [_as_dict(x) for x in results]}))
    elapsed = earlier_seconds + time.monotonic() - started

    total = len(list(test_dir.glob("test_*.py")))
    partial = bool(args.sample or args.files or args.failed_from)
    meta = {"test_dir": str(test_dir), "files": len(results), "total_files": total, "seconds": round(elapsed),
            "sample": partial, "selection": _selection(args, len(results), total),
            "timeout": args.timeout, "jobs": args.jobs,
            **_environment(args.python, env)}
    if args.rerun_failed:
        results, meta = _merge_rerun(previous_run, results, meta)
        for r in results:  # runs recorded before the flag existed
            source = test_dir / r.name
            if source.exists():
                r.skipped_by_source = skipped_by_source(source.read_text(errors="replace"))
    print()
    for line in summary_lines(results, meta):
        print(line)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"meta": meta, "files": [_as_dict(r) for r in results]}, indent=1))
    if args.doc and meta["sample"] and not args.record_partial:
        print(f"\npartial run: {args.doc} not updated (it records full runs only)")
    elif args.doc:
        write_doc(args.doc, results, meta, args.suite)
        print(f"\nsummary written to {args.doc}")
    return 0


def _merge_rerun(previous, rerun, meta):
    """The previous run's results (its results.json, loaded) with the re-run files' new verdicts, and that run's
    description."""
    fresh = {r.name: r for r in rerun}
    fields = set(FileResult.__dataclass_fields__)
    merged = [fresh.get(d["name"]) or FileResult(**{k: v for k, v in d.items() if k in fields})
              for d in previous["files"]]
    old = previous["meta"]
    meta = dict(meta, files=len(merged), sample=old.get("sample", False),
                seconds=old.get("seconds", 0) + meta["seconds"],
                selection=f"{old.get('selection', 'a previous run')}, its {len(rerun)} failed files re-run")
    return merged, meta


def _selection(args, ran, total):
    if args.sample:
        return f"a random sample of {ran} of the {total} files (--sample {args.sample} --seed {args.seed})"
    if args.files or args.failed_from:
        return f"{ran} chosen files of {total}"
    return f"all {total} files"


def _as_dict(r):
    return {k: getattr(r, k) for k in ("name", "status", "returncode", "seconds", "ran", "failures", "errors", "skipped",
                                       "first_test", "first_error", "cause", "detail", "socs", "tests",
                                       "skipped_by_source")}


def _environment(python, env):
    """SoC, CANN version and versions the run saw, for the report."""
    code = ("import torch, torch_npu; from torch_npu.npu import utils; "
            "print(torch.__version__); print(torch.npu.get_device_name(0)); print(utils.get_cann_version())")
    try:
        out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                             cwd=tempfile.gettempdir()).stdout.split("\n")
        return {"torch": out[0], "soc": out[1], "cann": out[2]}
    except (subprocess.SubprocessError, IndexError):
        return {"torch": "?", "soc": "?", "cann": "?"}


if __name__ == "__main__":
    sys.exit(main())
