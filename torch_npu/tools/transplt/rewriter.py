"""The converter's built-in pass: CUDA devices, torch.cuda, .cuda(), nccl, apex amp and optimizers, the profiler's
CUDA activity -> npu; what it cannot rewrite (DataParallel, cudnn flags, CUDA extensions, ...) is recorded as a
manual change. Formatting and comments survive (libcst)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torch_npu.tools.transplt import changes as ch
from torch_npu.tools.transplt import mappings
from torch_npu.tools.transplt.changes import code, dotted, expr


@dataclass(frozen=True)
class Options:
    """index_env: with -s ("DEVICE_ID") or distributed ("LOCAL_RANK") every device is the current one, set from
    that environment variable: explicit device indices are dropped."""

    index_env: str | None = None


_PLACEHOLDERS = ("{}", "%d", "%s", "%i")


def _device_string(s: str) -> str | None:
    """"cuda" / "cuda:N" / "cuda:{}" (a format template) -> "npu" / "npu:N" / "npu:{}"; None for anything else."""
    if s == "cuda":
        return "npu"
    head, sep, tail = s.partition(":")
    if head == "cuda" and sep and (tail.isdigit() or tail in _PLACEHOLDERS or
                                   (tail.startswith("{") and tail.endswith("}") and "{" not in tail[1:])):
        return "npu:" + tail
    return None


def _backend_string(s: str) -> str | None:
    """"nccl" -> "hccl", "cpu:gloo,cuda:nccl" -> "cpu:gloo,npu:hccl"; None when nothing changes."""
    if s == "nccl":
        return "hccl"
    if "," in s or ":" in s:
        parts = []
        for part in s.split(","):
            dev, sep, backend = part.partition(":")
            if not sep:
                return None
            parts.append(f"{'npu' if dev == 'cuda' else dev}:{'hccl' if backend == 'nccl' else backend}")
        out = ",".join(parts)
        return out if out != s and all(p.partition(":")[0] in ("cpu", "npu") for p in parts) else None
    return None


def _index_expr(env: str) -> cst.BaseExpression:
    return expr(f'int(os.environ.get("{env}", "0"))')


class BuiltinRewriter(ch.Pass):
    def __init__(self, rel_path: str, options: Options):
        super().__init__(rel_path)
        self.options = options
        self.needs = set()  # modules the rewritten code needs imported: "torch_npu", "os", "torch_npu.optim", ...

    # --- strings --------------------------------------------------------------------------------------------
    def leave_SimpleString(self, original, updated):
        value = original.evaluated_value
        if not isinstance(value, str):
            return updated
        new = _device_string(value)
        if new is not None:
            if self.options.index_env and new[4:].isdigit():
                new = "npu"
            self.record(original, ch.DEVICE, f'"{value}" -> "{new}"')
            self.needs.add("torch_npu")
            return updated.with_changes(value=f"{updated.prefix}{updated.quote}{new}{updated.quote}")
        new = _backend_string(value)
        if new is not None:
            self.record(original, ch.DISTRIBUTED, f'backend "{value}" -> "{new}"')
            self.needs.add("torch_npu")
            return updated.with_changes(value=f"{updated.prefix}{updated.quote}{new}{updated.quote}")
        if value in mappings.MANUAL_STRINGS:
            self.record(original, ch.MANUAL, mappings.MANUAL_STRINGS[value])
        return updated

    def leave_FormattedString(self, original, updated):
        # f"cuda:{rank}" -> f"npu:{rank}"
        parts = updated.parts
        if len(parts) == 2 and isinstance(parts[0], cst.FormattedStringText) and parts[0].value == "cuda:" \
                and isinstance(parts[1], cst.FormattedStringExpression):
            if self.options.index_env:
                self.record(original, ch.DEVICE, f'{code(original)} -> "npu" (the current device)')
                return cst.SimpleString('"npu"')
            self.record(original, ch.DEVICE, f'{code(original)} -> {code(original).replace("cuda:", "npu:", 1)}')
            self.needs.add("torch_npu")
            return updated.with_changes(parts=[parts[0].with_changes(value="npu:"), parts[1]])
        return updated

    # --- attributes ---------------------------------------------------------------------------------------------
    def leave_Attribute(self, original, updated):
        q = self.qnames(original)
        attr = original.attr.value
        if attr == "CUDA" and any(n.endswith("ProfilerActivity.CUDA") for n in q):
            self.record(original, ch.PROFILER, "ProfilerActivity.CUDA -> ProfilerActivity.PrivateUse1 (npu)")
            return updated.with_changes(attr=cst.Name("PrivateUse1"))
        if attr == "NCCL" and any(n.endswith("Backend.NCCL") for n in q):
            self.record(original, ch.DISTRIBUTED, 'Backend.NCCL -> "hccl"')
            return cst.SimpleString('"hccl"')
        if attr == "is_nccl_available" and any(n.startswith("torch.distributed") for n in q):
            self.record(original, ch.DISTRIBUTED, "is_nccl_available -> is_hccl_available")
            return updated.with_changes(attr=cst.Name("is_hccl_available"))
        if attr == "is_cuda":
            self.record(original, ch.DEVICE, ".is_cuda -> .is_npu")
            return updated.with_changes(attr=cst.Name("is_npu"))
        if isinstance(original.value, cst.Attribute) and original.value.attr.value == "cuda" \
                and "torch.cuda" in self.qnames(original.value):
            return self._torch_cuda(original, updated)
        if isinstance(original.value, cst.Name) and "apex" in self.qnames(original.value) and attr == "amp":
            self.record(original, ch.AMP, "apex.amp -> torch_npu.contrib.amp")
            self.needs.add("torch_npu.contrib.amp")
            return expr("torch_npu.contrib.amp")
        for name in q:
            if name in mappings.APEX_OPTIMIZERS:
                new = mappings.APEX_OPTIMIZERS[name]
                self.record(original, ch.AMP, f"{name} -> {new}")
                self.needs.add("torch_npu.optim")
                return expr(new)
            note = None if name.startswith("torch.cuda.") else mappings.manual_note(name)
            if note and not isinstance(original.value, cst.Call):
                self.record(original, ch.MANUAL, f"{name}: {note}", same_as=note)
                break
        return updated

    def _torch_cuda(self, original, updated):
        name = "torch.cuda." + original.attr.value
        # A listed note wins over a same-named torch.npu function whose answer means something else
        # (get_device_capability exists on npu but answers None).
        note = mappings.manual_note(name)
        counterpart = None if note else mappings.npu_counterpart(name)
        if counterpart is None:
            note = note or "no npu counterpart; left unchanged"
            self.record(original, ch.MANUAL, f"{name}: {note}", same_as=note)
            return updated
        self.record(original, ch.API, f"{name} -> {counterpart}")
        self.needs.add("torch_npu")
        return updated.with_changes(value=updated.value.with_changes(attr=cst.Name("npu")))

    # --- calls --------------------------------------------------------------------------------------------------
    def leave_Call(self, original, updated):
        func = original.func
        fq = self.qnames(func)
        env = self.options.index_env
        if isinstance(func, cst.Attribute) and func.attr.value == "cuda" and "torch.cuda" not in fq:
            args = updated.args
            msg = ".cuda() -> .npu()"
            if env and args:
                args, msg = (), ".cuda(...) -> .npu() (the current device)"
            self.record(original, ch.DEVICE, msg)
            self.needs.add("torch_npu")
            return updated.with_changes(func=updated.func.with_changes(attr=cst.Name("npu")), args=args)
        if env and fq & {"torch.cuda.set_device", "torch.npu.set_device"}:
            self.record(original, ch.DEVICE, f"set_device(...) -> set_device(${env})")
            self.needs.update(("os", "torch_npu"))
            return updated.with_changes(args=[cst.Arg(_index_expr(env))])
        if env and "torch.device" in fq and len(updated.args) == 2 and isinstance(updated.args[0].value,
                                                                                   cst.SimpleString) \
                and updated.args[0].value.evaluated_value == "npu":
            self.record(original, ch.DEVICE, 'torch.device("cuda", N) -> torch.device("npu") (the current device)')
            return updated.with_changes(args=[updated.args[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)])
        if any(n in ("torch.autograd.profiler.profile", "torch.profiler.profile",
                     "torch.autograd.profiler.record_function") for n in fq):
            return self._use_cuda(original, updated)
        for name in fq:
            note = None if name.startswith("torch.cuda.") else mappings.manual_note(name)
            if note:
                self.record(original, ch.MANUAL, f"{name}: {note}", same_as=note)
                break
        return updated

    def _use_cuda(self, original, updated):
        args = []
        for a in updated.args:
            if a.keyword is not None and a.keyword.value == "use_cuda":
                self.record(original, ch.PROFILER, 'use_cuda=... -> use_device="npu"')
                a = a.with_changes(keyword=cst.Name("use_device"), value=cst.SimpleString('"npu"'))
            args.append(a)
        return updated.with_changes(args=args)

    # --- imports ------------------------------------------------------------------------------------------------
    def leave_ImportFrom(self, original, updated):
        if original.relative or isinstance(original.names, cst.ImportStar):
            return updated
        module = dotted(original.module) if original.module else None
        if module is None:
            return updated
        names = [a.name.value for a in original.names if isinstance(a.name, cst.Name)]
        if module == "torch.cuda" or module.startswith("torch.cuda."):
            missing = [n for n in names if mappings.npu_counterpart(f"{module}.{n}") is None]
            if missing:
                for n in missing:
                    note = mappings.manual_note(f"{module}.{n}") or "no npu counterpart"
                    self.record(original, ch.MANUAL, f"{module}.{n}: {note}")
                return updated
            new = "torch.npu" + module[len("torch.cuda"):]
            self.record(original, ch.API, f"from {module} import ... -> from {new} import ...")
            self.needs.add("torch_npu")
            return updated.with_changes(module=expr(new))
        if module == "torch" and "cuda" in names:
            self.record(original, ch.API, "from torch import cuda -> from torch import npu as cuda")
            self.needs.add("torch_npu")
            return updated.with_changes(names=[self._rename_alias(a, "cuda", "npu") for a in updated.names])
        if module in ("apex", "apex.amp"):
            return self._apex_import(original, updated, module, names)
        if module == "apex.optimizers":
            return self._apex_optimizers(original, updated, names)
        note = mappings.manual_note(module)
        if note:
            self.record(original, ch.MANUAL, f"{module}: {note}")
        return updated

    @staticmethod
    def _rename_alias(alias: cst.ImportAlias, old: str, new: str) -> cst.ImportAlias:
        if not (isinstance(alias.name, cst.Name) and alias.name.value == old):
            return alias
        asname = alias.asname or cst.AsName(name=cst.Name(old))
        return alias.with_changes(name=cst.Name(new), asname=asname)

    def _apex_import(self, original, updated, module, names):
        if module == "apex.amp":
            self.record(original, ch.AMP, "from apex.amp import ... -> from torch_npu.contrib.amp import ...")
            return updated.with_changes(module=expr("torch_npu.contrib.amp"))
        others = [n for n in names if n != "amp"]
        if others or "amp" not in names:
            for n in others:
                note = mappings.manual_note("apex." + n) or "no npu counterpart"
                self.record(original, ch.MANUAL, f"apex.{n}: {note}")
            return updated
        self.record(original, ch.AMP, "from apex import amp -> from torch_npu.contrib import amp")
        return updated.with_changes(module=expr("torch_npu.contrib"))

    def _apex_optimizers(self, original, updated, names):
        missing = [n for n in names if f"apex.optimizers.{n}" not in mappings.APEX_OPTIMIZERS]
        if missing:
            for n in missing:
                self.record(original, ch.MANUAL, f"apex.optimizers.{n}: no npu counterpart")
            return updated
        aliases = []
        for a in updated.names:
            new = mappings.APEX_OPTIMIZERS[f"apex.optimizers.{a.name.value}"].rsplit(".", 1)[1]
            self.record(original, ch.AMP, f"apex.optimizers.{a.name.value} -> torch_npu.optim.{new}")
            aliases.append(self._rename_alias(a, a.name.value, new))
        return updated.with_changes(module=expr("torch_npu.optim"), names=aliases)

    def leave_Import(self, original, updated):
        aliases = []
        for a in updated.names:
            name = dotted(a.name)
            if name in ("apex", "apex.amp"):
                self.record(original, ch.AMP, f"import {name} -> import torch_npu.contrib.amp (apex.amp's uses "
                                              "are rewritten; other apex uses are listed as manual changes)")
                asname = a.asname if name == "apex.amp" else None
                aliases.append(a.with_changes(name=expr("torch_npu.contrib.amp"), asname=asname))
                continue
            note = mappings.manual_note(name or "")
            if note:
                self.record(original, ch.MANUAL, f"{name}: {note}")
            aliases.append(a)
        if aliases and aliases[-1].comma is not cst.MaybeSentinel.DEFAULT:
            aliases[-1] = aliases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(names=aliases)
