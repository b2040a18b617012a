"""python -m torch_npu.tools.accuracy [-o DIR] [--max-ops N] script.py [args...]

Runs the script with every npu op checked against the CPU on the same inputs, then writes the
report (CSV + HTML) and prints its summary."""

import argparse
import os
import runpy
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_npu.tools.accuracy",
                                     description="Check every npu op of a script against the CPU.")
    parser.add_argument("-o", "--output_path", default=".", help="directory for the reports (default: .)")
    parser.add_argument("--max-ops", type=int, default=20000,
                        help="stop checking after this many ops; the script runs on (default: 20000)")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    if not os.path.isfile(opts.script):
        parser.error(f"script {opts.script} does not exist")

    import torch_npu  # noqa: F401
    from torch_npu.tools.accucmp.report import write_reports
    from torch_npu.tools.accuracy.shadow import CpuShadow

    sys.argv = [opts.script] + opts.args
    sys.path.insert(0, os.path.dirname(os.path.abspath(opts.script)))
    shadow = CpuShadow(max_ops=opts.max_ops)
    status = 0
    try:
        with shadow:
            runpy.run_path(opts.script, run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        result = shadow.result()
        write_reports(result, opts.output_path)
        print(result.summary())
    return status


if __name__ == "__main__":
    sys.exit(main())
