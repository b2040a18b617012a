"""What the process reads at its first device use: ACL_OP_INIT_MODE and TORCH_ACL_INIT_CONFIG_PATH
(an acl.json checked as torch_npu checks it, whose dump section starts the data dump)."""

import json
import os

import pytest

_FIRST_USE = """
import torch, torch_npu
torch_npu.npu.set_device(0)
print(float((torch.ones(3, device="npu") * 2).sum().cpu()))
"""


def _write(tmp_path, text):
    path = tmp_path / "acl_user.json"
    path.write_text(text)
    return str(path)


def test_bad_op_init_mode_warns_and_runs(run_python):
    proc = run_python(_FIRST_USE, env={"ACL_OP_INIT_MODE": "999"})
    assert "Get env ACL_OP_INIT_MODE not in [0, 1, 2]" in proc.stderr
    assert proc.stdout.strip() == "6.0"
    quiet = run_python(_FIRST_USE, env={"ACL_OP_INIT_MODE": "2"})
    assert "ACL_OP_INIT_MODE" not in quiet.stderr


@pytest.mark.parametrize("text, message", [
    ("not a json{{{", "Failed to parse user acl json"),
    ("", "Failed to parse user acl json"),
    ('{"dump": {"dump_scene": "lite_exception"}}', "lacks 'defaultDevice'"),
    ('{"defaultDevice": "not_an_object"}', "lacks 'defaultDevice'"),
    ('{"defaultDevice": {"default_device": "1"}}', "requires 'defaultDevice.default_device' to be \"0\""),
])
def test_bad_user_acl_json_fails_the_first_device_use(run_python, tmp_path, text, message):
    proc = run_python(_FIRST_USE, env={"TORCH_ACL_INIT_CONFIG_PATH": _write(tmp_path, text)}, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr[-2000:]


def test_missing_user_acl_json_names_the_variable(run_python, tmp_path):
    proc = run_python(_FIRST_USE, env={"TORCH_ACL_INIT_CONFIG_PATH": str(tmp_path / "absent.json")}, check=False)
    assert proc.returncode != 0
    assert "TORCH_ACL_INIT_CONFIG_PATH" in proc.stderr and "is invalid" in proc.stderr


def test_tensor_creation_is_a_first_use_too(run_python, tmp_path):
    code = "import torch, torch_npu\ntorch.zeros(2, device='npu')\n"
    proc = run_python(code, env={"TORCH_ACL_INIT_CONFIG_PATH": _write(tmp_path, "[1,")}, check=False)
    assert proc.returncode != 0 and "Failed to parse user acl json" in proc.stderr


def test_valid_user_acl_json_with_dump_section_dumps_the_ops(run_python, tmp_path):
    config = {"defaultDevice": {"default_device": "0"},
              "dump": {"dump_path": str(tmp_path / "dump"), "dump_mode": "output", "dump_op_switch": "on"}}
    proc = run_python(_FIRST_USE + "torch.npu.synchronize()\n",
                      env={"TORCH_ACL_INIT_CONFIG_PATH": _write(tmp_path, json.dumps(config))})
    assert proc.stdout.strip() == "6.0"
    files = [f for _, _, names in os.walk(tmp_path / "dump") for f in names]
    assert files, "the dump section must start the data dump"
