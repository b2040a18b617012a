"""Records every op a piece of code calls (a dispatch mode sees the ops that really run, after autograd and
decompositions) and judges each: how it ran on npu (torch.npu.op_stats) or, for ops that did not run on
npu, how it would run (the dispatcher registry: torch_npu.utils.op_support when present)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ._render import write_reports
from ._verdicts import CPU_FALLBACK, DEVICE_OP, GENERIC, NPU_KERNEL, ORDER, UNKNOWN


@dataclass
class OpUse:
    op: str  # "aten::add.Tensor"
    calls: int = 0
    shapes: Counter = field(default_factory=Counter)
    dtypes: Counter = field(default_factory=Counter)
    devices: Counter = field(default_factory=Counter)
    verdict: str = UNKNOWN
    detail: str = ""
    observed: tuple | None = None  # (verdict, detail) of the calls that ran on npu

    @property
    def blocker(self) -> bool:
        return self.verdict in (CPU_FALLBACK, GENERIC)


def _registry_name(op: str) -> str:
    """The dispatcher's name of an op: "aten::relu.default" -> "aten::relu"."""
    return op[: -len(".default")] if op.endswith(".default") else op


def _static_verdict(op: str) -> tuple[str, str]:
    """How an op would run on npu, from the dispatcher registry of this build."""
    name = _registry_name(op)
    try:
        from torch_npu.utils import op_support
    except ImportError:
        op_support = None
    if op_support is not None:
        v = op_support.verdict(name)
        mapping = {op_support.DEVICE_OP: DEVICE_OP, op_support.GENERIC: GENERIC, op_support.UNKNOWN: UNKNOWN}
        return mapping.get(v.verdict, NPU_KERNEL), (v.device_op or v.description)
    def has(op: str, key: str) -> bool:
        try:
            return torch._C._dispatch_has_kernel_for_dispatch_key(op, key)
        except RuntimeError:  # no such operator (e.g. the guessed .out overload)
            return False

    if has(name, "PrivateUse1"):
        return NPU_KERNEL, "registered npu kernel"
    out = name.split(".", 1)[0].rstrip("_") + ".out"
    if name != out and has(out, "PrivateUse1"):
        return NPU_KERNEL, f"runs through the npu kernel of {out}"
    if has(name, "CPU"):
        return GENERIC, "no npu kernel: generic executor"
    if any(has(name, k) for k in ("CompositeImplicitAutograd", "CompositeExplicitAutograd",
                                  "CompositeExplicitAutogradNonFunctional")):
        return NPU_KERNEL, "built from other ops"
    return UNKNOWN, ""


def _observed_verdict(delta: dict) -> tuple[str, str] | None:
    """How one call ran on npu, from the torch.npu.op_stats counters it moved."""
    paths = {k: {p: n for p, n in v.items() if n} for k, v in delta.items()}
    fallback = sum(v.get("fallback", 0) + v.get("generic_inline", 0) for v in paths.values())
    if fallback:
        return CPU_FALLBACK, "copied to the CPU and back synchronously (data-dependent output, no Meta kernel " \
                             "or strict mode)"
    generic = [k for k, v in paths.items() if v.get("generic")]
    if generic:
        return GENERIC, f"generic executor ({', '.join(sorted(generic))})"
    device = [k for k, v in paths.items() if v.get("device_op")]
    if device:
        return DEVICE_OP, ", ".join(sorted(device))
    return NPU_KERNEL, "npu kernel (no device op, no host task)"


def _delta(before: dict, after: dict) -> dict:
    out = {}
    for k, v in after.items():
        b = before.get(k, {})
        d = {p: n - b.get(p, 0) for p, n in v.items() if n != b.get(p, 0)}
        if d:
            out[k] = d
    return out


def _creates_on_npu(kwargs) -> bool:
    device = kwargs.get("device")
    return device is not None and torch.device(device).type == "npu"


_MAX_PARTS = 6


def _runs(items: list[str]) -> str:
    """Joins per-tensor entries, folding a run of equal ones: "[3, 32, 32] x16" for a stack of 16 images."""
    out = []
    for item in items:
        if out and out[-1][0] == item:
            out[-1][1] += 1
        else:
            out.append([item, 1])
    parts = [item if n == 1 else f"{item} x{n}" for item, n in out]
    if len(parts) > _MAX_PARTS:  # a tensor list (_foreach_*, cat of many): its head and its length
        parts = parts[:_MAX_PARTS - 1] + [f"... ({len(items)} tensors)"]
    return "; ".join(parts)


def _describe(args) -> tuple[str, str, set]:
    flat, _ = tree_flatten(args)
    tensors = [a for a in flat if isinstance(a, torch.Tensor)]
    shapes = _runs([str(list(t.shape)) for t in tensors])
    dtypes = _runs([str(t.dtype).replace("torch.", "") for t in tensors])
    return shapes, dtypes, {t.device.type for t in tensors}


_BOOKKEEPING = ("profiler::",)


class _Recorder(TorchDispatchMode):
    def __init__(self, uses: dict):
        super().__init__()
        self.uses = uses

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.name()  # "aten::add.Tensor"
        if name.startswith(_BOOKKEEPING):  # record_function ranges: not ops a device runs
            return func(*args, **(kwargs or {}))
        if "::" in name and "." not in name.split("::", 1)[1]:
            name += ".default"
        use = self.uses.get(name)
        if use is None:
            use = self.uses[name] = OpUse(name)
        use.calls += 1
        shapes, dtypes, devices = _describe((args, kwargs))
        if _creates_on_npu(kwargs):
            devices.add("npu")
        if len(use.shapes) < 20 or shapes in use.shapes:
            use.shapes[shapes] += 1
        use.dtypes[dtypes] += 1
        for d in devices:
            use.devices[d] += 1
        if "npu" not in devices:
            return func(*args, **kwargs)
        before = _op_stats()
        result = func(*args, **kwargs)
        verdict = _observed_verdict(_delta(before, _op_stats()))
        # The worst way any call of the op ran is its verdict.
        if use.observed is None or ORDER[verdict[0]] < ORDER[use.observed[0]]:
            use.observed = verdict
        return result


class OpReport:
    """Context manager that records the ops run inside it; `ops` lists them, blockers first."""

    def __init__(self):
        self.uses: dict[str, OpUse] = {}
        self._mode: _Recorder | None = None

    def __enter__(self) -> "OpReport":
        self._mode = _Recorder(self.uses)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> bool:
        self._mode.__exit__(*exc)
        self._mode = None
        self._judge()
        return False

    def _judge(self) -> None:
        for name, use in self.uses.items():
            if use.observed is not None:
                use.verdict, use.detail = use.observed
            else:
                use.verdict, detail = _static_verdict(name)
                where = "/".join(sorted(use.devices))
                use.detail = f"ran on {where} only; on npu: {detail}" if where and detail else detail

    @property
    def ops(self) -> list[OpUse]:
        # Within a verdict, the ops this run called on npu come first: those are the ones to fix.
        return sorted(self.uses.values(), key=lambda u: (ORDER[u.verdict], u.observed is None, -u.calls, u.op))

    def summary(self) -> str:
        by = Counter(u.verdict for u in self.uses.values())
        calls = sum(u.calls for u in self.uses.values())
        parts = [f"{by[v]} {v}" for v in sorted(by, key=ORDER.get)]
        blockers = [u for u in self.uses.values() if u.blocker]
        on_npu = sum(1 for u in blockers if u.observed is not None)
        return (f"{len(self.uses)} ops ({calls} calls): {', '.join(parts) or 'none'}; "
                f"{len(blockers)} would not run on a real NPU's op library ({on_npu} of them called on npu "
                f"tensors in this run)")

    def write(self, out_dir: str = "op_report", title: str = "Op-support report") -> dict:
        return write_reports(self, out_dir, title)


def _op_stats() -> dict:
    try:
        import torch_npu  # noqa: F401

        return torch.npu.op_stats()
    except (ImportError, AttributeError, RuntimeError):
        return {}
