"""What Ascend's runtime reads when a process first uses the device: ACL_OP_INIT_MODE and the user's
acl.json (TORCH_ACL_INIT_CONFIG_PATH), checked with torch_npu's messages; a "dump" section there
starts the data dump as set_dump() would."""

import json
import os
import warnings

_OP_INIT_MODES = ("0", "1", "2")


def _check_op_init_mode() -> None:
    value = os.environ.get("ACL_OP_INIT_MODE")
    if value is not None and value.strip() not in _OP_INIT_MODES:
        warnings.warn("Get env ACL_OP_INIT_MODE not in [0, 1, 2], so reset it to the default value 0. "
                      f"(got {value!r}; 0 and 1 choose how operator kernels load on hardware, 2 is aclnn only)")


def _lazy_set_device() -> bool:
    # From CANN 8.3.RC1 on a device is bound at its first use, and the acl.json must say which.
    from torch_npu.npu.utils import _is_gte_cann_version

    return _is_gte_cann_version("8.3.RC1")


def _read_user_config(path: str) -> dict:
    real = os.path.realpath(path)
    if not os.path.isfile(real):
        raise RuntimeError(f"TORCH_ACL_INIT_CONFIG_PATH {path} is invalid. Please set the environment variable "
                           "'TORCH_ACL_INIT_CONFIG_PATH' to a valid JSON config file path.")
    try:
        with open(real) as f:
            text = f.read()
    except OSError as e:
        raise RuntimeError(f"Failed to open user acl json {real}. Please ensure the file exists and has read "
                           f"permission. ({e})") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise RuntimeError(f"Failed to parse user acl json {real}. Please check that the file contains valid "
                           f"JSON syntax. Error: {e}") from None
    if not isinstance(config, dict):
        raise RuntimeError(f"Failed to parse user acl json {real}: the top level must be a JSON object.")
    if _lazy_set_device():
        device = config.get("defaultDevice")
        if not isinstance(device, dict):
            raise RuntimeError(f"User acl json {real} lacks 'defaultDevice' object, required for lazy set_device "
                               "mode. Please add: \"defaultDevice\": {\"default_device\": \"0\"}")
        if device.get("default_device") != "0":
            raise RuntimeError(f"User acl json {real} requires 'defaultDevice.default_device' to be \"0\" in lazy "
                               "set_device mode. Please set: \"defaultDevice\": {\"default_device\": \"0\"}")
    elif "defaultDevice" in config:
        raise RuntimeError(f"User acl json {real} contains 'defaultDevice' which is not expected in non-lazy "
                           "set_device mode. Please remove the 'defaultDevice' field from your JSON config.")
    return config


def apply() -> None:
    """Runs once, before the process's first device use. Raises RuntimeError for a bad acl.json."""
    _check_op_init_mode()
    path = os.environ.get("TORCH_ACL_INIT_CONFIG_PATH")
    if not path:
        return
    config = _read_user_config(path)
    dump = config.get("dump")
    if isinstance(dump, dict) and dump.get("dump_path"):
        from torch_npu.npu import dump as _dump

        _dump.init_dump()
        _dump.set_dump(os.path.realpath(path))
