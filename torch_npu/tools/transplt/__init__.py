"""The script converter (seed 003's ms_fmk_transplt): rewrites a CUDA training script or project for npu.

    python -m torch_npu.tools.transplt -i train.py -o out/            # or torch_npu_transplt / ms_fmk_transplt
    python -m torch_npu.tools.transplt -i proj/ -o out/ -r rules.json distributed -m main.py -t model

Writes out/{name}_msft/ (the converted tree, change_list.csv, unsupported_op.csv/.xlsx, msFmkTranspltlog.txt);
docs/migration.md lists what it rewrites and what it leaves to the user. From Python: `run(Job(...))`.
"""

from torch_npu.tools.transplt.project import Job, Result, TranspltError, run
from torch_npu.tools.transplt.rules import RuleError, load_rules, parse_rules

__all__ = ["Job", "Result", "run", "TranspltError", "RuleError", "load_rules", "parse_rules"]
