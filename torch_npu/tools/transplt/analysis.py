"""Which calls of a script reach ATen ops that a real NPU would not run: each call is mapped to the ATen ops it
reaches and judged by torch_npu.utils.op_support (the same verdicts as docs/supported_ops.md). Static and best
effort: for the exact list, run the converted script with NPU_SIM_STRICT=1 (docs/user_guide.md)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider

from torch_npu.tools.transplt import mappings
from torch_npu.tools.transplt.changes import code
from torch_npu.utils import op_support

SUGGESTION = ("runs through the generic executor (a CPU kernel) on the software NPU; a real NPU's op library has no "
              "kernel for it: rewrite with supported ops (docs/supported_ops.md), use an affinity function "
              "(torch_npu.contrib) or add an npu kernel (docs/op_development.md)")


@dataclass(frozen=True)
class UnsupportedOp:
    file: str
    line: int
    api: str
    op: str
    verdict: str
    suggestion: str = SUGGESTION


class OpScan(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider)

    def __init__(self, rel_path: str):
        super().__init__()
        self.rel_path = rel_path
        self.found: list[UnsupportedOp] = []
        self._seen: set[tuple[int, str]] = set()

    def _ops(self, func: cst.BaseExpression) -> list[str]:
        qnames = {q.name for q in self.get_metadata(QualifiedNameProvider, func, set())}
        for q in sorted(qnames):
            ops = mappings.aten_ops_for(q)
            if ops:
                return ops
        if isinstance(func, cst.Attribute) and not any(q.startswith(("torch.", "torch_npu.")) for q in qnames):
            name = func.attr.value  # a method call: x.index_add_(...)
            if name not in mappings.NOT_TENSOR_METHODS and not name.startswith("__"):
                if op_support.verdict(name).verdict != op_support.UNKNOWN:
                    return [name]
        return []

    def visit_Call(self, node: cst.Call) -> None:
        line = self.get_metadata(PositionProvider, node).start.line
        for op in self._ops(node.func):
            v = op_support.verdict(op)
            if v.verdict == op_support.GENERIC and (line, v.op) not in self._seen:
                self._seen.add((line, v.op))
                self.found.append(UnsupportedOp(self.rel_path, line, code(node.func), v.op, v.description))
