"""How many of upstream torch_npu's forward custom ops this build registers (torch.ops.npu.<name>), overall and for
the ops torch_npu exposes as torch_npu.<name>; the missing ones with their reason from
config/unsupported_custom_ops.yaml (or "no reason given" - which is a gap to close).

    python tools/api_coverage/custom_ops.py [--reference ../shared/reference/torch_npu_api.json] [--missing]

Run it outside the source tree's root (cd /tmp), so that the installed torch_npu is imported.
"""

import argparse
import json
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Backward ops are counted with their forward op, not as ops of their own.
_BACKWARD = re.compile(r"(backward|_grad)$|_backward_|grad_")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", default=os.path.join(ROOT, "..", "shared", "reference", "torch_npu_api.json"))
    parser.add_argument("--missing", action="store_true", help="list the missing ops with their reasons")
    ns = parser.parse_args()
    import torch
    import torch_npu  # noqa: F401

    with open(ns.reference, encoding="utf-8") as f:
        ops = json.load(f)["ops"]
    with open(os.path.join(ROOT, "config", "unsupported_custom_ops.yaml"), encoding="utf-8") as f:
        reasons = yaml.safe_load(f) or {}
    forward = sorted(n for n in ops if not _BACKWARD.search(n))
    present = [n for n in forward if hasattr(torch.ops.npu, n)]
    exposed = [n for n in forward if ops[n]["exposed"]]
    print(f"forward custom ops: {len(present)} of {len(forward)} ({len(present) / len(forward):.0%}); "
          f"exposed as torch_npu.<name>: {sum(n in present for n in exposed)} of {len(exposed)}")
    missing = [n for n in forward if n not in present]
    unexplained = [n for n in missing if n not in reasons]
    print(f"missing: {len(missing)} ({len(missing) - len(unexplained)} with a reason, {len(unexplained)} without)")
    if ns.missing:
        for n in missing:
            print(f"  {n}{' (exposed)' if ops[n]['exposed'] else ''}: {reasons.get(n, 'no reason given')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
