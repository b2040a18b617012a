"""The chip the software NPU poses as (NPU_SIM_SOC_VERSION / NPU_SIM_CANN_VERSION) and torch.npu's
option functions (set_option, set_compile_mode, use_compatible_impl, matmul / conv / config flags)."""

import os
import subprocess
import sys

import pytest
import torch
import torch_npu
from torch_npu.npu import utils


def _run(code, **env):
    proc = subprocess.run([sys.executable, "-c", "import torch, torch_npu\n" + code], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **env})
    return proc


def test_default_soc_and_versions():
    assert torch.npu.get_device_name() == torch_npu.npu.get_device_name(1) == "Ascend910B1"
    assert torch_npu.npu.get_soc_version() == utils.get_soc_version() == 220
    assert utils.get_cann_version() == utils.get_cann_version("RUNTIME") == "8.5.0"
    assert utils.is_support_inf_nan() and torch.npu.is_bf16_supported()
    props = torch.npu.get_device_properties(0)
    assert props.name == "Ascend910B1" and props.cube_core_num == 24 and props.vector_core_num == 48
    assert props.total_memory > 0 and "Ascend910B1" in repr(props)
    with pytest.raises(RuntimeError, match="npu:99"):
        torch.npu.get_device_name(99)
    with pytest.raises(ValueError, match="unknown CANN module"):
        utils.get_cann_version("NOPE")


@pytest.mark.parametrize("version,expected", [
    ("8.0.RC1", True), ("8.5.0", True), ("8.5.RC2", True), ("8.5.1", False), ("9.0.0", False),
    ("8.5.0.alpha001", True), ("7.0.T3", True),
])
def test_cann_version_comparison(version, expected):
    assert utils._is_gte_cann_version(version) is expected


def test_bad_version_argument_is_a_clear_error():
    with pytest.raises(ValueError, match="not a CANN version"):
        utils._is_gte_cann_version("latest")


def test_other_chips_report_their_numbers_and_capabilities():
    out = _run("from torch_npu.npu import utils\n"
               "print(torch.npu.get_device_name(), utils.get_soc_version(), torch.npu.is_bf16_supported(),"
               " utils.is_support_inf_nan(), utils.get_cann_version(), utils._is_gte_cann_version('9.0.0'))",
               NPU_SIM_SOC_VERSION="Ascend910A", NPU_SIM_CANN_VERSION="9.0.0")
    assert out.stdout.split() == ["Ascend910A", "102", "False", "False", "9.0.0", "True"], out.stderr
    out = _run("print(torch_npu.npu.get_soc_version())", NPU_SIM_SOC_VERSION="Ascend910_9391")
    assert out.stdout.split() == ["250"]


def test_unknown_soc_or_cann_version_names_the_accepted_values():
    out = _run("x = torch.ones(2).npu() + 1\nprint(x.sum().item())\ntorch.npu.get_device_name()",
               NPU_SIM_SOC_VERSION="Ascend999")
    assert out.stdout.split() == ["4.0"]  # the device still computes
    assert 'NPU_SIM_SOC_VERSION="Ascend999" is not a SoC' in out.stderr and "Ascend910B1" in out.stderr
    out = _run("from torch_npu.npu import utils\nutils.get_cann_version()", NPU_SIM_CANN_VERSION="eight")
    assert 'NPU_SIM_CANN_VERSION="eight" is not a CANN version' in out.stderr


def test_set_option_stores_and_checks_values():
    torch.npu.set_option({"ACL_PRECISION_MODE": "must_keep_origin_dtype", "ACL_AICORE_NUM": 8})
    assert torch_npu._C._get_option("ACL_PRECISION_MODE") == "must_keep_origin_dtype"
    assert torch_npu._C._get_option("ACL_AICORE_NUM") == "8"
    with pytest.raises(ValueError, match="ACL_PRECISION_MODE should be in"):
        torch.npu.set_option({"ACL_PRECISION_MODE": "fastest"})
    with pytest.raises(ValueError, match="ACL_AICORE_NUM"):
        torch.npu.set_option({"ACL_AICORE_NUM": 99})
    with pytest.raises(TypeError, match="must be a dict"):
        torch.npu.set_option("ACL_PRECISION_MODE")


def test_npu_get_option_returns_bytes_and_follows_allow_internal_format():
    torch.npu.set_option({"ACL_OP_COMPILER_CACHE_MODE": "enable"})
    assert torch_npu._C._npu_getOption("ACL_OP_COMPILER_CACHE_MODE") == b"enable"
    assert torch_npu._C._npu_getOption("NO_SUCH_OPTION_SET") is None
    before = torch.npu.config.allow_internal_format
    try:
        torch.npu.config.allow_internal_format = True
        assert torch_npu._C._npu_getOption("ALLOW_INTERNAL_FORMAT") == b"enable"
        torch.npu.set_option({"ALLOW_INTERNAL_FORMAT": "disable"})
        assert torch_npu._C._npu_getOption("ALLOW_INTERNAL_FORMAT") == b"disable"
        assert torch.npu.config.allow_internal_format is False
        saved = torch_npu._C._npu_getOption("ALLOW_INTERNAL_FORMAT")
        torch.npu.config.allow_internal_format = b"enable"
        assert torch.npu.config.allow_internal_format is True
        torch.npu.config.allow_internal_format = saved  # the bytes _npu_getOption gave back
        assert torch.npu.config.allow_internal_format is False
        with pytest.raises(TypeError, match="must be a bool"):
            torch.npu.config.allow_internal_format = b"on"
        with pytest.raises(ValueError, match="ALLOW_INTERNAL_FORMAT should be in"):
            torch.npu.set_option({"ALLOW_INTERNAL_FORMAT": "on"})
        with pytest.raises(TypeError, match="must be a str"):
            torch_npu._C._npu_getOption(3)
    finally:
        torch.npu.config.allow_internal_format = before


def test_compile_mode_and_compatible_impl_round_trip():
    torch.npu.set_compile_mode(jit_compile=False)
    assert torch_npu.npu.is_jit_compile_false()
    torch_npu.npu.set_compile_mode(jit_compile=True)
    assert not torch.npu.is_jit_compile_false()
    torch_npu.npu.use_compatible_impl(True)
    assert torch_npu.npu.are_compatible_impl_enabled()
    torch_npu.npu.use_compatible_impl(False)
    assert not torch_npu.npu.are_compatible_impl_enabled()
    x = torch.randn(4, 8)  # results do not depend on either switch
    torch.testing.assert_close(torch.nn.functional.layer_norm(x.npu(), (8,)).cpu(),
                               torch.nn.functional.layer_norm(x, (8,)))


def test_hf32_and_internal_format_flags():
    assert torch.npu.matmul.allow_hf32 is False and torch.npu.conv.allow_hf32 is True
    torch.npu.matmul.allow_hf32 = True
    assert torch.npu.matmul.allow_hf32 is True
    torch.npu.matmul.allow_hf32 = False
    with pytest.raises(TypeError, match="must be a bool"):
        torch.npu.conv.allow_hf32 = 1
    with pytest.raises(AttributeError, match="no option"):
        torch.npu.matmul.allow_tf32 = True
    torch.npu.matmul.cube_math_type = torch.npu.CubeMathType.USE_HF32
    assert torch.npu.matmul.cube_math_type == torch.npu.CubeMathType.USE_HF32
    torch.npu.config.allow_internal_format = False
    assert torch.npu.config.allow_internal_format is False


def test_device_capability_only_when_configured(monkeypatch):
    monkeypatch.delenv("TORCH_NPU_DEVICE_CAPABILITY", raising=False)
    assert torch.npu.get_device_capability() is None
    monkeypatch.setenv("TORCH_NPU_DEVICE_CAPABILITY", "8.0")
    assert torch.npu.get_device_capability(0) == (8, 0)
