"""python -m torch_npu.tools.op_report [-o DIR] -- script.py args...: runs the script and writes its
op-support report (op_report.md, .html, .csv) to DIR (default ./op_report)."""

from __future__ import annotations

import argparse
import os
import runpy
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, script_args = argv[:i], argv[i + 1:]
    parser = argparse.ArgumentParser(prog="python -m torch_npu.tools.op_report",
                                     description="Run a script and report how each op it calls runs on npu.")
    parser.add_argument("-o", "--output", default="op_report", help="output directory (default: ./op_report)")
    parser.add_argument("--title", default=None, help="report title (default: the script's name)")
    parser.add_argument("script", nargs="?", help="the script, after --, followed by its arguments")
    opts, rest = parser.parse_known_args(argv)
    if opts.script is not None:
        script_args = [opts.script] + rest + script_args
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if not script_args:
        parser.error("no script given: python -m torch_npu.tools.op_report -o DIR -- script.py args...")
    script = script_args[0]
    if not os.path.isfile(script):
        parser.error(f"script {script!r} does not exist")

    import torch_npu  # noqa: F401  (registers npu before the script runs)
    from torch_npu.tools.op_report import OpReport

    report = OpReport()
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = script_args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    code, error = 0, None
    try:
        with report:
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # the report of a failing script is still worth writing
        code, error = 1, e
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
    paths = report.write(opts.output, opts.title or f"Op-support report: {os.path.basename(script)}")
    print(report.summary())
    print(f"op report written to {os.path.dirname(paths['md'])} (op_report.md, op_report.html, op_report.csv)")
    if error is not None:
        raise error
    return code


if __name__ == "__main__":
    sys.exit(main())
