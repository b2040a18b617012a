"""User rules for the script converter (-r rules.json), in seed 003's format:

    {"rules": {
        "ArgsModifyRule":       [{"func_name": "name1", "arg_idx": 0, "arg_new": "args0"}],
        "FuncNameModifyRule":   [{"old_name": "func", "new_name": "new_func"}],
        "ModuleNameModifyRule": [{"old_name": "module", "new_name": "new_module", "parent_module": "parent_module"}]
    }}

ArgsModifyRule replaces positional argument `arg_idx` of every call of `func_name` with the expression `arg_new`;
FuncNameModifyRule renames the called function; ModuleNameModifyRule renames module `parent_module.old_name` (e.g.
parent_module "torch.cuda" for torch.cuda.amp) in imports and attribute chains. A name matches when it is the
dotted name as written (`torch.optim.SGD`, `self.step_fn`) or, for a bare name, its last component.
"""

from __future__ import annotations

import json
import keyword
from dataclasses import dataclass, field

import libcst as cst


class RuleError(ValueError):
    """A malformed rules file; the message names the file, the entry and the problem."""


@dataclass(frozen=True)
class ArgsModifyRule:
    func_name: str
    arg_idx: int
    arg_new: str


@dataclass(frozen=True)
class FuncNameModifyRule:
    old_name: str
    new_name: str


@dataclass(frozen=True)
class ModuleNameModifyRule:
    old_name: str
    new_name: str
    parent_module: str

    @property
    def old_module(self) -> str:
        return f"{self.parent_module}.{self.old_name}" if self.parent_module else self.old_name

    @property
    def new_module(self) -> str:
        return f"{self.parent_module}.{self.new_name}" if self.parent_module else self.new_name


@dataclass
class Rules:
    args: list[ArgsModifyRule] = field(default_factory=list)
    func_names: list[FuncNameModifyRule] = field(default_factory=list)
    modules: list[ModuleNameModifyRule] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.args or self.func_names or self.modules)


_KINDS = {
    "ArgsModifyRule": (ArgsModifyRule, {"func_name": str, "arg_idx": int, "arg_new": str}),
    "FuncNameModifyRule": (FuncNameModifyRule, {"old_name": str, "new_name": str}),
    "ModuleNameModifyRule": (ModuleNameModifyRule, {"old_name": str, "new_name": str, "parent_module": str}),
}


def _dotted(value: str, allow_empty: bool = False) -> bool:
    if value == "":
        return allow_empty
    return all(p.isidentifier() and not keyword.iskeyword(p) for p in value.split("."))


def _check_entry(where: str, kind: str, entry) -> object:
    cls, fields = _KINDS[kind]
    if not isinstance(entry, dict):
        raise RuleError(f"{where}: must be an object with keys {', '.join(fields)}, got {json.dumps(entry)}")
    missing = [k for k in fields if k not in entry]
    if missing:
        raise RuleError(f"{where}: missing {', '.join(repr(k) for k in missing)} (needs {', '.join(fields)})")
    unknown = [k for k in entry if k not in fields]
    if unknown:
        raise RuleError(f"{where}: unknown key {', '.join(repr(k) for k in unknown)} (allowed: {', '.join(fields)})")
    for k, typ in fields.items():
        v = entry[k]
        if typ is int and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise RuleError(f"{where}: {k!r} must be a non-negative integer, got {json.dumps(v)}")
        if typ is str and not isinstance(v, str):
            raise RuleError(f"{where}: {k!r} must be a string, got {json.dumps(v)}")
    for k in ("func_name", "old_name", "new_name"):
        if k in entry and not _dotted(entry[k]):
            raise RuleError(f"{where}: {k!r} must be a (dotted) Python name, got {entry[k]!r}")
    if kind == "ModuleNameModifyRule":
        if not _dotted(entry["parent_module"], allow_empty=True):
            raise RuleError(f"{where}: 'parent_module' must be a dotted module name or \"\", got "
                            f"{entry['parent_module']!r}")
        if "." in entry["old_name"] or "." in entry["new_name"]:
            raise RuleError(f"{where}: 'old_name' and 'new_name' are one module name each; put the rest in "
                            "'parent_module'")
    if kind == "ArgsModifyRule":
        try:
            cst.parse_expression(entry["arg_new"])
        except cst.ParserSyntaxError as e:
            raise RuleError(f"{where}: 'arg_new' is not a Python expression: {entry['arg_new']!r} "
                            f"({str(e).splitlines()[0]})") from None
    return cls(**entry)


def parse_rules(data, source: str = "rules") -> Rules:
    """Rules from the decoded JSON document `data`; `source` names it in errors."""
    if not isinstance(data, dict) or set(data) != {"rules"} or not isinstance(data["rules"], dict):
        raise RuleError(f'{source}: expected {{"rules": {{"ArgsModifyRule": [...], "FuncNameModifyRule": [...], '
                        f'"ModuleNameModifyRule": [...]}}}}')
    rules = Rules()
    for kind, entries in data["rules"].items():
        if kind not in _KINDS:
            raise RuleError(f"{source}: unknown rule kind {kind!r} (known: {', '.join(_KINDS)})")
        if not isinstance(entries, list):
            raise RuleError(f"{source}: {kind} must be a list of rules, got {type(entries).__name__}")
        target = {"ArgsModifyRule": rules.args, "FuncNameModifyRule": rules.func_names,
                  "ModuleNameModifyRule": rules.modules}[kind]
        for i, entry in enumerate(entries):
            target.append(_check_entry(f"{source}: {kind}[{i}]", kind, entry))
    return rules


def load_rules(path: str) -> Rules:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise RuleError(f"cannot read rules file {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise RuleError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    return parse_rules(data, path)
