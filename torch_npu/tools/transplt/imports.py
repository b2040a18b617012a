"""Adding the imports and set-up lines a converted file needs, in the places a reader expects them."""

from __future__ import annotations

import libcst as cst

from torch_npu.tools.transplt.changes import dotted


def _imports_of(stmt: cst.CSTNode) -> list[str]:
    """Modules a top-level `import a.b` / `from a.b import c` statement names."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return []
    out = []
    for small in stmt.body:
        if isinstance(small, cst.Import):
            out += [dotted(a.name) or "" for a in small.names]
        elif isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
            out.append(dotted(small.module) or "")
    return out


def _is_docstring_or_future(stmt: cst.CSTNode, index: int) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    small = stmt.body[0]
    if index == 0 and isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString,
                                                                               cst.ConcatenatedString)):
        return True
    return isinstance(small, cst.ImportFrom) and small.module is not None and dotted(small.module) == "__future__"


def binds(module: cst.Module, name: str) -> bool:
    """Whether a top-level `import name` (or `import name.sub`, which binds the package) is there."""
    for stmt in module.body:
        for m in _imports_of(stmt):
            if isinstance(stmt.body[0], cst.Import) and (m == name or m.startswith(name + ".")):
                return True
    return False


def imports_module(module: cst.Module, name: str) -> bool:
    """Whether `name` itself is imported (`import torch_npu.contrib.amp`, `from torch_npu.contrib.amp import x`)."""
    return any(m == name or m.startswith(name + ".") for stmt in module.body for m in _imports_of(stmt))


def torch_import_index(module: cst.Module) -> int | None:
    """Index of the first top-level statement importing torch."""
    for i, stmt in enumerate(module.body):
        if any(m == "torch" or m.startswith("torch.") for m in _imports_of(stmt)):
            return i
    return None


def add(module: cst.Module, needs: set[str], after_torch: list[str] = ()) -> tuple[cst.Module, list[str]]:
    """Insert `import os` at the top (after the docstring and __future__ imports), torch_npu imports right after
    the first torch import, then the `after_torch` statements. Returns the module and what was inserted."""
    body = list(module.body)
    inserted = []
    top = 0
    while top < len(body) and _is_docstring_or_future(body[top], top):
        top += 1
    if "os" in needs and not binds(module, "os"):
        body.insert(top, cst.parse_statement("import os\n"))
        inserted.append("import os")
    probe = module.with_changes(body=body)
    at = torch_import_index(probe)
    wanted = ["torch_npu"] if "torch_npu" in needs and not binds(probe, "torch_npu") else []
    wanted += sorted(n for n in needs if n.startswith("torch_npu.") and not imports_module(probe, n))
    if at is None and (after_torch or len(wanted) > 1 or wanted and wanted != ["torch_npu"]):
        body.insert(top + (1 if inserted else 0), cst.parse_statement("import torch\n"))
        inserted.append("import torch")
        at = torch_import_index(module.with_changes(body=body))
    if at is None:
        return probe, inserted  # no torch import: the file only carries device strings
    for k, name in enumerate(wanted):
        body.insert(at + 1 + k, cst.parse_statement(f"import {name}\n"))
    inserted += [f"import {n}" for n in wanted]
    if after_torch:
        # Set-up code goes after the imports that open the file (before its first def / class).
        first_def = next((i for i, st in enumerate(body) if isinstance(st, (cst.FunctionDef, cst.ClassDef))),
                         len(body))
        last_import = max([i for i in range(max(first_def, at + 1)) if _imports_of(body[i])] + [at])
        for k, statement in enumerate(after_torch):
            node = cst.parse_statement(statement)
            if k == 0:  # set apart from the imports
                node = node.with_changes(leading_lines=[cst.EmptyLine()])
            body.insert(last_import + 1 + k, node)
        inserted += [s.strip().splitlines()[0] for s in after_torch]
    return module.with_changes(body=body), inserted
