"""Runs the benchmark suite and writes results JSON, docs/benchmarks.md and docs/benchmarks.png.

Usage (from the repository root, with the package installed in .venv; `make bench` does this):
    .venv/bin/python bench/run.py [--quick] [--only SECTION ...] [--out DIR]
Run it as a script, not with -m from the repository root: there the source torch_npu/ would shadow
the installed package. The sections import each other as top-level modules for the same reason.
"""

import argparse
import datetime
import importlib
import json
import os
import platform
import subprocess
import sys
import time
import warnings

SECTIONS = ("demo", "small_ops", "kernels", "attention", "copies", "training", "allocator", "distributed", "profiling", "long_runs", "graphs")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine_info() -> dict:
    import numpy
    import torch
    from importlib import metadata
    try:
        npu_version = metadata.version("torch_npu")
    except metadata.PackageNotFoundError:
        npu_version = "unknown"
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "torch_npu": npu_version,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "commit": _git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average_start": os.getloadavg()[0],
        "launch_env": {k: os.environ[k] for k in ("TASK_QUEUE_ENABLE", "ASCEND_LAUNCH_BLOCKING",
                                                  "NPU_SIM_STRICT", "OMP_NUM_THREADS") if k in os.environ},
    }


def run_sections(names, quick: bool) -> tuple:
    """Each section in a fresh process: no section's npu work (or anything it leaves behind) can
    touch another's measurements, CPU references included."""
    results, timings = [], {}
    for name in names:
        start = time.perf_counter()
        print(f"[bench] {name} ...", flush=True)
        cmd = [sys.executable, os.path.abspath(__file__), "--section-json", name] + (["--quick"] if quick else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=os.path.dirname(os.path.abspath(__file__)))
        rows = None
        for line in proc.stdout.splitlines():
            if line.startswith(_ROWS_MARKER):
                rows = json.loads(line[len(_ROWS_MARKER):])
        if proc.returncode != 0 or rows is None:
            raise SystemExit(f"[bench] section {name} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-5000:]}")
        results += rows
        timings[name] = time.perf_counter() - start
        print(f"[bench] {name} done in {timings[name]:.1f} s", flush=True)
    return results, timings


_ROWS_MARKER = "[bench-rows] "


def _section_child(name: str, quick: bool) -> int:
    """The child of run_sections(): runs one section and prints its rows as one JSON line."""
    import torch_npu  # noqa: F401
    _quiet_fallback_warnings()
    module = importlib.import_module(name)
    rows = module.run(quick=quick)
    print(_ROWS_MARKER + json.dumps(rows), flush=True)
    return 0


def standalone(run_fn) -> None:
    """Entry point of a section run on its own: prints its rows as a table."""
    import report
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few repeats (smoke test)")
    args = parser.parse_args()
    _quiet_fallback_warnings()
    print(report.text_table(run_fn(quick=args.quick)))


def _quiet_fallback_warnings() -> None:
    # Ops without a named device op warn once each in strict mode; the tables say how ops ran instead.
    warnings.filterwarnings("ignore", message=".*is not supported on npu")


def _updated(json_path: str, doc: dict) -> dict:
    """`doc`'s sections replacing theirs in the results at `json_path`; the rest kept as they were."""
    with open(json_path) as f:
        old = json.load(f)
    rerun = set(doc["sections"])
    rows = [r for r in old["rows"] if r["section"] not in rerun]
    rows += doc["rows"]
    order = {name: i for i, name in enumerate(SECTIONS)}
    rows.sort(key=lambda r: order.get(r["section"], len(order)))  # stable: a section keeps its row order
    seconds = {k: doc["seconds"].get(k, v) for k, v in old["seconds"].items()}  # the run's order kept
    seconds.update({k: v for k, v in doc["seconds"].items() if k not in seconds})
    return {**old, "sections": [s for s in SECTIONS if s in rerun or s in old["sections"]], "seconds": seconds,
            "rows": rows, "launch_profile": doc["launch_profile"] or old.get("launch_profile"),
            "total_seconds": sum(seconds.values()),
            "updated": old.get("updated", []) + [{"sections": sorted(rerun, key=order.get),
                                                   "machine": doc["machine"]}]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="torch_npu benchmark suite: npu vs CPU eager, each section in a fresh process")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few repeats (smoke test)")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, metavar="SECTION",
                        help=f"run only these sections ({', '.join(SECTIONS)})")
    parser.add_argument("--update", action="store_true",
                        help="keep the other sections' rows of the existing results.json and write the "
                             "report from both (rerun one section without rerunning the rest)")
    parser.add_argument("--section-json", help=argparse.SUPPRESS)  # run_sections()'s child
    parser.add_argument("--out", help="write results.json, benchmarks.md and benchmarks.png into this "
                                      "folder (default: build/bench/results.json, docs/benchmarks.{md,png})")
    args = parser.parse_args(argv)
    if args.section_json:
        return _section_child(args.section_json, args.quick)

    import torch
    import torch_npu  # noqa: F401  (import torch loads it too; fail early and clearly if it is missing)
    import report
    if not torch.npu.is_available():
        raise SystemExit("no npu device: is the installed torch_npu built? (make build)")
    _quiet_fallback_warnings()

    if args.out:
        json_path = os.path.join(args.out, "results.json")
        md_path = os.path.join(args.out, "benchmarks.md")
        png_path = os.path.join(args.out, "benchmarks.png")
    else:
        json_path = os.path.join(ROOT, "build", "bench", "results.json")
        md_path = os.path.join(ROOT, "docs", "benchmarks.md")
        png_path = os.path.join(ROOT, "docs", "benchmarks.png")

    names = [s for s in SECTIONS if not args.only or s in args.only]
    machine = machine_info()
    start = time.perf_counter()
    rows, timings = run_sections(names, args.quick)
    launch = None
    if "small_ops" in names and not args.quick:
        import launch_profile
        print("[bench] launch-path profile (callgrind) ...", flush=True)
        profile_start = time.perf_counter()
        launch = launch_profile.profile()
        timings["launch_profile"] = time.perf_counter() - profile_start
    machine["load_average_end"] = os.getloadavg()[0]
    doc = {"quick": args.quick, "sections": names, "machine": machine, "seconds": timings,
           "total_seconds": time.perf_counter() - start, "rows": rows, "launch_profile": launch}
    if args.update:
        doc = _updated(json_path, doc)

    for path in (json_path, md_path, png_path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(json_path, "w") as f:
        json.dump(doc, f, indent=1)
    report.write_chart(doc, png_path)
    report.write_markdown(doc, md_path, chart_name=os.path.basename(png_path))
    print(report.text_table(rows))
    print(f"[bench] wrote {json_path}, {md_path}, {png_path} in {doc['total_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
