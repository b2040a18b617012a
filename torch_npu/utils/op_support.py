"""How each op runs on npu, read from the dispatcher registry of this build (one classifier for every tool).

Verdicts, best first:

    device_op   an adapter on a named device op (aclnnXxx): what a real NPU's op library runs
    adapter     an npu kernel without a named device op (views, copies, fill, creation)
    custom      torch_npu's own op (torch.ops.npu.*)
    composite   no kernel of its own: decomposes into other ops (CompositeImplicitAutograd)
    generic     runs through the generic executor (a CPU kernel queued on the npu stream): a real
                NPU's op library would not run it
    unknown     not an op of this build

`docs/supported_ops.md` (codegen/supported_ops.py), the script converter's unsupported-op report and the
profiler's op report all take their verdicts from here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

DEVICE_OP = "device_op"
ADAPTER = "adapter"
CUSTOM = "custom"
COMPOSITE = "composite"
GENERIC = "generic"
UNKNOWN = "unknown"

# Best first: an op name without an overload takes the best verdict of its overloads.
_RANK = {DEVICE_OP: 0, ADAPTER: 1, CUSTOM: 2, COMPOSITE: 3, GENERIC: 4, UNKNOWN: 5}

DESCRIPTIONS = {
    DEVICE_OP: "named device op",
    ADAPTER: "npu kernel",
    CUSTOM: "torch_npu op",
    COMPOSITE: "decomposes into other ops",
    GENERIC: "generic executor (CPU kernel on the npu stream); a real NPU would not run it",
    UNKNOWN: "not an op of this build",
}


@dataclass(frozen=True)
class OpVerdict:
    op: str  # "aten::add.out", "npu::npu_iou" or a base name ("aten::add")
    verdict: str
    device_op: str = ""  # aclnnXxx for device_op verdicts
    via: str = ""  # the out= overload a functional / in-place form runs through ("aten::add.out")

    @property
    def supported(self) -> bool:
        """Whether a real NPU runs it (directly or through the ops it decomposes into)."""
        return self.verdict in (DEVICE_OP, ADAPTER, CUSTOM, COMPOSITE)

    @property
    def description(self) -> str:
        return DESCRIPTIONS[self.verdict]


def has_kernel(op: str, key: str) -> bool:
    """Whether `op` ("aten::add.out") has a kernel registered for dispatch key `key` itself."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(op, key)


def _op_table():
    import torch_npu  # noqa: F401  (registers the npu kernels the registry is read from)
    from torch_npu import _op_table

    return _op_table


def _raw_verdict(name: str, qualified: str, table, routed: set) -> OpVerdict:
    if has_kernel(name, "PrivateUse1") and qualified not in routed:
        device_op = table.DEVICE_OPS.get(qualified, "")
        return OpVerdict(name, DEVICE_OP if device_op else ADAPTER, device_op)
    if has_kernel(name, "CPU") or qualified in routed:
        return OpVerdict(name, GENERIC)
    if any(has_kernel(name, k) for k in ("CompositeImplicitAutograd", "CompositeExplicitAutograd",
                                         "CompositeExplicitAutogradNonFunctional")):
        return OpVerdict(name, COMPOSITE)  # built from other ops (or device-independent)
    return OpVerdict(name, UNKNOWN)


def _signature(name: str, outs: bool):
    base, _, overload = name.partition(".")
    schema = torch._C._dispatch_find_schema_or_throw(base, overload).schema()
    return tuple((a.name, str(a.type)) for a in schema.arguments if (a.is_out if outs else not a.is_out))


def _out_variant(name: str, overloads: list[str]) -> str | None:
    """The out= overload with the same other arguments (add.Tensor -> add.out; add_.Tensor -> add.out): the
    functional and in-place forms run through it when it has an npu kernel (structured ops)."""
    try:
        own = _signature(name, outs=False)
        for cand in overloads:
            if cand != name and _signature(cand, outs=True) and _signature(cand, outs=False) == own:
                return cand
    except RuntimeError:
        pass
    return None


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, OpVerdict]:
    """Every op of the aten and npu namespaces with its verdict, keyed by "ns::name.overload"."""
    table = _op_table()
    routed = set(table.GENERIC_ROUTED)
    out: dict[str, OpVerdict] = {}
    families: dict[str, list[str]] = {}  # "aten::add" -> its overloads (in-place add_ included)
    for name in torch._C._dispatch_get_all_op_names():
        ns, _, qualified = name.partition("::")
        if ns == "npu":
            out[name] = OpVerdict(name, CUSTOM)
        elif ns == "aten":
            out[name] = _raw_verdict(name, qualified, table, routed)
            families.setdefault(name.split(".", 1)[0].rstrip("_"), []).append(name)
    for name, v in list(out.items()):
        if v.verdict != GENERIC or name[len("aten::"):] in routed:
            continue
        fam = [n for n in families.get(name.split(".", 1)[0].rstrip("_"), [])
               if out[n].verdict in (DEVICE_OP, ADAPTER)]
        via = _out_variant(name, fam) if fam else None
        if via is not None:
            out[name] = OpVerdict(name, out[via].verdict, out[via].device_op, via)
    return out


@functools.lru_cache(maxsize=1)
def _by_base_name() -> dict[str, OpVerdict]:
    best: dict[str, OpVerdict] = {}
    for name, v in registry().items():
        base = name.split(".", 1)[0]
        cur = best.get(base)
        if cur is None or _RANK[v.verdict] < _RANK[cur.verdict]:
            best[base] = OpVerdict(base, v.verdict, v.device_op)
    return best


def verdict(op: str) -> OpVerdict:
    """The verdict of one op: "aten::add.out", "add.out", "aten::add" or "add" (the best overload),
    "npu::npu_iou" or "npu_iou"."""
    name = op if "::" in op else ("npu::" + op if op.startswith("npu_") else "aten::" + op)
    reg = registry()
    if name in reg:
        return reg[name]
    return _by_base_name().get(name, OpVerdict(name, UNKNOWN))


def ops_by_verdict() -> dict[str, list[OpVerdict]]:
    """The registry grouped by verdict, each group sorted by op name."""
    groups: dict[str, list[OpVerdict]] = {k: [] for k in _RANK}
    for name in sorted(registry()):
        v = registry()[name]
        groups[v.verdict].append(v)
    return groups
