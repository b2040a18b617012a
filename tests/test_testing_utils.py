"""torch_npu.testing: TestCase.assertRtolEqual and create_common_tensor."""

import math

import numpy as np
import pytest
import torch
import torch_npu

from torch_npu.testing.common_utils import create_common_tensor
from torch_npu.testing.testcase import TestCase, run_tests


class TestAssertRtolEqual(TestCase):
    def test_equal_npu_and_cpu_tensors(self):
        a = torch.randn(4, 5)
        self.assertRtolEqual(a, a.npu())
        self.assertRtolEqual(a.npu(), a)
        self.assertRtolEqual(a.npu(), a.npu().clone())

    def test_npu_result_vs_cpu_result(self):
        a = torch.randn(6, 6)
        self.assertRtolEqual((a.npu() * 3 + 1).exp(), (a * 3 + 1).exp())

    def test_numpy_arrays_and_mixed(self):
        a = np.random.rand(3, 3).astype(np.float32)
        self.assertRtolEqual(a, a.copy())
        self.assertRtolEqual(torch.from_numpy(a).npu(), a)

    def test_within_relative_tolerance(self):
        a = torch.full((3,), 1000.0)
        self.assertRtolEqual(a.npu(), a + 0.05)  # 0.05 <= 1e-4 * 1000
        self.assertRtolEqual(torch.tensor([0.5]), torch.tensor([0.5 + 0.9e-4]))  # absolute floor of 1

    def test_beyond_relative_tolerance_fails(self):
        a = torch.full((3,), 1000.0)
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(a.npu(), a + 0.2)
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(torch.tensor([1.0]), torch.tensor([1.0 + 3e-4]))

    def test_custom_prec(self):
        a = torch.tensor([1.0, 2.0])
        b = a + 0.005
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(a, b)
        self.assertRtolEqual(a, b, prec=0.01)

    def test_single_element_difference_is_reported(self):
        a = torch.zeros(100)
        b = a.clone()
        b[37] = 0.5
        with self.assertRaises(AssertionError) as ctx:
            self.assertRtolEqual(a.npu(), b)
        assert "of 100 elements, 1 differ" in str(ctx.exception) and "index (37,)" in str(ctx.exception)

    def test_message_is_included(self):
        with self.assertRaises(AssertionError) as ctx:
            self.assertRtolEqual(torch.zeros(2), torch.ones(2), message="my-op")
        assert "my-op" in str(ctx.exception)

    def test_shape_mismatch_fails(self):
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(torch.zeros(2, 3), torch.zeros(3, 2))
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(torch.zeros(6).npu(), torch.zeros(2, 3))

    def test_half_dtypes_use_prec16(self):
        a = torch.tensor([1.0, 2.0, 3.0])
        b = a + 5e-4  # beyond prec=1e-4, within prec16=1e-3
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(a, b)
        self.assertRtolEqual(a.half().npu(), b.half())
        self.assertRtolEqual(a.bfloat16().npu(), a.bfloat16())
        self.assertRtolEqual(np.float16(1.0) * np.ones(3, np.float16), np.ones(3, np.float16) + np.float16(5e-4))
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(a.half(), (a + 0.05).half())

    def test_integers_and_bools(self):
        a = torch.arange(10)
        self.assertRtolEqual(a.npu(), a)
        b = a.clone()
        b[3] += 1
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(a.npu(), b)
        m = torch.tensor([True, False, True])
        self.assertRtolEqual(m.npu(), m)
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(m.npu(), ~m)
        big = torch.tensor([10**6])
        self.assertRtolEqual(big, big + 1)  # integers get the same relative slack as in torch_npu
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(big, big + 1000)

    def test_nan_positions(self):
        a = torch.tensor([1.0, math.nan, 3.0])
        self.assertRtolEqual(a.npu(), a)
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(a, torch.tensor([1.0, 2.0, 3.0]))
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(torch.tensor([1.0, 2.0, 3.0]), a)
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(a, torch.tensor([math.nan, 2.0, 3.0]))

    def test_infinities(self):
        a = torch.tensor([math.inf, -math.inf, 0.0])
        self.assertRtolEqual(a.npu(), a)
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(a, torch.tensor([-math.inf, -math.inf, 0.0]))
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(a, torch.tensor([1e30, -math.inf, 0.0]))
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(torch.tensor([1e30, -math.inf, 0.0]), a)

    def test_noncontiguous_and_zero_dim_and_empty(self):
        a = torch.randn(4, 5)
        self.assertRtolEqual(a.npu().t(), a.t())
        self.assertRtolEqual(torch.tensor(2.5).npu(), torch.tensor(2.5))
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(torch.tensor(2.5).npu(), torch.tensor(2.6))
        self.assertRtolEqual(torch.empty(0, 3).npu(), torch.empty(0, 3))

    def test_tensors_requiring_grad(self):
        w = torch.randn(3, requires_grad=True)
        self.assertRtolEqual(w.npu() * 2, w * 2)

    def test_assert_tensors_slow_equal(self):
        a = torch.randn(3)
        self.assertTensorsSlowEqual(a.npu(), a)
        with self.assertRaises(AssertionError):
            self.assertTensorsSlowEqual(a.npu(), a + 1)


def test_assert_rtol_equal_compares_imaginary_parts():
    tc = TestCase()
    a = torch.tensor([1 + 1j, 2 + 2j])
    tc.assertRtolEqual(a.npu(), a)
    with pytest.raises(AssertionError):
        tc.assertRtolEqual(a.npu(), torch.tensor([1 - 5j, 2 + 9j]))


def test_testcase_is_a_unittest_testcase_and_run_tests_exists():
    import unittest

    assert issubclass(TestCase, unittest.TestCase)
    assert callable(run_tests)


# ---------------------------------------------------------------------------------------------
# create_common_tensor
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("np_dtype,torch_dtype", [
    (np.float32, torch.float32), (np.float16, torch.float16), (np.float64, torch.float64),
    (np.int32, torch.int32), (np.int64, torch.int64), (np.int8, torch.int8), (np.uint8, torch.uint8),
    (np.bool_, torch.bool),
])
@pytest.mark.parametrize("npu_format", [-1, 0, 2])
def test_create_common_tensor_pairs(np_dtype, torch_dtype, npu_format):
    cpu, npu = create_common_tensor([np_dtype, npu_format, (3, 4, 5)], 1, 10)
    assert cpu.device.type == "cpu" and npu.device.type == "npu"
    assert cpu.dtype == npu.dtype == torch_dtype
    assert cpu.shape == npu.shape == (3, 4, 5)
    assert torch.equal(npu.cpu(), cpu)
    if torch_dtype != torch.bool:
        assert cpu.min() >= 1 and cpu.max() < 10


def test_create_common_tensor_value_range_float():
    cpu, npu = create_common_tensor([np.float32, 2, (1000,)], -3.5, -1.0)
    assert cpu.min() >= -3.5 and cpu.max() <= -1.0
    assert torch.equal(npu.cpu(), cpu)


def test_create_common_tensor_int_shape_and_nhwc_format():
    cpu, npu = create_common_tensor([np.float32, 1, 7], 0, 1)
    assert cpu.shape == (7,)
    assert torch.equal(npu.cpu(), cpu)


def test_create_common_tensor_npu_input_is_independent_of_cpu_input():
    cpu, npu = create_common_tensor([np.float32, 0, (4,)], 0, 1)
    before = cpu.clone()
    npu.fill_(5)
    assert torch.equal(cpu, before)


def test_create_common_tensor_on_other_device():
    cpu, npu = create_common_tensor([np.float32, 2, (2, 2)], 0, 1, device="npu:2")
    assert npu.device == torch.device("npu", 2)
    assert torch.equal(npu.cpu(), cpu)


def test_create_common_tensor_feeds_operator_comparison():
    cpu, npu = create_common_tensor([np.float32, 0, (2, 3, 4, 4)], -1, 1)
    TestCase().assertRtolEqual(torch.nn.functional.relu(npu), torch.nn.functional.relu(cpu))


@pytest.mark.parametrize("fmt", [3, 29, 4])
def test_create_common_tensor_casts_to_private_formats(fmt):
    cpu, npu = create_common_tensor([np.float16, fmt, (2, 16, 4, 4)], 0, 1)
    assert torch_npu.get_npu_format(npu) == fmt
    assert torch.equal(npu.cpu(), cpu)


@pytest.mark.parametrize("fmt", [5, 99, "ND"])
def test_create_common_tensor_rejects_unknown_formats(fmt):
    with pytest.raises(ValueError):
        create_common_tensor([np.float32, fmt, (2, 2)], 0, 1)


@pytest.mark.parametrize("item", [[np.float32, 0], "float32", None])
def test_create_common_tensor_rejects_malformed_item(item):
    with pytest.raises(ValueError):
        create_common_tensor(item, 0, 1)


def test_create_common_tensor_ignores_parameters_after_the_shape():
    # torch_npu's tests keep per-case parameters in the same list: [dtype, format, shape, dim, keepdim]
    cpu, npu = create_common_tensor([np.float16, 0, (3, 4), 1, True], 0, 1)
    assert cpu.shape == npu.shape == (3, 4) and torch.equal(npu.cpu(), cpu)
