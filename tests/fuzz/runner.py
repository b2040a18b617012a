"""Runs fuzz targets in child processes so that a crash or a hang is caught and reported, not fatal.

    python -m fuzz.runner [--examples N] [--timeout S] [target ...]     (from tests/)

Each target (a module in this folder with a `run(examples, journal)` function) runs in its own
process. Before each case the child writes the case to a journal file, so when the child dies from a
signal or runs past its time limit the parent names the case that did it. A child that finishes
prints one JSON line: the number of cases run and the failures (a case whose error was unclear).
"""

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

TARGETS = ("runtime_api", "device_api", "ops")
_HERE = os.path.dirname(os.path.abspath(__file__))


class Journal:
    """The child's record of the case in progress (read by the parent after a crash or hang)."""

    def __init__(self, path):
        self.path = path
        self.cases = 0
        self.calls = 0
        self.succeeded = 0  # cases that returned normally (the rest raised)

    def case(self, description: str) -> None:
        self.cases += 1
        self.note(description)

    def note(self, description: str) -> None:
        self.calls += 1
        with open(self.path, "w") as f:
            f.write(description)


def run_target(target: str, examples: int, timeout: float, seed: int | None = None) -> dict:
    """Runs one target in a child process; returns {target, cases, failures, crash, hang, seconds}."""
    with tempfile.NamedTemporaryFile("w+", suffix=".case", delete=False) as f:
        journal = f.name
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    cmd = [sys.executable, "-m", "fuzz.runner", "--child", target, "--examples", str(examples),
           "--journal", journal] + (["--seed", str(seed)] if seed is not None else [])
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=os.path.dirname(_HERE), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    result = {"target": target, "cases": 0, "calls": 0, "failures": [], "crash": None, "hang": None}
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        result["hang"] = _read(journal)
    else:
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if proc.returncode == 0 and lines:
            result.update(json.loads(lines[-1]))
        else:
            how = (f"signal {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
                   else f"exit code {proc.returncode}")
            result["crash"] = f"{how} during: {_read(journal)}\n{_sanitizer_headline(err)}{err[-3000:]}"
    result["seconds"] = round(time.monotonic() - start, 1)
    os.unlink(journal)
    return result


def _sanitizer_headline(err: str) -> str:
    """The lines that say what a sanitizer found (make sanitize-adapter), whose stacks push them out of
    the tail kept above: ASan's ERROR and SUMMARY lines, UBSan's "runtime error"."""
    lines = [line for line in err.splitlines()
             if "ERROR: AddressSanitizer" in line or "runtime error:" in line or line.startswith("SUMMARY: ")]
    return "".join(line + "\n" for line in lines[:4])


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return "<no case recorded>"


def _child(target: str, examples: int, journal_path: str, seed: int | None) -> None:
    import importlib

    module = importlib.import_module(f"fuzz.{target}")
    journal = Journal(journal_path)
    failures = module.run(examples, journal, seed)
    reasons = collections.Counter(f.split("]: ", 1)[-1].split(": ", 1)[0] for f in failures)
    print(json.dumps({"cases": journal.cases, "calls": journal.calls, "succeeded": journal.succeeded,
                      "reasons": reasons, "failures": failures[:20],
                      "failure_count": len(failures)}), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", default=list(TARGETS))
    parser.add_argument("--examples", type=int, default=int(os.environ.get("FUZZ_EXAMPLES", 300)))
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--child", default=None)
    parser.add_argument("--journal", default=None)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.examples, args.journal, args.seed)
        return 0
    bad = 0
    total = 0
    for target in args.targets:
        r = run_target(target, args.examples, args.timeout, args.seed)
        total += r["cases"]
        status = "crash" if r["crash"] else "hang" if r["hang"] else f"{r.get('failure_count', 0)} unclear"
        print(f"{target:12s} {r['cases']:6d} cases {r['calls']:7d} calls {r.get('succeeded', 0):6d} ok "
              f"{r['seconds']:7.1f}s  {status}")
        for reason, count in r.get("reasons", {}).items():
            print(f"    {count:5d} x {reason}")
        for detail in (r["crash"], r["hang"], *r["failures"]):
            if detail:
                bad += 1
                print("   ", str(detail).replace("\n", "\n    "))
    print(f"total: {total} cases, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
