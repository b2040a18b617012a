"""Command line of the script converter, with seed 003's flags."""

from __future__ import annotations

import argparse
import os
import sys

DESCRIPTION = """Convert a CUDA PyTorch training script (or a directory of them) to run on npu.

Writes OUTPUT/{name}_msft/: the converted files, change_list.csv (every change, and every place that needs your
hand), unsupported_op.csv / .xlsx (calls a real NPU's op library would not run) and msFmkTranspltlog.txt.
With `distributed` the output is {name}_msft_multi/ and adds run_distributed_npu.sh; with -a nothing is
converted: {name}_msft_analysis/ gets cuda_op_list.csv and unsupported_api.csv."""

EPILOG = """examples:
  %(prog)s -i train.py -o out/
  %(prog)s -i project/ -o out/ -r rules.json
  %(prog)s -i project/ -o out/ distributed -m main.py -t model
  %(prog)s -i project/ -o out/ -a"""


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-i", "--input", required=True, help="the script (.py) or the directory to convert")
    p.add_argument("-o", "--output", required=True, help="where to write the {name}_msft folder")
    p.add_argument("-r", "--rule", help="a JSON file of custom rules (ArgsModifyRule, FuncNameModifyRule, "
                                        "ModuleNameModifyRule; docs/migration.md)")
    p.add_argument("-s", "--specify-device", action="store_true",
                   help="every device is the npu named by the DEVICE_ID environment variable (explicit device "
                        "indices are dropped; not for multi-process scripts)")
    p.add_argument("-a", "--analysis-only", action="store_true",
                   help="write no code: list the CUDA APIs used and the unsupported ones")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    sub = p.add_subparsers(dest="mode", metavar="distributed")
    d = sub.add_parser("distributed", help="turn a single-device script into one process per npu (DDP, hccl)")
    d.add_argument("-m", "--main", required=True, help="the training script's entry file, inside the input")
    d.add_argument("-t", "--target-model", default="model", help="the model's variable name (default: model)")
    return p


def main(argv: list[str] | None = None) -> int:
    prog = os.path.basename(sys.argv[0]) if argv is None else "torch_npu_transplt"
    if prog in ("__main__.py", "-c"):
        prog = "python -m torch_npu.tools.transplt"
    ns = build_parser(prog).parse_args(argv)
    from torch_npu.tools.transplt import project
    from torch_npu.tools.transplt.rules import RuleError, Rules, load_rules

    try:
        job = project.Job(input=ns.input, output=ns.output, rules=load_rules(ns.rule) if ns.rule else Rules(),
                          specify_device=ns.specify_device, analysis_only=ns.analysis_only,
                          progress=not ns.no_progress)
        if ns.mode == "distributed":
            job.entry, job.target_model = ns.main, ns.target_model
        result = project.run(job)
    except (RuleError, project.TranspltError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    manual = sum(c.operation == "Manual" for c in result.changes)
    files = f"{result.files} Python file{'s' if result.files != 1 else ''}"
    print(f"converted {files} into {result.out_dir}" if not ns.analysis_only else
          f"analysed {files}; results in {result.out_dir}")
    print(f"  rewritten: {len(result.changes) - manual}; left for you to change by hand: {manual} "
          f"({'unsupported_api.csv' if ns.analysis_only else 'change_list.csv'}, Operation Type Manual)")
    print(f"  {len(result.unsupported_ops)} calls a real NPU would not run (unsupported_op.csv / .xlsx)")
    if result.unparsable:
        print(f"  {len(result.unparsable)} files could not be parsed and were copied unchanged: "
              + ", ".join(result.unparsable))
    return 0
