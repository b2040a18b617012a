"""`distributed -m ENTRY -t MODEL`: turns a single-device training script into one process per npu — process-group
set-up in the entry file, the model wrapped in DistributedDataParallel, shuffled DataLoaders given a
DistributedSampler — and writes run_distributed_npu.sh (torchrun)."""

from __future__ import annotations

import os
import stat

import libcst as cst

from torch_npu.tools.transplt import changes as ch
from torch_npu.tools.transplt.changes import code, expr

RANK_VAR = "MSFT_LOCAL_RANK"
SETUP = [
    f'{RANK_VAR} = int(os.environ.get("LOCAL_RANK", "0"))  # msft distributed: one process per npu\n',
    f"torch.npu.set_device({RANK_VAR})\n",
    'if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.distributed.is_initialized():\n'
    '    torch.distributed.init_process_group(backend="hccl")\n',
]
_DIST = "torch.distributed.is_initialized()"


def _names_in(node: cst.CSTNode) -> set[str]:
    found = set()

    class _V(cst.CSTVisitor):
        def visit_Name(self, n):
            found.add(n.value)

    node.visit(_V())
    return found


def _assigns(stmt: cst.CSTNode, target: str) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else \
            [small.target] if isinstance(small, (cst.AnnAssign, cst.AugAssign)) else []
        if any(isinstance(t, cst.Name) and t.value == target for t in targets):
            return True
    return False


def _modifies(stmt: cst.CSTNode, target: str) -> bool:
    """`model.to(device)`, `model.npu()`, `model.load_state_dict(...)`: a call on the model as a statement."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
        return False
    call = stmt.body[0].value
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) \
        and isinstance(call.func.value, cst.Name) and call.func.value.value == target


class DistributedPass(ch.Pass):
    """Run on the entry file after the built-in pass."""

    def __init__(self, rel_path: str, target: str):
        super().__init__(rel_path)
        self.target = target
        self.wrapped = False

    def _wrap_in(self, original_body, updated_body):
        """Insert the DDP wrap after the statements that build and place the model, before its first other use."""
        start = next((i for i, s in enumerate(original_body) if _assigns(s, self.target)), None)
        if start is None or self.wrapped:
            return updated_body
        last = start
        for j in range(start + 1, len(original_body)):
            s = original_body[j]
            if _assigns(s, self.target) or _modifies(s, self.target):
                last = j
            elif self.target in _names_in(s):
                break
        self.wrapped = True
        wrap = cst.parse_statement(
            f"if {_DIST}:\n    {self.target} = torch.nn.parallel.DistributedDataParallel({self.target}, "
            f"device_ids=[{RANK_VAR}])\n")
        self.record(original_body[last], ch.DISTRIBUTED, f"{self.target} wrapped in DistributedDataParallel "
                                                         "when the process group is up")
        self.record(original_body[last], ch.MANUAL, f"under DDP the model's own attributes are "
                                                    f"{self.target}.module.<name> and state_dict keys start with "
                                                    "'module.'")
        body = list(updated_body)
        body.insert(last + 1, wrap)
        return body

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(body=self._wrap_in(original.body, updated.body))

    def leave_Module(self, original, updated):
        return updated.with_changes(body=self._wrap_in(original.body, updated.body))

    def leave_Call(self, original, updated):
        if not self.qnames(original.func) & {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}:
            return updated
        kw = {a.keyword.value: a for a in updated.args if a.keyword is not None}
        positional = [a for a in updated.args if a.keyword is None]
        if "shuffle" not in kw or "sampler" in kw or "batch_sampler" in kw:
            if len(positional) > 2:
                self.record(original, ch.MANUAL, "DataLoader with positional shuffle/sampler: give it a "
                                                 "DistributedSampler by hand")
            return updated
        dataset = kw["dataset"].value if "dataset" in kw else positional[0].value if positional else None
        if not isinstance(dataset, (cst.Name, cst.Attribute)):
            self.record(original, ch.MANUAL, "DataLoader: its dataset is not a plain name; give it a "
                                             "DistributedSampler by hand")
            return updated
        shuffle = code(kw["shuffle"].value)
        args = []
        for a in updated.args:
            if a.keyword is not None and a.keyword.value == "shuffle":
                a = a.with_changes(value=expr(f"({shuffle}) and not {_DIST}"))
            args.append(a)
        last = args[-1]
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(cst.Arg(keyword=cst.Name("sampler"), equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
            value=expr(f"torch.utils.data.DistributedSampler({code(dataset)}, shuffle={shuffle}) if {_DIST} "
                       "else None"), comma=last.comma if last.comma is not cst.MaybeSentinel.DEFAULT else
            cst.MaybeSentinel.DEFAULT))
        self.record(original, ch.DISTRIBUTED, "DataLoader gets a DistributedSampler when the process group is up")
        self.record(original, ch.MANUAL, "call loader.sampler.set_epoch(epoch) at the start of each epoch, or every "
                                         "epoch shuffles the same way")
        return updated.with_changes(args=args)


def write_launcher(out_dir: str, entry_rel: str) -> str:
    path = os.path.join(out_dir, "run_distributed_npu.sh")
    script = f"""#!/bin/bash
# Runs {entry_rel} with one process per npu (written by the script converter, torch_npu.tools.transplt).
#   NPUS=2 ./run_distributed_npu.sh [script arguments]
# NPUS defaults to every npu; MASTER_PORT to 29688; PYTHON to python3.
cd "$(dirname "$0")"
PYTHON=${{PYTHON:-python3}}
NPUS=${{NPUS:-$("$PYTHON" -c "import torch; print(torch.npu.device_count())")}}
exec "$PYTHON" -m torch.distributed.run --nnodes=1 --nproc_per_node="$NPUS" \\
    --master_addr=127.0.0.1 --master_port="${{MASTER_PORT:-29688}}" {entry_rel} "$@"
"""
    with open(path, "w", encoding="utf-8") as f:
        f.write(script)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path
