"""Converting a file or a directory tree: every .py file through the passes, everything else copied, then the
reports. A file is written only once it converted completely; a file that does not parse is copied unchanged
and reported."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper

from torch_npu.tools.transplt import changes as ch
from torch_npu.tools.transplt import imports, report
from torch_npu.tools.transplt.analysis import OpScan
from torch_npu.tools.transplt.custom_rules import CustomRulePass
from torch_npu.tools.transplt.distributed import SETUP, DistributedPass, write_launcher
from torch_npu.tools.transplt.rewriter import BuiltinRewriter, Options
from torch_npu.tools.transplt.rules import Rules

LOG_NAME = "msFmkTranspltlog.txt"
_SKIP_DIRS = {"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache"}


class TranspltError(Exception):
    """A problem with the converter's arguments, described for the user."""


@dataclass
class Job:
    input: str
    output: str
    rules: Rules = field(default_factory=Rules)
    specify_device: bool = False
    entry: str | None = None  # distributed: entry file, relative to the input directory
    target_model: str = "model"
    analysis_only: bool = False
    progress: bool = True


@dataclass
class Result:
    out_dir: str
    files: int = 0
    changes: list = field(default_factory=list)
    unsupported_ops: list = field(default_factory=list)
    unparsable: list = field(default_factory=list)
    written: list = field(default_factory=list)  # report files


def _out_dir(job: Job) -> str:
    src = os.path.abspath(job.input)
    name = os.path.basename(src.rstrip(os.sep))
    if os.path.isfile(src):
        name = os.path.splitext(name)[0]
    suffix = "_msft_analysis" if job.analysis_only else "_msft_multi" if job.entry else "_msft"
    return os.path.join(os.path.abspath(job.output), name + suffix)


def _files(job: Job, out_dir: str) -> list[str]:
    src = os.path.abspath(job.input)
    if os.path.isfile(src):
        return [os.path.basename(src)]
    found = []
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and os.path.join(root, d) != out_dir
                         and not d.endswith(("_msft", "_msft_multi", "_msft_analysis")))
        found += [os.path.relpath(os.path.join(root, f), src) for f in sorted(files)]
    return found


def _prepare(job: Job) -> tuple[str, str]:
    src = os.path.abspath(job.input)
    if not os.path.exists(src):
        raise TranspltError(f"-i {job.input}: no such file or directory")
    if os.path.isfile(src) and not src.endswith(".py"):
        raise TranspltError(f"-i {job.input}: expected a .py file or a directory")
    base = src if os.path.isdir(src) else os.path.dirname(src)
    if job.entry is not None:
        entry = os.path.relpath(os.path.abspath(os.path.join(base, job.entry)), base) \
            if not os.path.isabs(job.entry) else os.path.relpath(job.entry, base)
        if entry.startswith("..") or not os.path.isfile(os.path.join(base, entry)):
            raise TranspltError(f"distributed -m {job.entry}: not a file of the input {job.input}")
        if not job.target_model.isidentifier():
            raise TranspltError(f"distributed -t {job.target_model!r}: the model must be a variable name")
        job.entry = entry
    out_dir = _out_dir(job)
    if os.path.exists(out_dir):
        if not os.path.exists(os.path.join(out_dir, LOG_NAME)):
            raise TranspltError(f"{out_dir} exists and is not a converter output; remove it or choose another -o")
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    return base, out_dir


def _convert_source(job: Job, rel: str, text: str, result: Result, log) -> str:
    module = cst.parse_module(text)
    result.unsupported_ops += _scan(rel, module)
    file_changes = []
    if job.rules:
        p = CustomRulePass(rel, job.rules)
        module = MetadataWrapper(module).visit(p)
        file_changes += p.changes
    index_env = "DEVICE_ID" if job.specify_device else "LOCAL_RANK" if job.entry else None
    p = BuiltinRewriter(rel, Options(index_env=index_env))
    module = MetadataWrapper(module).visit(p)
    file_changes += p.changes
    needs, after = set(p.needs), []
    if job.entry == rel:
        d = DistributedPass(rel, job.target_model)
        module = MetadataWrapper(module).visit(d)
        file_changes += d.changes
        if not d.wrapped:
            file_changes.append(ch.Change(rel, 1, 1, ch.MANUAL, f"distributed -t {job.target_model}: no assignment "
                                                                "to it found; wrap the model in "
                                                                "DistributedDataParallel by hand"))
            log("WARNING", f"{rel}: model variable {job.target_model!r} not found")
        needs.update(("os", "torch_npu"))
        after = SETUP
    elif job.specify_device and any(c.operation == ch.DEVICE for c in p.changes):
        needs.update(("os", "torch_npu"))
        after = ['torch.npu.set_device(int(os.environ.get("DEVICE_ID", "0")))  # msft -s: the npu comes from '
                 'DEVICE_ID\n']
    if file_changes:
        module, inserted = imports.add(module, needs, after)
        at = next((i for i, line in enumerate(text.splitlines(), 1) if line.startswith(("import torch", "from torch"))),
                  1)
        for line in inserted:
            kind = ch.IMPORT if line.startswith("import ") else ch.DISTRIBUTED if job.entry == rel else ch.DEVICE
            file_changes.append(ch.Change(rel, at, at, kind, f"added: {line}"))
    result.changes += file_changes
    file_manual = sum(c.operation == ch.MANUAL for c in file_changes)
    log("INFO", f"{rel}: {len(file_changes) - file_manual} rewritten, {file_manual} to change by hand")
    return module.code


def _scan(rel: str, module: cst.Module):
    scan = OpScan(rel)
    MetadataWrapper(module).visit(scan)
    return scan.found


def _write(path: str, data, binary=False) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".msft-tmp"
    with open(tmp, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": ""})) as f:
        f.write(data)
    os.replace(tmp, path)


def run(job: Job) -> Result:
    from tqdm import tqdm

    base, out_dir = _prepare(job)
    log = report.Log(os.path.join(out_dir, LOG_NAME))
    log("INFO", f"input {os.path.abspath(job.input)} -> {out_dir}" + (" (analysis only)" if job.analysis_only else ""))
    if job.entry:
        log("INFO", f"distributed: entry {job.entry}, model variable {job.target_model}")
    result = Result(out_dir)
    files = _files(job, out_dir)
    for rel in tqdm(files, desc="transplt", unit="file", disable=not job.progress):
        src_path, dst_path = os.path.join(base, rel), os.path.join(out_dir, rel)
        if not rel.endswith(".py"):
            if rel.endswith((".cu", ".cuh")):
                result.changes.append(ch.Change(rel, 1, 1, ch.MANUAL, "CUDA source file: its kernels need npu ops "
                                                                      "(docs/op_development.md)"))
            if not job.analysis_only:
                os.makedirs(os.path.dirname(dst_path), exist_ok=True)
                shutil.copy2(src_path, dst_path)
            continue
        result.files += 1
        with open(src_path, "rb") as f:
            raw = f.read()
        try:
            converted = _convert_source(job, rel, raw.decode("utf-8"), result, log)
        except (UnicodeDecodeError, cst.ParserSyntaxError) as e:
            reason = f"not UTF-8 ({e.reason})" if isinstance(e, UnicodeDecodeError) else \
                f"syntax error at line {e.raw_line}, column {e.raw_column + 1}"
            result.unparsable.append(rel)
            result.changes.append(ch.Change(rel, getattr(e, "raw_line", 1), getattr(e, "raw_line", 1),
                                            ch.UNPARSABLE, f"not converted ({reason}); copied unchanged"))
            log("ERROR", f"{rel}: cannot be parsed ({reason}); copied unchanged")
            if not job.analysis_only:
                _write(dst_path, raw, binary=True)
            continue
        if not job.analysis_only:
            _write(dst_path, converted)
    if job.analysis_only:
        result.written += report.write_analysis(out_dir, result.changes, result.unsupported_ops)
    else:
        result.written.append(report.write_change_list(out_dir, result.changes))
        if job.entry:
            result.written.append(write_launcher(out_dir, job.entry))
    result.written += report.write_unsupported_ops(out_dir, result.unsupported_ops)
    manual = sum(c.operation == ch.MANUAL for c in result.changes)
    log("INFO", f"{result.files} Python files, {len(result.changes) - manual} rewritten, {manual} to change by "
                f"hand, {len(result.unsupported_ops)} calls a real NPU would not run, "
                f"{len(result.unparsable)} unparsable")
    log.save()
    result.written.append(log.path)
    return result
