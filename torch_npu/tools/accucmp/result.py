"""A comparison's result: per-op rows, root-cause marks and the console summary."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from torch_npu.tools.accucmp.metrics import NO, UNMATCHED, YES

LIKELY_ROOT_CAUSE = "likely root cause"
ROOT_CAUSE = "root cause"
CONTAMINATED = "contaminated"
ONLY_NPU = "only in the NPU dump"
ONLY_BENCH = "only in the benchmark dump"


@dataclass
class Row:
    """One matched tensor (or one op found on one side only)."""
    npu_name: str
    bench_name: str
    npu_dtype: str = ""
    bench_dtype: str = ""
    npu_shape: str = ""
    bench_shape: str = ""
    cosine: Optional[float] = None
    max_abs: Optional[float] = None
    max_rel: Optional[float] = None
    thousandth: Optional[float] = None
    five_thousandths: Optional[float] = None
    npu_stats: Dict[str, float] = field(default_factory=dict)
    bench_stats: Dict[str, float] = field(default_factory=dict)
    verdict: str = YES
    cause: str = ""
    kind: str = "output"        # input / output
    message: str = ""
    op: str = ""
    stack: str = ""
    module: str = ""


@dataclass
class OpResult:
    """The rows of one op call, in execution order."""
    name: str
    seqid: int
    op: str = ""
    order: int = 0
    phase: str = "forward"
    stack: str = ""
    module: str = ""
    inputs: List[Row] = field(default_factory=list)
    outputs: List[Row] = field(default_factory=list)
    cause: str = ""

    @property
    def key(self) -> str:
        return f"{self.name}/{self.seqid}"

    def failed(self) -> bool:
        """An output misses the accuracy bar (a shape mismatch is Unmatched, not a failure)."""
        return any(r.verdict == NO for r in self.outputs)

    def inputs_pass(self) -> bool:
        return all(r.verdict != NO for r in self.inputs)


@dataclass
class CompareResult:
    ops: List[OpResult]
    unmatched: List[str]          # "name/seqid (only in ...)"
    not_compared: List[str] = field(default_factory=list)  # "name/seqid (reason)"
    npu_path: str = ""
    bench_path: str = ""
    csv_path: Optional[str] = None
    html_path: Optional[str] = None

    @property
    def rows(self) -> List[Row]:
        rows = []
        for op in self.ops:
            rows.extend(op.inputs + op.outputs)
        return rows

    @property
    def root_causes(self) -> List[OpResult]:
        return [op for op in self.ops if op.cause in (LIKELY_ROOT_CAUSE, ROOT_CAUSE)]

    @property
    def likely_root_cause(self) -> Optional[OpResult]:
        return next((op for op in self.ops if op.cause == LIKELY_ROOT_CAUSE), None)

    def summary(self) -> str:
        return summary_text(self)


def _unmatched_rows(result: CompareResult) -> List[Row]:
    rows = []
    for entry in result.not_compared:
        name, _, why = entry.partition(" (")
        rows.append(Row(npu_name=name, bench_name="", verdict="Not compared", message=why.rstrip(")")))
    for entry in result.unmatched:
        name, _, where = entry.partition(" (")
        only_npu = where.startswith("only in the NPU")
        rows.append(Row(npu_name=name if only_npu else "", bench_name="" if only_npu else name,
                        verdict=UNMATCHED, message=where.rstrip(")")))
    return rows


def all_rows(result: CompareResult) -> List[Row]:
    return result.rows + _unmatched_rows(result)


def _describe(op: OpResult) -> str:
    where = f" at {op.stack}" if op.stack else ""
    module = f" in {op.module}" if op.module else ""
    worst = min((r for r in op.outputs if r.cosine is not None), key=lambda r: r.cosine, default=None)
    detail = f": cosine {worst.cosine:.4f}, max abs err {worst.max_abs:.4g}" if worst is not None else ""
    return f"{op.key} ({op.op or op.name}, {op.phase}){where}{module}{detail}"


def summary_text(result: CompareResult) -> str:
    rows = all_rows(result)
    failed = [r for r in rows if r.verdict == NO]
    unmatched = [r for r in rows if r.verdict == UNMATCHED]
    lines = [f"compared {len(result.ops)} ops, {len(result.rows)} tensors: {len(failed)} not reached, "
             f"{len(unmatched)} unmatched"]
    likely = result.likely_root_cause
    if likely is not None:
        lines.append(f"likely root cause: {_describe(likely)}")
        others = [op for op in result.root_causes if op is not likely]
        if others:
            lines.append("other ops that fail on matching inputs: " + ", ".join(op.key for op in others[:10])
                         + (" ..." if len(others) > 10 else ""))
        contaminated = [op for op in result.ops if op.cause == CONTAMINATED]
        if contaminated:
            lines.append(f"{len(contaminated)} later ops differ because their inputs already differ (contaminated)")
    elif failed:
        lines.append("every failing op already had differing inputs: no root cause inside the dump")
    else:
        lines.append("accuracy reached for every matched tensor")
    if result.unmatched:
        lines.append(f"unmatched ops ({len(result.unmatched)}): " + ", ".join(result.unmatched[:8])
                     + (" ..." if len(result.unmatched) > 8 else ""))
    if result.not_compared:
        lines.append(f"not compared ({len(result.not_compared)}): " + ", ".join(result.not_compared[:8])
                     + (" ..." if len(result.not_compared) > 8 else ""))
    if result.csv_path:
        lines.append(f"report: {result.csv_path}, {result.html_path}")
    return "\n".join(lines)
