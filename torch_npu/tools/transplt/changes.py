"""Change records of the script converter and the helpers every rewriting pass shares (positions, names)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider

# Operation types in change_list.csv.
DEVICE = "Device"
API = "API"
DISTRIBUTED = "Distributed"
AMP = "AMP"
PROFILER = "Profiler"
IMPORT = "Import"
CUSTOM_RULE = "Custom Rule"
MANUAL = "Manual"  # not rewritten: the user has to act
UNPARSABLE = "Unparsable"


@dataclass(frozen=True)
class Change:
    file: str
    start_line: int
    end_line: int
    operation: str
    message: str


_EMPTY = cst.Module([])


def code(node: cst.CSTNode) -> str:
    return _EMPTY.code_for_node(node)


def dotted(node: cst.BaseExpression) -> str | None:
    """"a.b.c" for a Name / Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def expr(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


class Pass(cst.CSTTransformer):
    """A rewriting pass over one file that records what it changed or could not change."""

    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider)

    def __init__(self, rel_path: str):
        super().__init__()
        self.rel_path = rel_path
        self.changes: list[Change] = []
        self._seen: set[tuple] = set()

    def qnames(self, node: cst.CSTNode) -> set[str]:
        return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}

    def record(self, node: cst.CSTNode, operation: str, message: str, same_as: str | None = None) -> None:
        """Record one change; `same_as` dedupes notes that nested nodes of one line would repeat."""
        pos = self.get_metadata(PositionProvider, node, None)
        start, end = (pos.start.line, pos.end.line) if pos is not None else (0, 0)
        key = (start, operation, same_as or message)
        if key in self._seen:
            return
        self._seen.add(key)
        self.changes.append(Change(self.rel_path, start, end, operation, message))
