"""The converter's pass for the user's rules (-r rules.json); it runs before the built-in rewrites, on the names
the script was written with."""

from __future__ import annotations

import libcst as cst

from torch_npu.tools.transplt import changes as ch
from torch_npu.tools.transplt.changes import code, dotted, expr
from torch_npu.tools.transplt.rules import Rules


class CustomRulePass(ch.Pass):
    def __init__(self, rel_path: str, rules: Rules):
        super().__init__(rel_path)
        self.rules = rules

    def _calls(self, func: cst.BaseExpression, name: str) -> bool:
        written = dotted(func)
        if written is None:
            return False
        if "." in name:
            return written == name or name in self.qnames(func)
        return written.rsplit(".", 1)[-1] == name

    # --- ArgsModifyRule, FuncNameModifyRule ---------------------------------------------------------------------
    def leave_Call(self, original, updated):
        for rule in self.rules.args:
            if self._calls(original.func, rule.func_name):
                updated = self._modify_arg(original, updated, rule)
        for rule in self.rules.func_names:
            if self._calls(original.func, rule.old_name):
                new_func = self._renamed(updated.func, rule.old_name, rule.new_name)
                self.record(original, ch.CUSTOM_RULE, f"FuncNameModifyRule: {code(original.func)} -> "
                                                      f"{code(new_func)}")
                updated = updated.with_changes(func=new_func)
        return updated

    @staticmethod
    def _renamed(func, old_name, new_name):
        if "." in old_name or "." in new_name or not isinstance(func, (cst.Name, cst.Attribute)):
            return expr(new_name)
        if isinstance(func, cst.Name):
            return func.with_changes(value=new_name)
        return func.with_changes(attr=cst.Name(new_name))

    def _modify_arg(self, original, updated, rule):
        positional = [i for i, a in enumerate(updated.args) if a.keyword is None and not a.star]
        if rule.arg_idx >= len(positional):
            self.record(original, ch.MANUAL, f"ArgsModifyRule: {code(original.func)}(...) has no positional argument "
                                             f"{rule.arg_idx}; not applied")
            return updated
        i = positional[rule.arg_idx]
        args = list(updated.args)
        old = code(args[i].value)
        args[i] = args[i].with_changes(value=expr(rule.arg_new))
        self.record(original, ch.CUSTOM_RULE, f"ArgsModifyRule: argument {rule.arg_idx} of {code(original.func)} "
                                              f"{old} -> {rule.arg_new}")
        return updated.with_changes(args=args)

    # --- ModuleNameModifyRule ----------------------------------------------------------------------------------------
    def leave_Attribute(self, original, updated):
        for rule in self.rules.modules:
            if original.attr.value == rule.old_name and rule.old_module in self.qnames(original):
                self.record(original, ch.CUSTOM_RULE, f"ModuleNameModifyRule: {rule.old_module} -> {rule.new_module}")
                return updated.with_changes(attr=cst.Name(rule.new_name))
        return updated

    def leave_Import(self, original, updated):
        aliases = list(updated.names)
        for i, alias in enumerate(aliases):
            name = dotted(alias.name) or ""
            for rule in self.rules.modules:
                if name == rule.old_module or name.startswith(rule.old_module + "."):
                    new = rule.new_module + name[len(rule.old_module):]
                    asname = alias.asname
                    if asname is None and not rule.parent_module:
                        asname = cst.AsName(name=cst.Name(rule.old_name))  # `old.x` references stay valid
                    aliases[i] = alias.with_changes(name=expr(new), asname=asname)
                    self.record(original, ch.CUSTOM_RULE, f"ModuleNameModifyRule: import {name} -> import {new}")
                    break
        return updated.with_changes(names=aliases)

    def leave_ImportFrom(self, original, updated):
        if original.relative or original.module is None:
            return updated
        module = dotted(original.module) or ""
        for rule in self.rules.modules:
            if module == rule.old_module or module.startswith(rule.old_module + "."):
                new = rule.new_module + module[len(rule.old_module):]
                self.record(original, ch.CUSTOM_RULE, f"ModuleNameModifyRule: from {module} -> from {new}")
                updated = updated.with_changes(module=expr(new))
                break
        if isinstance(updated.names, cst.ImportStar):
            return updated
        names = []
        for alias in updated.names:
            name = alias.name.value if isinstance(alias.name, cst.Name) else None
            for rule in self.rules.modules:
                if module == rule.parent_module and name == rule.old_name:
                    alias = alias.with_changes(name=cst.Name(rule.new_name),
                                               asname=alias.asname or cst.AsName(name=cst.Name(rule.old_name)))
                    self.record(original, ch.CUSTOM_RULE,
                                f"ModuleNameModifyRule: from {module} import {rule.old_name} -> {rule.new_name}")
            for rule in self.rules.func_names:
                old_module, _, old_func = rule.old_name.rpartition(".")
                if name == old_func and (not old_module or old_module == module) and "." not in rule.new_name:
                    alias = alias.with_changes(name=cst.Name(rule.new_name))
                    self.record(original, ch.CUSTOM_RULE, f"FuncNameModifyRule: import {name} -> {rule.new_name}")
            names.append(alias)
        return updated.with_changes(names=names)
