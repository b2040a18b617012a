"""Reader of the ACL-style device-op dump files ({op_type}.{op_name}.{task_id}.{stream_id}.{timestamp},
format in opslib/src/OpDump.cpp and docs/accuracy.md): one numpy file per tensor and a summary.

    python -m torch_npu.tools.dump_parse -d DUMP_DIR_OR_FILE -o OUT_DIR
"""

import csv
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np

MAGIC = b"NPUDUMP1"
_DTYPES = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int8": np.int8,
           "uint8": np.uint8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "bool": np.bool_}


class DumpParseError(ValueError):
    """A file that is not a complete device-op dump."""


@dataclass
class DumpedOp:
    path: str
    header: Dict[str, object]
    tensors: List[Dict[str, object]] = field(default_factory=list)  # header entry + "array"


def read_dump(path: str) -> DumpedOp:
    """One dump file: its header and its tensors as numpy arrays (bfloat16 as float32)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 16 or blob[:8] != MAGIC:
        raise DumpParseError(f"{path} is not a device-op dump file (no {MAGIC.decode()} header)")
    (length,) = struct.unpack("<Q", blob[8:16])
    try:
        header = json.loads(blob[16:16 + length].decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DumpParseError(f"{path}: corrupt header ({e})") from None
    data = blob[16 + length:]
    op = DumpedOp(path=path, header=header)
    for entry in header.get("tensors", []):
        start, size = int(entry["offset"]), int(entry["nbytes"])
        if start + size > len(data):
            raise DumpParseError(f"{path} is truncated: tensor {entry['role']} {entry['index']} needs bytes "
                                 f"{start}..{start + size}, the file has {len(data)}")
        raw = np.frombuffer(data, dtype=np.uint8, count=size, offset=start)
        if entry["dtype"] == "bfloat16":
            array = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif entry["dtype"] in _DTYPES:
            array = raw.view(_DTYPES[entry["dtype"]])
        else:
            raise DumpParseError(f"{path}: unknown dtype {entry['dtype']}")
        op.tensors.append(dict(entry, array=array.reshape(entry["shape"]).copy()))
    return op


def _dump_files(path: str) -> List[str]:
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path} does not exist")
    files = []
    for root, _, names in os.walk(path):
        files.extend(os.path.join(root, n) for n in names if not n.startswith(".") and n.count(".") >= 4)
    return sorted(files)


@dataclass
class ConvertResult:
    out_dir: str
    rows: List[Dict[str, object]]

    def summary(self) -> str:
        lines = [f"{len({r['file'] for r in self.rows})} dump files, {len(self.rows)} tensors -> {self.out_dir}"]
        for r in self.rows:
            fmt = f" ({r['format']})" if r["format"] not in ("", "ND") else ""
            lines.append(f"  {r['npy']}: {r['dtype']}{r['shape']}{fmt} min {r['min']} max {r['max']} mean {r['mean']}")
        return "\n".join(lines)


def convert(path: str, out_dir: str) -> ConvertResult:
    """Writes {dump file name}.{input|output}.{i}.npy per tensor and summary.csv into `out_dir`."""
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for file in _dump_files(path):
        op = read_dump(file)
        for t in op.tensors:
            name = f"{os.path.basename(file)}.{t['role']}.{t['index']}.npy"
            np.save(os.path.join(out_dir, name), t["array"])
            a = t["array"].astype(np.float64)
            stats = (f"{a.min():.6g}", f"{a.max():.6g}", f"{a.mean():.6g}") if a.size else ("", "", "")
            rows.append({"file": os.path.basename(file), "op_type": op.header.get("op_type"),
                         "launch": op.header.get("tag", ""), "role": t["role"], "index": t["index"],
                         "dtype": t["dtype"], "shape": list(t["shape"]), "format": t.get("format", ""),
                         "npy": name,
                         "min": stats[0], "max": stats[1], "mean": stats[2]})
    with open(os.path.join(out_dir, "summary.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["file", "op_type", "launch", "role", "index", "dtype", "shape",
                                               "format", "npy", "min", "max", "mean"])
        writer.writeheader()
        writer.writerows(rows)
    return ConvertResult(out_dir=out_dir, rows=rows)
