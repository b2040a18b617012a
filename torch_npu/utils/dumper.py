"""torch.utils.dumper: records every op (forward and backward, ATen and npu ops, on CPU or npu)
with its inputs and outputs into an HDF5 file, replays recorded inputs, and reports overflows.

    with torch.utils.dumper(use_dump=True, dump_path="./model_cpu.h5") as dump:
        loss = model(x).sum(); loss.backward()
    with torch.utils.dumper(use_dump=True, load_file_path="./model_cpu.h5", dump_path="./model_npu.h5"):
        ...  # each op found in the load file runs on the recorded inputs
    # python -m torch_npu.tools.accucmp compare -m model_npu.h5 -g model_cpu.h5

The ops are seen below autograd (a TorchDispatchMode), so backward ops and npu custom ops are
recorded like any other; the file layout is in torch_npu/utils/dump_file.py, the workflow in
docs/accuracy.md.
"""

import os
import sys
import threading
import time
from collections import defaultdict
from typing import Iterable, List, Optional, Sequence

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from torch_npu.utils.dump_file import DumpFile, DumpFileError, DumpWriter, OpRecord, TensorRecord

# Ops that only re-wrap a tensor (autograd bookkeeping) or return no tensor data.
_SKIPPED = frozenset({"detach", "alias", "lift_fresh", "lift_fresh_copy", "record_stream", "_local_scalar_dense",
                      "set_", "_has_compatible_shallow_copy_type"})
_FP16_MAX = 65504.0
_LIBRARY_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, sys.modules[__name__.split(".")[0]]))


def op_name(func) -> str:
    """The name an op is dumped under: "addmm" for aten::addmm, "npu::npu_gelu" for others."""
    name = func._schema.name
    return name[len("aten::"):] if name.startswith("aten::") else name


def python_line() -> str:
    """The innermost Python frame outside torch and torch_npu, as "model.py:12 (forward)"."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_LIBRARY_DIRS) and not filename.startswith("<frozen"):
            return f"{os.path.basename(filename)}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return ""


def _each_tensor(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _each_tensor(v)


def _replace_tensors(value, new):
    """`value` with each tensor replaced by next(new) (same structure)."""
    if isinstance(value, torch.Tensor):
        return next(new)
    if isinstance(value, (list, tuple)):
        return type(value)(_replace_tensors(v, new) for v in value)
    return value


class _Call:
    """One op call's tensor arguments, in dump order, with what the schema says about each."""

    def __init__(self, func, args, kwargs):
        self.func, self.args, self.kwargs = func, args, kwargs
        schema = func._schema
        by_name = {a.name: a for a in schema.arguments}
        self.inputs: List[torch.Tensor] = []
        self.written: List[bool] = []   # the op writes into it (in-place)
        self._out: List[bool] = []      # an out= argument: not an input at all
        for i, value in enumerate(args):
            self._add(schema.arguments[i] if i < len(schema.arguments) else None, value)
        for key, value in kwargs.items():
            self._add(by_name.get(key), value)
        self.is_view = any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)
        self.is_random = torch.Tag.nondeterministic_seeded in func.tags

    def _add(self, arg, value):
        alias = arg.alias_info if arg is not None else None
        is_out = bool(arg is not None and arg.is_out)
        for t in _each_tensor(value):
            self._out.append(is_out)
            if not is_out:
                self.inputs.append(t)
                self.written.append(bool(alias is not None and alias.is_write))

    def with_inputs(self, new_inputs: Sequence[torch.Tensor]):
        """args, kwargs with the (non-out) tensor inputs replaced."""
        it = iter(new_inputs)
        out_flags = iter(self._out)

        def pick(t):
            return t if next(out_flags) else next(it)

        args = _replace_tensors(self.args, (pick(t) for t in _each_tensor(self.args)))
        kwargs = {k: _replace_tensors(v, (pick(t) for t in _each_tensor(v))) for k, v in self.kwargs.items()}
        return args, kwargs


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype)


def _npu_format(t: torch.Tensor):
    """The storage format's name of an npu tensor and, for a private format, its padded storage
    shape (its values are read as the logical tensor all the same: copies convert them)."""
    from torch_npu import _C
    from torch_npu._formats import Format

    desc = _C._npu_storage_desc(t)
    try:
        name = Format(desc["npu_format"]).name
    except ValueError:
        name = str(desc["npu_format"])
    private = name in _PRIVATE_FORMATS
    return name, tuple(desc["storage_sizes"]) if private else ()


_PRIVATE_FORMATS = frozenset({"NC1HWC0", "FRACTAL_Z", "NDC1HWC0", "FRACTAL_Z_3D", "FRACTAL_NZ"})


def _snapshot(t: torch.Tensor, stats_only: bool) -> TensorRecord:
    """A record of `t` as it is now. Device data is copied (asynchronously, into pinned memory);
    the writer thread waits for the copy and converts it."""
    record = TensorRecord(dtype=_dtype_name(t.dtype), shape=tuple(t.shape))
    if t.is_meta or t.layout != torch.strided or (t.dtype.is_complex and stats_only):
        return record
    if t.device.type == "npu":
        record.npu_format, record.storage_shape = _npu_format(t)
    t = t.detach()
    if stats_only:
        if t.numel() == 0:
            record.stats = {"max": float("nan"), "min": float("nan"), "mean": float("nan"), "norm": 0.0,
                            "nan": 0, "inf": 0}
            return record
        x = t.float() if t.dtype in (torch.float16, torch.bfloat16) else t
        x = x if x.is_floating_point() else x.double()
        source = torch.stack([x.amax(), x.amin(), x.mean(), torch.linalg.vector_norm(x),
                              torch.isnan(x).sum().to(x.dtype), torch.isinf(x).sum().to(x.dtype)])
        keys = ("max", "min", "mean", "norm", "nan", "inf")

        def finish(r, values):
            r.stats = {k: (int(v) if k in ("nan", "inf") else float(v)) for k, v in zip(keys, values.tolist())}
    else:
        source = t.float() if t.dtype == torch.bfloat16 else t

        def finish(r, values):
            r.data = values.numpy()
    if source.device.type == "cpu":
        host = source.clone()
        record.nbytes = host.numel() * host.element_size()
        record.fetch = lambda r: finish(r, host)
        return record
    host = torch.empty(source.shape, dtype=source.dtype, pin_memory=True)
    host.copy_(source, non_blocking=True)
    event = torch.npu.Event()
    event.record()
    record.nbytes = host.numel() * host.element_size()

    def fetch(r):
        event.synchronize()
        finish(r, host)

    record.fetch = fetch
    return record


class _ModuleTracker:
    """The path of the module whose forward is running on this thread ("GPT.blocks.0.attn")."""

    def __init__(self):
        self._local = threading.local()
        self._handles = []

    def install(self):
        self._handles = [torch.nn.modules.module.register_module_forward_pre_hook(self._enter),
                         torch.nn.modules.module.register_module_forward_hook(self._exit, always_call=True)]

    def remove(self):
        for h in self._handles:
            h.remove()
        self._handles = []

    def _stack(self):
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    def _enter(self, module, args):
        stack = self._stack()
        if stack:
            parent, path = stack[-1]
            name = next((n for n, m in parent._modules.items() if m is module), type(module).__name__)
            stack.append((module, f"{path}.{name}"))
        else:
            stack.append((module, type(module).__name__))

    def _exit(self, module, args, output):
        stack = self._stack()
        if stack and stack[-1][0] is module:
            stack.pop()

    def current(self) -> str:
        stack = self._stack()
        return stack[-1][1] if stack else ""


class _Mode(TorchDispatchMode):
    def __init__(self, owner: "dumper"):
        super().__init__()
        self._owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self._owner._dispatch(func, args, kwargs or {})


class _FusedDropout(TorchFunctionMode):
    """Dropout as the fused op (native_dropout) on every device: the CPU would otherwise run it as
    bernoulli_ + mul while npu runs native_dropout, and dumps of the two would not line up."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.dropout:
            names = ("input", "p", "training", "inplace")
            bound = dict(zip(names, args), **kwargs)
            x, p = bound["input"], bound.get("p", 0.5)
            if bound.get("training", True) and 0 < p < 1 and x.numel() > 0:
                out = torch.native_dropout(x, p, True)[0]
                return x.copy_(out) if bound.get("inplace", False) else out
        return func(*args, **kwargs)


class dumper:
    """Dump, load and overflow check of every op run inside the `with` block.

    use_dump / dump_path: write each op's inputs and outputs to the HDF5 file `dump_path` (an
    existing directory gets a file named after the time). load_file_path (or use_load): ops found
    in that dump (same op name and call count) run on its recorded inputs, and random ops return
    its recorded results, so each op is judged on its own. check_overflow: ops whose outputs hold
    inf/nan from finite inputs (or float16 inputs giving float32 results beyond the float16 range)
    are printed with their Python line and dumped. load_with_acl_dump: the device ops under each
    loaded op are also dumped per ./acl.json (torch_npu.npu.set_dump).

    For large models: ops=["addmm", ...] and modules=["blocks.0", ...] (module path prefixes;
    forward ops only) select what is dumped, stats_only=True keeps max/min/mean/L2 norm per
    tensor instead of the data, steps=[...] dumps only those steps (call dump.step() after each),
    and the file is written by a background thread (background=False writes inline).
    """

    _active = None

    def __init__(self, use_dump: bool = False, dump_path: Optional[str] = None,
                 load_file_path: Optional[str] = None, check_overflow: bool = False, use_load: bool = False,
                 load_with_acl_dump: bool = False, *, ops: Optional[Iterable[str]] = None,
                 modules: Optional[Iterable[str]] = None, stats_only: bool = False,
                 steps: Optional[Iterable[int]] = None, background: bool = True, verbose: bool = True):
        if use_load and not load_file_path:
            raise ValueError("dumper: use_load=True needs load_file_path (the dump to replay)")
        if use_dump and not dump_path:
            raise ValueError("dumper: use_dump=True needs dump_path (the HDF5 file to write)")
        if load_with_acl_dump and not load_file_path:
            raise ValueError("dumper: load_with_acl_dump=True needs load_file_path (the ops to dump with ACL dump)")
        self.use_dump = use_dump
        self.dump_path = dump_path
        self.load_file_path = load_file_path or None
        self.check_overflow = check_overflow
        self.load_with_acl_dump = load_with_acl_dump
        self.ops = set(ops) if ops is not None else None
        self.modules = list(modules) if modules is not None else None
        self.stats_only = stats_only
        self.steps = set(steps) if steps is not None else None
        self.background = background
        self.verbose = verbose
        self.overflows: List[str] = []   # one line per overflowing op
        self.size = 0                    # bytes of the dump file, after exit
        self._writer: Optional[DumpWriter] = None
        self._loader: Optional[DumpFile] = None
        self._lock = threading.Lock()
        self._seq = defaultdict(int)
        self._order = 0
        self._loaded = 0
        self._mismatched: List[str] = []   # load-file entries this run could not use
        self._dropout = _FusedDropout()
        self._step = 0
        self._mode: Optional[_Mode] = None
        self._modules = _ModuleTracker()
        self._device = ""
        self._start = 0.0

    # ---- context
    def __enter__(self):
        if dumper._active is not None:
            raise RuntimeError("dumper: another torch.utils.dumper is already active; nest none")
        if self.load_file_path:
            self._loader = DumpFile(self.load_file_path)
            if self._loader.mode != "data":
                self._loader.close()
                raise DumpFileError(f"dumper: load file {self.load_file_path} holds statistics only "
                                    "(stats_only=True); dump again with data to replay it")
        if self.use_dump or (self.check_overflow and self.dump_path):
            path = self._file_path()
            try:
                self._writer = DumpWriter(path, "statistics" if self.stats_only and self.use_dump else "data",
                                          device="", background=self.background)
            except DumpFileError:
                if self._loader is not None:
                    self._loader.close()
                raise
        dumper._active = self
        import torch._dynamo  # noqa: F401  (modes load it at their first op: not part of the dump's time)

        self._start = time.perf_counter()
        self._modules.install()
        self._dropout.__enter__()
        if self.steps is None or 0 in self.steps:
            self._activate()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._deactivate()
        self._dropout.__exit__(None, None, None)
        self._modules.remove()
        dumper._active = None
        if self._loader is not None:
            self._loader.close()
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.device = self._device
            self.size = writer.close(complete=exc_type is None)
            if self.verbose and exc_type is None:
                elapsed = time.perf_counter() - self._start
                print(f"dumper: {writer.ops} ops ({writer.tensors} tensors) written to {writer.path}: "
                      f"{self.size / 2**20:.2f} MB in {elapsed:.2f} s")
        if exc_type is None and self._loader is not None:
            self._report_load()
        return False

    def _report_load(self) -> None:
        mismatched = len(self._mismatched)
        if self._order > 0 and self._loaded == 0 and mismatched == 0:
            raise DumpFileError(f"dumper: none of the ops of load file {self.load_file_path} matched this run's "
                                "ops (by op name and call count): it was dumped from another model")
        if mismatched > self._loaded:
            raise DumpFileError(f"dumper: {mismatched} ops of load file {self.load_file_path} do not fit this run "
                                f"(only {self._loaded} do): it was dumped from another model or with other inputs. "
                                f"First: {self._mismatched[0]}")
        if mismatched and self.verbose:
            print(f"dumper: {mismatched} ops of {self.load_file_path} do not fit this run and ran on their own "
                  f"inputs (ops that differ between devices): {'; '.join(self._mismatched[:3])}")

    def step(self) -> None:
        """Marks the end of a training step; with `steps=`, dumping follows the step number."""
        self._step += 1
        wanted = self.steps is None or self._step in self.steps
        if wanted and self._mode is None:
            self._activate()
        elif not wanted and self._mode is not None:
            self._deactivate()

    def _activate(self):
        self._mode = _Mode(self)
        self._mode.__enter__()

    def _deactivate(self):
        if self._mode is not None:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)

    def _file_path(self) -> str:
        path = self.dump_path or "."
        if path.endswith(("/", os.sep)):
            os.makedirs(path, exist_ok=True)
        if os.path.isdir(path):
            prefix = "overflow" if not self.use_dump else "dump"
            path = os.path.join(path, f"{prefix}_{time.strftime('%Y%m%d%H%M%S')}_{os.getpid()}.h5")
        return path

    # ---- the op hook
    def _selected(self, name: str, op: str, module: str, backward: bool) -> bool:
        if self.ops is not None and name not in self.ops and op not in self.ops:
            return False
        if self.modules is not None:
            if backward or not module:
                return False
            inner = module.split(".", 1)[1] if "." in module else ""
            return any(m in (module, inner) or module.startswith(m + ".") or inner.startswith(m + ".")
                       for m in self.modules)
        return True

    def _dispatch(self, func, args, kwargs):
        name = op_name(func)
        if name in _SKIPPED or func.namespace == "prim":
            return func(*args, **kwargs)
        call = _Call(func, args, kwargs)
        backward = torch._C._current_graph_task_id() != -1
        with self._lock:
            seqid = self._seq[name]
            self._seq[name] += 1
            order = self._order
            self._order += 1
        if not self._device:
            self._device = next((str(t.device) for t in call.inputs), "")
        loaded = None
        if self._loader is not None and not call.is_view and (name, seqid) in self._loader:
            loaded = self._load_inputs(call, name, seqid)
            if loaded is not None:
                args, kwargs = call.with_inputs(loaded)
                call = _Call(func, args, kwargs)
        module = self._modules.current() if not backward else ""
        dump = self._writer is not None and self.use_dump and \
            self._selected(name, func._schema.name, module, backward)
        need_snapshot = dump or self.check_overflow and self._writer is not None
        before = {i: _snapshot(t, self.stats_only) for i, t in enumerate(call.inputs)
                  if call.written[i]} if need_snapshot else {}
        if loaded is not None and self.load_with_acl_dump:
            out = self._run_with_acl_dump(func, args, kwargs)
        else:
            out = func(*args, **kwargs)
        outputs = list(_each_tensor(out))
        if loaded is not None and call.is_random:
            self._replay_outputs(outputs, name, seqid)
        overflow = self._check_overflow(call, outputs, name, seqid, module) if self.check_overflow else False
        if dump or overflow and self._writer is not None:
            stats_only = self.stats_only and not overflow
            record = OpRecord(name=name, seqid=seqid, op=func._schema.name, order=order,
                              phase="backward" if backward else "forward", stack=python_line() if not backward else "",
                              module=module, step=self._step)
            record.inputs = [before[i] if i in before else _snapshot(t, stats_only)
                             for i, t in enumerate(call.inputs)]
            record.outputs = [_snapshot(t, stats_only) for t in outputs]
            self._writer.put(record)
        return out

    def _load_inputs(self, call: _Call, name: str, seqid: int) -> Optional[List[torch.Tensor]]:
        """The recorded inputs, or None (noted) when they do not fit the live ones."""
        count = self._loader.tensor_count(name, seqid, "input")
        if count != len(call.inputs):
            self._mismatched.append(f"{name} call #{seqid} has {count} tensor inputs in the file, "
                                    f"{len(call.inputs)} in this run")
            return None
        records = [self._loader.tensor(name, seqid, "input", i) for i in range(count)]
        for i, (rec, live) in enumerate(zip(records, call.inputs)):
            if tuple(rec.shape) != tuple(live.shape):
                self._mismatched.append(f"{name} call #{seqid} input {i} with shape {list(rec.shape)}, this run "
                                        f"passes {list(live.shape)}")
                return None
        new = []
        for i, (rec, live) in enumerate(zip(records, call.inputs)):
            value = _to_tensor(rec.data, live)
            if call.written[i]:
                live.copy_(value)   # in-place ops keep writing into the live tensor
                new.append(live)
            else:
                new.append(value)
        self._loaded += 1
        return new

    def _replay_outputs(self, outputs: List[torch.Tensor], name: str, seqid: int) -> None:
        """Random ops: the recorded results, so the ops after them see the same values."""
        count = self._loader.tensor_count(name, seqid, "output")
        for i, t in enumerate(outputs[:count]):
            rec = self._loader.tensor(name, seqid, "output", i)
            if tuple(rec.shape) == tuple(t.shape):
                t.copy_(_to_tensor(rec.data, t))

    def _run_with_acl_dump(self, func, args, kwargs):
        from torch_npu.npu import dump as acl_dump

        acl_dump.init_dump()
        acl_dump.set_dump("acl.json")
        try:
            return func(*args, **kwargs)
        finally:
            acl_dump.finalize_dump()

    def _check_overflow(self, call: _Call, outputs, name: str, seqid: int, module: str) -> bool:
        floating_out = [(i, t) for i, t in enumerate(outputs) if t.is_floating_point() and t.numel() > 0]
        if not floating_out:
            return False
        scalars_finite = all(np.isfinite(v) for v in _each_scalar((call.args, call.kwargs)))
        inputs_finite = scalars_finite and all(bool(torch.isfinite(t).all()) for t in call.inputs
                                               if t.is_floating_point() and t.numel() > 0)
        if not inputs_finite:
            return False
        half_inputs = any(t.dtype == torch.float16 for t in call.inputs)
        problems = []
        for i, t in floating_out:
            n_inf, n_nan = int(torch.isinf(t).sum()), int(torch.isnan(t).sum())
            if n_inf or n_nan:
                problems.append(f"output {i} {t.dtype}{list(t.shape)} has {n_inf} inf and {n_nan} nan")
            elif half_inputs and t.dtype == torch.float32 and float(t.abs().amax()) > _FP16_MAX:
                problems.append(f"output {i} {t.dtype}{list(t.shape)} exceeds the float16 range "
                                f"(max |x| {float(t.abs().amax()):.6g})")
        if not problems:
            return False
        where = python_line()
        line = (f"dumper: overflow in {call.func._schema.name} call #{seqid}"
                f"{' at ' + where if where else ''}{' in module ' + module if module else ''}: "
                + "; ".join(problems) + " from finite inputs")
        self.overflows.append(line)
        print(line, flush=True)
        return True


def _to_tensor(data: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    """Recorded data as a tensor of `like`'s device, dtype and storage format (a bfloat16 dump
    holds float32; an op replayed on an NC1HWC0 input gets an NC1HWC0 input)."""
    value = torch.from_numpy(np.array(data, copy=True)).to(device=like.device, dtype=like.dtype)
    if like.device.type == "npu":
        fmt, _ = _npu_format(like)
        if fmt in _PRIVATE_FORMATS:
            from torch_npu._formats import Format, npu_format_cast

            value = npu_format_cast(value, Format[fmt])
    return value


def _each_scalar(value):
    if isinstance(value, float):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _each_scalar(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _each_scalar(v)
