"""Generates the npu op glue from config/npu_native_functions.yaml and config/derivatives.yaml.

    python -m codegen.gen --source-root . --out-dir build/generated

Writes, under --out-dir: csrc/aten/NpuNativeFunctions.h and csrc/custom/NpuCustomFunctions.h (adapter
declarations), csrc/custom/NpuCustomOps.h
(typed calls of torch.ops.npu.*), RegisterNpuGenerated.cpp (ATen and npu registrations, Meta kernels),
NpuAutogradGenerated.cpp (autograd Functions), _op_bindings.py (Python functions / Tensor methods) and
_op_table.py (which ATen op runs on which named device op).
Files whose content did not change are left untouched, so nothing recompiles needlessly.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from codegen.gen_autograd import gen_autograd  # noqa: E402
from codegen.gen_cpp import (check_adapters, gen_custom_declarations, gen_declarations, gen_ops_header,  # noqa: E402
                             gen_registrations)  # noqa: E402
from codegen.gen_python import gen_op_table, gen_python  # noqa: E402
from codegen.model import CodegenError, load_config, load_derivatives  # noqa: E402

CONFIG = "config/npu_native_functions.yaml"
DERIVATIVES = "config/derivatives.yaml"


def _write_if_changed(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def generate(source_root: str, out_dir: str) -> None:
    cfg = load_config(os.path.join(source_root, CONFIG))
    load_derivatives(os.path.join(source_root, DERIVATIVES), cfg)
    check_adapters(cfg, source_root)
    outputs = {
        "csrc/aten/NpuNativeFunctions.h": gen_declarations(cfg, CONFIG),
        "csrc/custom/NpuCustomFunctions.h": gen_custom_declarations(cfg, CONFIG),
        "csrc/custom/NpuCustomOps.h": gen_ops_header(cfg, CONFIG),
        "RegisterNpuGenerated.cpp": gen_registrations(cfg, CONFIG),
        "NpuAutogradGenerated.cpp": gen_autograd(cfg, f"{CONFIG} and {DERIVATIVES}", DERIVATIVES),
        "_op_bindings.py": gen_python(cfg, CONFIG),
        "_op_table.py": gen_op_table(cfg, CONFIG),
    }
    for rel, text in outputs.items():
        _write_if_changed(os.path.join(out_dir, rel), text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source-root", default=".")
    parser.add_argument("--out-dir", required=True)
    ns = parser.parse_args(argv)
    try:
        generate(os.path.abspath(ns.source_root), os.path.abspath(ns.out_dir))
    except CodegenError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
