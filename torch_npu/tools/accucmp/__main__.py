"""Command line of the accuracy compare tool (installed as `msaccucmp`)."""

import argparse
import sys
from typing import List, Optional


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="msaccucmp", description="Accuracy compare of torch_npu dumps.")
    sub = parser.add_subparsers(dest="command", required=True)
    compare = sub.add_parser("compare",
                             help="compare an NPU dump with a benchmark dump (HDF5 from torch.utils.dumper)")
    compare.add_argument("-m", "--my_dump_path", required=True, help="the NPU run's dump (.h5)")
    compare.add_argument("-g", "--golden_dump_path", required=True, help="the benchmark's dump (.h5), e.g. from the CPU")
    compare.add_argument("-o", "--output_path", default=".", help="directory for the CSV and HTML reports (default: .)")
    compare.add_argument("--no-progress", action="store_true", help="no progress bar")
    convert = sub.add_parser("convert", help="convert ACL dump files to numpy files (as torch_npu.tools.dump_parse)")
    convert.add_argument("-d", "--dump_path", required=True, help="a dump file or a directory of them")
    convert.add_argument("-out", "--output_path", required=True, help="directory for the .npy files")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    from torch_npu.utils.dump_file import DumpFileError

    try:
        if args.command == "compare":
            from torch_npu.tools.accucmp.compare import compare_files

            result = compare_files(args.my_dump_path, args.golden_dump_path, out_dir=args.output_path,
                                   progress=not args.no_progress and sys.stderr.isatty())
            print(result.summary())
        else:
            from torch_npu.tools.dump_parse import convert

            print(convert(args.dump_path, args.output_path).summary())
    except (DumpFileError, OSError, ValueError) as e:
        print(f"msaccucmp: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
