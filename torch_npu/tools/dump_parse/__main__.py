"""python -m torch_npu.tools.dump_parse -d DUMP_DIR_OR_FILE -o OUT_DIR"""

import argparse
import sys

from torch_npu.tools.dump_parse import DumpParseError, convert


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_npu.tools.dump_parse",
                                     description="Convert device-op dump files to numpy files with a summary.")
    parser.add_argument("-d", "--dump_path", required=True, help="a dump file or a directory of them")
    parser.add_argument("-o", "-out", "--output_path", required=True, help="directory for the .npy files")
    args = parser.parse_args(argv)
    try:
        print(convert(args.dump_path, args.output_path).summary())
    except (DumpParseError, OSError) as e:
        print(f"dump_parse: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
