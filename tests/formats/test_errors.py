"""Bad input gets clear Python errors naming the format, the dtype or shape, and what is allowed."""

import numpy as np
import pytest
import torch

import torch_npu
from torch_npu.testing.common_utils import create_common_tensor


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.bool, torch.complex64])
def test_a_dtype_a_private_format_cannot_hold(dtype):
    x = torch.zeros(4, 16, dtype=dtype).npu()
    with pytest.raises(ValueError, match=r"FRACTAL_NZ cannot hold .* tensors; private formats hold float32"):
        torch_npu.npu_format_cast(x, 29)
    assert torch_npu.get_npu_format(torch_npu.npu_format_cast(x, 2)) == 2  # base formats take any dtype


@pytest.mark.parametrize("fmt,shape,message", [
    (3, (1, 2, 3, 4, 5), r"NC1HWC0 holds tensors of at most 4 dims \(N, C, H, W\), got a tensor of shape \[1, 2, 3, 4, 5\]"),
    (4, (1, 2, 3, 4, 5), "FRACTAL_Z holds tensors of at most 4 dims"),
    (32, (2, 3, 4, 5), r"NDC1HWC0 holds 5-dim tensors \(N, C, D, H, W\)"),
    (33, (2, 3), "FRACTAL_Z_3D holds 5-dim tensors"),
])
def test_a_rank_a_format_cannot_hold(fmt, shape, message):
    with pytest.raises(ValueError, match=message):
        torch_npu.npu_format_cast(torch.zeros(shape).npu(), fmt)


@pytest.mark.parametrize("fmt", [5, 12, 99, -1])
def test_unknown_format_numbers(fmt):
    with pytest.raises(ValueError, match=r"acl_format .*use one of 0 \(NCHW\).*33 \(FRACTAL_Z_3D\)"):
        torch_npu.npu_format_cast(torch.zeros(2, 2).npu(), fmt)
    with pytest.raises(ValueError, match="acl_format"):
        torch_npu.npu_format_cast_(torch.zeros(2, 2).npu(), fmt)
    if fmt != -1:  # create_common_tensor's -1 means "leave the tensor as created"
        with pytest.raises(ValueError, match="acl_format"):
            create_common_tensor([np.float32, fmt, (2, 2)], 0, 1)


def test_wrong_argument_types_and_devices():
    with pytest.raises(TypeError, match="format code"):
        torch_npu.npu_format_cast(torch.zeros(2, 2).npu(), "ND")
    with pytest.raises(ValueError, match="expected an npu tensor"):
        torch_npu.npu_format_cast_(torch.zeros(2, 2), 29)
    with pytest.raises(RuntimeError, match="expected an npu tensor"):
        torch_npu.get_npu_format(torch.zeros(2))
    with pytest.raises(ValueError, match="customize_dtype .* cannot lay out FRACTAL_NZ blocks"):
        torch_npu.npu_format_cast(torch.zeros(16, 16).npu(), 29, customize_dtype=torch.float64)
    with pytest.raises(ValueError, match="input_dtype"):
        torch_npu.npu_format_cast(torch.zeros(16, 16).npu(), 29, input_dtype=torch.int8)
    with pytest.raises(TypeError, match="allow_internal_format must be a bool"):
        torch.npu.config.allow_internal_format = 1
    with pytest.raises(AttributeError):
        torch.npu.config.no_such_switch = True


def test_allow_internal_format_default_and_switch():
    assert torch.npu.config.allow_internal_format is False  # torch_npu's default
    torch.npu.config.allow_internal_format = True
    try:
        assert torch.npu.config.allow_internal_format is True
    finally:
        torch.npu.config.allow_internal_format = False
