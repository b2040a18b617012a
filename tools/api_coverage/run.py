"""How much of upstream torch_npu's public Python API this build has, by area, and where the signatures
differ: reads ../shared/reference/torch_npu_api.json (or --reference) and resolves every public name in the
installed package.

    python tools/api_coverage/run.py [--reference PATH] [--area torch.npu] [--missing] [--diffs]

Areas follow the issue's Done-when: torch_npu.npu / torch.npu, profiler, optim, testing, modules (the
module list itself), utils, contrib, distributed, and the rest of torch_npu (custom ops included).
"""

import argparse
import importlib
import inspect
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

DEFAULT_REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "torch_npu_api.json"

AREAS = [  # (area, prefixes), first match wins
    ("torch.npu", ("torch_npu.npu", "torch.npu")),
    ("profiler", ("torch_npu.profiler",)),
    ("optim", ("torch_npu.optim",)),
    ("testing", ("torch_npu.testing",)),
    ("utils", ("torch_npu.utils",)),
    ("contrib", ("torch_npu.contrib",)),
    ("distributed", ("torch_npu.distributed",)),
    ("torch_npu", ("torch_npu",)),
]


def area_of(name):
    for area, prefixes in AREAS:
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return area
    return "other"


def resolve(name):
    """The object a dotted public name denotes, or raises LookupError."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except Exception:
            continue
        for attr in parts[cut:]:
            try:
                obj = getattr(obj, attr)
            except Exception as e:
                raise LookupError(name) from e
        return obj
    raise LookupError(name)


def our_params(obj):
    """[(name, kind, has default)] with the reference's kinds (P positional, K keyword-only, V *args,
    W **kwargs), or None when not introspectable."""
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    kinds = {inspect.Parameter.POSITIONAL_ONLY: "P", inspect.Parameter.POSITIONAL_OR_KEYWORD: "P",
             inspect.Parameter.KEYWORD_ONLY: "K", inspect.Parameter.VAR_POSITIONAL: "V",
             inspect.Parameter.VAR_KEYWORD: "W"}
    params = [(p.name, kinds[p.kind], p.default is not inspect.Parameter.empty) for p in sig.parameters.values()]
    if inspect.isclass(obj) and params and params[0][0] == "self":
        params = params[1:]
    return params


def signature_difference(ref_params, ours):
    """How our parameters differ from upstream's, or "" when they agree: upstream's positional parameters
    in the same order under the same names, its keyword-only ones accepted by name, and nothing extra
    that must be passed. An upstream (*args, **kwargs) says nothing to compare."""
    if ours is None or ref_params is None:
        return ""
    ref_pos = [n for n, k, _ in ref_params if k == "P"]
    if ref_pos and ref_pos[0] in ("self", "cls"):
        ref_pos = ref_pos[1:]
    ref_kw = [n for n, k, _ in ref_params if k == "K"]
    if not ref_pos and not ref_kw:
        return ""
    our_pos = [n for n, k, _ in ours if k == "P"]
    our_names = {n for n, k, _ in ours if k in ("P", "K")}
    var_pos, var_kw = any(k == "V" for _, k, _ in ours), any(k == "W" for _, k, _ in ours)
    if not our_pos and var_pos and var_kw:
        return ""  # a generic (*args, **kwargs) wrapper
    if our_pos[:len(ref_pos)] != ref_pos:
        return f"upstream ({', '.join(ref_pos)}) vs ours ({', '.join(our_pos)})"
    lacking = [n for n in ref_kw if n not in our_names]
    if lacking and not var_kw:
        return f"ours lacks keyword {', '.join(lacking)}"
    extra = [n for n, k, d in ours if n not in ref_pos and n not in ref_kw and k in ("P", "K") and not d]
    if extra:
        return f"ours requires extra {', '.join(extra)}"
    return ""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--area", help="only this area")
    parser.add_argument("--missing", action="store_true", help="list the missing names")
    parser.add_argument("--diffs", action="store_true", help="list the signature differences")
    parser.add_argument("--json", type=Path, help="write per-area numbers and lists here")
    args = parser.parse_args(argv)
    ref = json.loads(args.reference.read_text())
    import torch  # noqa: F401
    import torch_npu  # noqa: F401

    found, missing, diffs = defaultdict(int), defaultdict(list), defaultdict(list)
    total = defaultdict(int)
    for name, info in sorted(ref["python"].items()):
        if not info.get("public", True):
            continue
        area = area_of(name)
        if args.area and area != args.area:
            continue
        total[area] += 1
        try:
            obj = resolve(name)
        except LookupError:
            missing[area].append(name)
            continue
        found[area] += 1
        params = info.get("params")
        diff = signature_difference([tuple(p) for p in params] if params is not None else None,
                                    our_params(obj)) if callable(obj) else ""
        if diff:
            diffs[area].append(f"{name}: {diff}")
    # transfer_to_npu patches torch.cuda for the whole process (PyTorch's testing modules then see a
    # "CUDA" device): it is imported last, so that it cannot change what the other imports find.
    for module in sorted(ref["modules"], key=lambda m: m.endswith("transfer_to_npu")):
        if args.area and args.area != "modules":
            continue
        total["modules"] += 1
        try:
            importlib.import_module(module)
            found["modules"] += 1
        except Exception:
            missing["modules"].append(module)

    print(f"{'area':14s} {'names':>6s} {'present':>8s} {'share':>7s} {'sig diffs':>10s}")
    for area in sorted(total):
        share = 100.0 * found[area] / total[area]
        print(f"{area:14s} {total[area]:6d} {found[area]:8d} {share:6.1f}% {len(diffs[area]):10d}")
    for area in sorted(total):
        if args.missing and missing[area]:
            print(f"\nmissing in {area}:")
            print("\n".join("  " + n for n in missing[area]))
        if args.diffs and diffs[area]:
            print(f"\nsignature differences in {area}:")
            print("\n".join("  " + d for d in diffs[area]))
    if args.json:
        args.json.write_text(json.dumps({a: {"names": total[a], "present": found[a], "missing": missing[a],
                                             "diffs": diffs[a]} for a in total}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
