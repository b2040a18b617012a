"""ACL-style data dump of the device ops: torch.npu.init_dump() / set_dump(acl.json) /
finalize_dump(), and ACL_DUMP_DATA=1 with ./acl.json. Every named device op launched meanwhile
writes a file {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp} holding its input and/or
output tensors; `python -m torch_npu.tools.dump_parse` turns them into numpy files.

acl.json:
    {"dump": {"dump_list": [],             # [] every op; [{"layer": ["Add", "aclnnMul"]}] those only
              "dump_path": "./dump",       # files go to {dump_path}/{time}/{device}/0/0/
              "dump_mode": "all",          # output (default), input or all
              "dump_op_switch": "on"}}     # on: single-op dump; off: only the ops dump_list names
"""

import atexit
import json
import os
import warnings
from typing import List, Optional

_MODES = {"output": 0, "input": 1, "all": 2}
_state = {"initialized": False, "running": False}


def _config_error(path: str, message: str) -> ValueError:
    return ValueError(f"dump config {path}: {message}")


def read_config(path: str) -> dict:
    """The dump settings of an acl.json file, checked: dump_path, mode, ops."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"dump config {path} does not exist; write an acl.json with a \"dump\" section "
                                "(dump_path, dump_mode, dump_op_switch, dump_list)")
    with open(path) as f:
        text = f.read()
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise _config_error(path, f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno} (commas between "
                                  "fields, no # comments)") from None
    dump = config.get("dump") if isinstance(config, dict) else None
    if not isinstance(dump, dict):
        raise _config_error(path, "has no \"dump\" object")
    dump_path = dump.get("dump_path")
    if not isinstance(dump_path, str) or not dump_path:
        raise _config_error(path, "dump.dump_path must name the output directory")
    mode = dump.get("dump_mode", "output")
    if mode not in _MODES:
        raise _config_error(path, f"dump.dump_mode must be one of output, input, all; got {mode!r}")
    switch = dump.get("dump_op_switch", "off")
    if switch not in ("on", "off"):
        raise _config_error(path, f"dump.dump_op_switch must be on or off; got {switch!r}")
    ops: List[str] = []
    for entry in dump.get("dump_list", []) or []:
        if not isinstance(entry, dict):
            raise _config_error(path, "dump.dump_list entries must be objects such as {\"layer\": [\"Add\"]}")
        layers = entry.get("layer", [])
        if not isinstance(layers, list) or not all(isinstance(x, str) for x in layers):
            raise _config_error(path, "dump.dump_list[].layer must be a list of op names")
        ops.extend(layers)
    if switch == "off" and not ops:
        warnings.warn(f"dump config {path}: dump_op_switch is off and dump_list names no op: nothing is dumped")
    if not os.path.isabs(dump_path):
        dump_path = os.path.join(os.path.dirname(os.path.abspath(path)), dump_path)
    return {"dump_path": dump_path, "mode": mode, "ops": ops, "enabled": switch == "on" or bool(ops)}


def init_dump() -> None:
    """Starts a dump configuration (set_dump then gives the settings)."""
    _state["initialized"] = True


def set_dump(cfg_file: str) -> None:
    """Starts dumping the device ops as the acl.json file `cfg_file` says."""
    if not _state["initialized"]:
        raise RuntimeError("set_dump: call torch.npu.init_dump() first")
    from torch_npu import _C

    config = read_config(cfg_file)
    if _state["running"]:
        _C._dump_stop()
        _state["running"] = False
    if not config["enabled"]:
        return
    _C._dump_start(config["dump_path"], _MODES[config["mode"]], config["ops"])
    _state["running"] = True


def finalize_dump() -> None:
    """Waits for the ops launched so far, stops dumping and reports a file that could not be written."""
    from torch_npu import _C
    from torch_npu.npu.device import device_count, synchronize

    _state["initialized"] = False
    if not _state["running"]:
        return
    try:
        for device in range(device_count()):
            synchronize(device)
    finally:
        _state["running"] = False
        _C._dump_stop()


def dump_directory() -> Optional[str]:
    """Where the current (or last) dump writes its files, or None."""
    from torch_npu import _C

    return _C._dump_directory() or None


def _from_env() -> None:
    """ACL_DUMP_DATA=1: dump from the start as ./acl.json says, until the process exits."""
    if os.environ.get("ACL_DUMP_DATA") != "1":
        return
    path = os.path.join(os.getcwd(), "acl.json")
    try:
        init_dump()
        set_dump(path)
    except (OSError, ValueError, RuntimeError) as e:
        warnings.warn(f"ACL_DUMP_DATA=1 but the dump did not start: {e}")
        return
    atexit.register(finalize_dump)
