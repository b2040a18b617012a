"""The HDF5 dump file of torch.utils.dumper: its layout, the writer and the reader.

Layout (readable with h5py, h5dump, h5copy):

    /                              attrs: format="torch_npu.dumper", version, mode ("data" or
                                          "statistics"), complete=True, device, ops, created
    /{op_name}/{seqid}/            one call of an op (seqid counts the calls of that op from 0);
                                   attrs: op (full schema name), order (position in the run),
                                          phase ("forward" / "backward"), stack (Python line),
                                          module (module path), step
    /{op_name}/{seqid}/input/{i}   the i-th tensor argument (tensor lists flattened), as it was
    /{op_name}/{seqid}/output/{i}  before the op ran, and the i-th tensor result. attrs: dtype
                                   (torch name), shape, max, min, mean, norm (L2), nan, inf;
                                   npu tensors add npu_format ("ND", "NCHW", "NC1HWC0"...) and,
                                   for a private format, storage_shape (the padded storage).
                                   The data is always the logical tensor, whatever its format.
                                   In "statistics" files the datasets are empty: attrs only.

bfloat16 data is stored as float32 (numpy has no bfloat16); the dtype attribute keeps the truth.
A file is written under a temporary name and renamed when complete, so an interrupted dump never
leaves a file that reads as a valid one.
"""

import os
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

FORMAT = "torch_npu.dumper"
VERSION = 1


class DumpFileError(RuntimeError):
    """A dump file that is missing, unreadable, incomplete or not a torch_npu dump."""


def tensor_stats(array: np.ndarray) -> Dict[str, float]:
    """max / min / mean / L2 norm (over every value: an inf or nan shows in them) and the nan and
    inf counts; nan statistics for an empty tensor."""
    a = np.abs(array) if array.dtype.kind == "c" else array
    a = a.astype(np.float64, copy=False)
    if a.size == 0:
        return {"max": float("nan"), "min": float("nan"), "mean": float("nan"), "norm": 0.0, "nan": 0, "inf": 0}
    with np.errstate(all="ignore"):
        return {"max": float(a.max()), "min": float(a.min()), "mean": float(a.mean()),
                "norm": float(np.sqrt(np.square(a).sum())), "nan": int(np.isnan(a).sum()),
                "inf": int(np.isinf(a).sum())}


@dataclass
class TensorRecord:
    """One tensor of a dumped op: its data (None in statistics mode) and what describes it.
    `fetch`, when set, fills in data / stats on the writer thread (device copies still in flight);
    `nbytes` is what the record holds in memory until written."""
    dtype: str                 # "torch.float32"
    shape: Tuple[int, ...]
    data: Optional[np.ndarray] = None
    stats: Optional[Dict[str, float]] = None
    npu_format: str = ""       # npu tensors: their storage format's name
    storage_shape: Tuple[int, ...] = ()  # private formats: the padded storage shape
    fetch: Optional[Callable[["TensorRecord"], None]] = None
    nbytes: int = 0


@dataclass
class OpRecord:
    name: str                  # "addmm"
    seqid: int
    op: str                    # "aten::addmm"
    order: int
    phase: str                 # "forward" / "backward"
    stack: str
    module: str
    step: int
    inputs: List[TensorRecord] = field(default_factory=list)
    outputs: List[TensorRecord] = field(default_factory=list)

    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.inputs + self.outputs)


class DumpWriter:
    """Writes OpRecords into an HDF5 file, on a thread of its own (`background=True`) so the
    training thread only queues them. The queue holds at most `max_queued_bytes` of tensor data:
    beyond that the training thread waits for the writer. Errors surface at close()."""

    def __init__(self, path: str, mode: str, device: str, background: bool = True,
                 max_queued_bytes: int = 256 << 20):
        import h5py

        self.path = os.path.abspath(path)
        directory = os.path.dirname(self.path)
        if not os.path.isdir(directory):
            raise DumpFileError(f"dumper: cannot write {path}: directory {directory} does not exist; "
                                "create it or choose another dump_path")
        self._temp = os.path.join(directory, f".{os.path.basename(self.path)}.tmp{os.getpid()}")
        try:
            self._file = h5py.File(self._temp, "w")
        except OSError as e:
            raise DumpFileError(f"dumper: cannot write {path}: {e.strerror or e}; choose a writable "
                                "dump_path") from None
        self._file.attrs.update({"format": FORMAT, "version": VERSION, "mode": mode, "device": device,
                                 "complete": False, "created": time.strftime("%Y-%m-%d %H:%M:%S")})
        self.mode = mode
        self.device = device
        self.ops = 0
        self.tensors = 0
        self._error: Optional[BaseException] = None
        self._limit = max_queued_bytes
        self._queued = 0
        self._cv = threading.Condition()
        self._queue: "queue.Queue[Optional[OpRecord]]" = queue.Queue()
        self._thread = None
        if background:
            self._thread = threading.Thread(target=self._run, name="torch_npu-dumper", daemon=True)
            self._thread.start()

    @property
    def failed(self) -> bool:
        return self._error is not None

    def put(self, record: OpRecord) -> None:
        if self._error is not None:
            return
        if self._thread is None:
            self._write_guarded(record)
            return
        size = record.nbytes()
        with self._cv:
            while self._queued > 0 and self._queued + size > self._limit and self._error is None:
                self._cv.wait()
            self._queued += size
        self._queue.put(record)

    def _run(self) -> None:
        while True:
            record = self._queue.get()
            if record is None:
                return
            self._write_guarded(record)
            with self._cv:
                self._queued -= record.nbytes()
                self._cv.notify_all()

    def _write_guarded(self, record: OpRecord) -> None:
        if self._error is not None:
            return
        try:
            self._write(record)
        except BaseException as e:  # noqa: BLE001  (reported at close)
            self._error = e
            with self._cv:
                self._cv.notify_all()

    def _write(self, record: OpRecord) -> None:
        group = self._file.require_group(record.name).create_group(str(record.seqid))
        group.attrs.update({"op": record.op, "order": record.order, "phase": record.phase,
                            "stack": record.stack, "module": record.module, "step": record.step})
        for kind, tensors in (("input", record.inputs), ("output", record.outputs)):
            sub = group.create_group(kind)
            for i, t in enumerate(tensors):
                if t.fetch is not None:
                    t.fetch(t)
                    t.fetch = None
                if t.data is not None:
                    ds = sub.create_dataset(str(i), data=t.data)
                    stats = t.stats if t.stats is not None else tensor_stats(t.data)
                else:
                    import h5py

                    ds = sub.create_dataset(str(i), data=h5py.Empty("f"))
                    stats = t.stats or {}
                ds.attrs.update({"dtype": t.dtype, "shape": np.asarray(t.shape, dtype=np.int64)})
                if t.npu_format:
                    ds.attrs["npu_format"] = t.npu_format
                if t.storage_shape:
                    ds.attrs["storage_shape"] = np.asarray(t.storage_shape, dtype=np.int64)
                ds.attrs.update(stats)
                self.tensors += 1
        self.ops += 1

    def close(self, complete: bool = True) -> int:
        """Flushes and closes. With `complete`, renames the file to its final name and returns its
        size; otherwise (or after a write error) removes it. Raises DumpFileError on a write error."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
        error = self._error
        if error is None and complete:
            try:
                self._file.attrs["complete"] = True
                self._file.attrs["ops"] = self.ops
                self._file.attrs["device"] = self.device
                self._file.close()
                os.replace(self._temp, self.path)
                return os.path.getsize(self.path)
            except OSError as e:
                error = e
        try:
            self._file.close()
        except Exception:  # noqa: BLE001  (the file is being discarded)
            pass
        if os.path.exists(self._temp):
            os.remove(self._temp)
        if error is not None:
            reason = getattr(error, "strerror", None) or str(error)
            raise DumpFileError(f"dumper: writing {self.path} failed: {reason} (the disk may be full or a "
                                "file-size limit reached); free space, dump fewer ops (ops=..., modules=...) or "
                                "use stats_only=True. No dump file was left.") from error
        return 0


class DumpFile:
    """A dump file opened for reading; validates it is a complete torch_npu dump."""

    def __init__(self, path: str):
        import h5py

        self.path = path
        if not os.path.exists(path):
            raise DumpFileError(f"dump file {path} does not exist")
        try:
            self._file = h5py.File(path, "r")
        except OSError as e:
            raise DumpFileError(f"dump file {path} is not a readable HDF5 file ({e}); it is corrupt or not "
                                "a torch.utils.dumper dump") from None
        attrs = self._file.attrs
        if attrs.get("format") != FORMAT:
            self._file.close()
            raise DumpFileError(f"{path} is an HDF5 file but not a torch.utils.dumper dump (no format "
                                f"attribute {FORMAT!r})")
        if not bool(attrs.get("complete", False)):
            self._file.close()
            raise DumpFileError(f"dump file {path} is incomplete: the dump was interrupted; dump again")
        self.mode = str(attrs.get("mode", "data"))
        self.device = str(attrs.get("device", ""))

    def close(self) -> None:
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def keys(self) -> Iterator[Tuple[str, int]]:
        """(op name, seqid) of every op call, in file order."""
        for name, group in self._file.items():
            for seqid in group.keys():
                yield name, int(seqid)

    def __contains__(self, key: Tuple[str, int]) -> bool:
        name, seqid = key
        return name in self._file and str(seqid) in self._file[name]

    def attrs(self, name: str, seqid: int) -> Dict[str, object]:
        return dict(self._file[name][str(seqid)].attrs)

    def tensor_count(self, name: str, seqid: int, kind: str) -> int:
        group = self._file[name][str(seqid)]
        return len(group[kind]) if kind in group else 0

    def tensor(self, name: str, seqid: int, kind: str, index: int, with_data: bool = True) -> TensorRecord:
        ds = self._file[name][str(seqid)][kind][str(index)]
        stats = {k: float(v) for k, v in ds.attrs.items() if k in ("max", "min", "mean", "norm", "nan", "inf")}
        data = None
        if with_data and ds.shape is not None:
            data = ds[()]
            if not isinstance(data, np.ndarray):
                data = np.asarray(data)
        return TensorRecord(dtype=str(ds.attrs.get("dtype", data.dtype if data is not None else "")),
                            shape=tuple(int(s) for s in ds.attrs.get("shape", ())), data=data, stats=stats,
                            npu_format=str(ds.attrs.get("npu_format", "")),
                            storage_shape=tuple(int(s) for s in ds.attrs.get("storage_shape", ())))
