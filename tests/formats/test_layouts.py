"""The private formats are really laid out as documented: the device storage of a cast tensor is
bit-exactly the NumPy reference of its format, padding included, and its size is the padded one."""

import warnings

import numpy as np
import pytest
import torch

import torch_npu

from .reference import (FRACTAL_NZ, FRACTAL_Z, FRACTAL_Z_3D, NC1HWC0, NDC1HWC0, PRIVATE_DTYPES, bits,
                        default_c0, random_tensor, raw_storage, to_private)

CASES = [
    (NC1HWC0, (2, 17, 3, 5)), (NC1HWC0, (5, 256)), (NC1HWC0, (18,)), (NC1HWC0, (3, 4, 5)),
    (FRACTAL_Z, (33, 17, 3, 2)), (FRACTAL_Z, (7, 5)), (NDC1HWC0, (2, 17, 2, 3, 4)),
    (FRACTAL_Z_3D, (17, 18, 2, 2, 3)), (FRACTAL_NZ, (15, 33)), (FRACTAL_NZ, (2, 3, 17, 40)),
]


@pytest.mark.parametrize("fmt,shape", CASES)
@pytest.mark.parametrize("dtype", PRIVATE_DTYPES)
def test_storage_is_the_reference_layout(fmt, shape, dtype):
    x = random_tensor(shape, dtype, seed=len(shape))
    y = torch_npu.npu_format_cast(x.npu(), fmt)
    assert torch_npu.get_npu_format(y) == fmt
    expected = to_private(bits(x), fmt, default_c0(fmt, dtype))
    desc = torch_npu._C._npu_storage_desc(y)
    assert tuple(desc["storage_sizes"]) == expected.shape
    assert desc["base_sizes"] == list(shape)
    assert y.untyped_storage().nbytes() == expected.size * x.element_size()
    assert torch_npu.get_storage_size(y) == expected.size
    np.testing.assert_array_equal(raw_storage(y, expected.shape), expected)
    assert y.shape == x.shape and y.dtype == dtype
    assert torch.equal(y.cpu(), x)


def test_documented_storage_shapes():
    def shape_of(fmt, shape, dtype=torch.float16, **kw):
        t = torch_npu.npu_format_cast(torch.zeros(shape, dtype=dtype).npu(), fmt, **kw)
        return tuple(torch_npu._C._npu_storage_desc(t)["storage_sizes"])

    assert shape_of(NC1HWC0, (2, 17, 3, 5)) == (2, 2, 3, 5, 16)
    assert shape_of(NC1HWC0, (5, 256)) == (1, 1, 256, 1, 16)  # seed 000's [5, 256] as NCHW [1, 5, 256, 1]
    assert shape_of(FRACTAL_Z, (33, 17, 3, 3)) == (18, 3, 16, 16)
    assert shape_of(NDC1HWC0, (2, 17, 4, 3, 5)) == (2, 4, 2, 3, 5, 16)
    assert shape_of(FRACTAL_Z_3D, (33, 17, 4, 3, 3)) == (72, 3, 16, 16)
    assert shape_of(FRACTAL_NZ, (3, 15, 33)) == (3, 3, 1, 16, 16)
    assert shape_of(FRACTAL_NZ, (3, 15, 33), torch.float32) == (3, 3, 1, 16, 16)
    assert shape_of(FRACTAL_NZ, (3, 15, 33), torch.int8) == (3, 2, 1, 16, 32)
    # customize_dtype sets FRACTAL_NZ's block width as for that dtype (ScalarType code or dtype).
    assert shape_of(FRACTAL_NZ, (15, 17), torch.int32, customize_dtype=3) == (3, 1, 16, 8)
    assert shape_of(FRACTAL_NZ, (15, 17), torch.float16, customize_dtype=torch.int8) == (1, 1, 16, 32)


def test_customized_block_width_is_laid_out_and_read_back():
    x = random_tensor((15, 17), torch.int32)
    y = torch_npu.npu_format_cast(x.npu(), FRACTAL_NZ, customize_dtype=torch.int32)
    expected = to_private(bits(x), FRACTAL_NZ, 8)
    np.testing.assert_array_equal(raw_storage(y, expected.shape), expected)
    assert torch.equal(y.cpu(), x)
    assert torch.equal((y + 1).cpu(), x + 1)


def test_fresh_tensors_report_torch_npu_base_formats():
    assert torch_npu.get_npu_format(torch.empty(2, 3, 4, 5, device="npu")) == 0  # NCHW
    assert torch_npu.get_npu_format(torch.empty(2, 3, 4, 5, 6, device="npu")) == 30  # NCDHW
    assert torch_npu.get_npu_format(torch.empty(2, 3, device="npu")) == 2  # ND
    fmt = torch_npu.get_npu_format(torch.empty(4, device="npu"))
    assert fmt == torch_npu.Format.ND and str(fmt) == "ND"
    assert torch_npu.get_storage_size(torch.empty(3, 4, device="npu")) == 12


def test_base_format_casts_relabel_without_moving_data():
    x = torch.randn(2, 3, 4, 5)
    nd = torch_npu.npu_format_cast(x.npu(), 2)
    assert torch_npu.get_npu_format(nd) == 2 and torch.equal(nd.cpu(), x)
    assert nd.untyped_storage().nbytes() == x.numel() * 4
    nchw = torch_npu.npu_format_cast(torch.randn(5, 6).npu(), 0)
    assert torch_npu.get_npu_format(nchw) == 0


def test_zero_dim_and_short_tensors_fall_back_as_torch_npu_does(capfd):
    assert torch_npu.get_npu_format(torch_npu.npu_format_cast(torch.tensor(3.0).npu(), 3)) == 2
    old = torch.is_warn_always_enabled()
    torch.set_warn_always(True)  # the warning is once per process otherwise
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            one_d = torch_npu.npu_format_cast(torch.arange(12.0).npu(), 29)
    finally:
        torch.set_warn_always(old)
    # Raised inside the op: a Python warning or, outside a warning handler, the C++ log line.
    told = [str(w.message) for w in caught] + [capfd.readouterr().err]
    assert any("NZ format while dim < 2" in text for text in told)
    assert torch_npu.get_npu_format(one_d) == 2 and torch.equal(one_d.cpu(), torch.arange(12.0))
