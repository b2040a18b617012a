"""torch_npu.testing as torch_npu's op tests use it: assertRtolEqual's element-count tolerance,
assertEqual with a precision, the decorators, skip helpers and input generators."""

import subprocess
import sys
import textwrap
import unittest

import numpy as np
import pytest
import torch

from torch_npu.testing.common_distributed import skipIfUnsupportMultiNPU
from torch_npu.testing.common_utils import (
    SkipIfNotGteCANNVersion,
    SupportedDevices,
    check_operators_in_prof,
    create_dtype_tensor,
    get_npu_device,
    test_2args_broadcast,
)
from torch_npu.testing.decorator import Dtypes, Formats, instantiate_tests
from torch_npu.testing.testcase import TestCase

tc = TestCase()


def test_rtol_allows_numel_times_prec_outliers():
    a = torch.zeros(20000)
    b = a.clone()
    b[:2] = 1.0  # 2 <= 20000 * 1e-4 elements off: torch_npu's rule lets them pass
    tc.assertRtolEqual(a, b)
    b[:3] = 1.0
    with pytest.raises(AssertionError, match="of 20000 elements, 3 differ by more than 0.0001"):
        tc.assertRtolEqual(a, b)


def test_rtol_passes_when_all_elements_are_within_one_of_the_two_tolerances():
    small = torch.tensor([1e-6, 2e-6])  # relative error huge, absolute tiny
    tc.assertRtolEqual(small, small * 3)
    large = torch.tensor([1e4, 2e4])  # absolute error 0.5, relative 5e-5
    tc.assertRtolEqual(large, large + 0.5)


def test_rtol_requires_equal_dtypes_unless_asked_to_convert():
    a = torch.ones(3)
    with pytest.raises(AssertionError, match="dtype error"):
        tc.assertRtolEqual(a, a.double())
    tc.assertRtolEqual(a.double(), a, auto_trans_dtype=True)
    with pytest.raises(AssertionError, match="dtype error"):
        tc.assertRtolEqual(np.ones(2, np.float32), np.ones(2, np.float64))


def test_rtol_sequences_numbers_and_bfloat16():
    tc.assertRtolEqual([torch.ones(2), torch.zeros(3)], (torch.ones(2).npu(), torch.zeros(3)))
    with pytest.raises(AssertionError):
        tc.assertRtolEqual([torch.ones(2)], [torch.zeros(2)])
    tc.assertRtolEqual(1.0, 1.00001)
    x = torch.randn(50).bfloat16()
    tc.assertRtolEqual(x.npu(), x)
    with pytest.raises(AssertionError, match="bfloat16"):
        tc.assertRtolEqual(x, x + 1)


def test_assert_equal_with_precision_across_devices():
    a = torch.randn(4, 4)
    tc.assertEqual(a.npu(), a)
    tc.assertEqual(a.npu(), a + 1e-6)  # default precision 1e-5
    with pytest.raises(AssertionError):
        tc.assertEqual(a.npu(), a + 1e-3)
    tc.assertEqual(a.npu(), a + 1e-3, prec=1e-2)
    tc.assertEqual(a.npu(), a + 1e-3, 1e-2)  # torch_npu passes prec positionally
    tc.assertEqual(torch.tensor(3.0).npu(), 3)
    tc.assertEqual([torch.ones(2), 2.0], [torch.ones(2).npu(), 2.0])
    tc.assertEqual({"a": torch.ones(1)}, {"a": torch.ones(1).npu()})
    tc.assertEqual(torch.tensor([1, 2]).npu(), [1, 2])
    tc.assertEqual(torch.float32, torch.float32)
    with pytest.raises(AssertionError):
        tc.assertEqual(torch.ones(2), torch.ones(3))
    with pytest.raises(AssertionError):
        tc.assertEqual(torch.tensor([True, False]), torch.tensor([True, True]).npu())
    tc.assertNotEqual(torch.ones(2).npu(), torch.zeros(2))
    with pytest.raises(AssertionError):
        tc.assertNotEqual(torch.ones(2).npu(), torch.ones(2))


def test_instantiate_tests_expands_dtypes_and_formats():
    calls = []

    @instantiate_tests
    class TestGenerated(TestCase):
        @Dtypes(torch.float, torch.half)
        @Formats(0, 2)
        def test_op(self, device, dtype, npu_format):
            calls.append((device, dtype, npu_format))

    names = sorted(n for n in dir(TestGenerated) if n.startswith("test_"))
    assert names == ["test_op_float16_0", "test_op_float16_2", "test_op_float32_0", "test_op_float32_2"]
    result = unittest.TextTestRunner(stream=open("/dev/null", "w")).run(
        unittest.defaultTestLoader.loadTestsFromTestCase(TestGenerated))
    assert result.wasSuccessful() and result.testsRun == 4
    assert sorted(calls, key=str) == sorted([("npu", d, f) for d in (torch.float, torch.half) for f in (0, 2)],
                                            key=str)
    with pytest.raises(RuntimeError, match="No dtypes"):
        Dtypes()
    with pytest.raises(RuntimeError, match="Unknown dtype"):
        Dtypes("float32")


def _outcome(decorated):
    class T(TestCase):
        ran = False

        @decorated
        def test_it(self):
            T.ran = True

    result = unittest.TextTestRunner(stream=open("/dev/null", "w")).run(T("test_it"))
    return "skipped" if result.skipped else ("ran" if T.ran and result.wasSuccessful() else "failed")


def test_supported_devices_and_multi_npu_on_the_default_chip():
    assert torch.npu.get_device_name(0) == "Ascend910B1"
    assert _outcome(SupportedDevices(["Ascend910B"])) == "ran"
    assert _outcome(SupportedDevices(["Ascend910A", "Ascend310P"])) == "skipped"
    assert _outcome(skipIfUnsupportMultiNPU(2)) == "ran"
    assert _outcome(skipIfUnsupportMultiNPU(torch.npu.device_count() + 1)) == "skipped"


def test_cann_version_gate():
    assert _outcome(SkipIfNotGteCANNVersion("8.0.RC1")) == "ran"
    assert _outcome(SkipIfNotGteCANNVersion("99.0.0")) == "skipped"


@pytest.mark.parametrize("soc,family", [("Ascend910B3", "Ascend910B"), ("Ascend910_9391", "Ascend910_93"),
                                        ("Ascend310P3", "Ascend310P"), ("Ascend950PR_9599", "Ascend950")])
def test_supported_devices_follows_npu_sim_soc_version(soc, family):
    code = textwrap.dedent(f"""
        import unittest, torch
        from torch_npu.testing.common_utils import SupportedDevices
        from torch_npu.testing.testcase import TestCase
        class T(TestCase):
            @SupportedDevices(["{family}"])
            def test_family(self): pass
            @SupportedDevices(["Ascend910A"])
            def test_other(self): pass
        r = unittest.TextTestRunner(verbosity=0).run(unittest.defaultTestLoader.loadTestsFromTestCase(T))
        print(torch.npu.get_device_name(), len(r.skipped), r.testsRun)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "NPU_SIM_SOC_VERSION": soc}).stdout.split()
    assert out == [soc, "1", "2"]


def test_create_dtype_tensor_and_broadcast_cases():
    cpu, npu = create_dtype_tensor((3, 4), torch.half, min_value=-2, max_value=2)
    assert cpu.dtype == npu.dtype == torch.half and torch.equal(npu.cpu(), cpu)
    cpu, npu = create_dtype_tensor((50,), torch.int32, min_value=-3, max_value=3, no_zero=True)
    assert cpu.dtype == torch.int32 and bool((cpu != 0).all()) and int(cpu.min()) >= -3
    cpu, npu = create_dtype_tensor((5,), torch.bool)
    assert npu.device.type == "npu" and torch.equal(npu.cpu(), cpu)
    pairs = test_2args_broadcast(torch.add)
    assert len(pairs) == 2 and pairs[0][0].shape == (2, 3, 4, 5)
    for cpu_out, npu_out in pairs:
        tc.assertRtolEqual(cpu_out, npu_out)
    assert get_npu_device() == "npu:0"


def test_check_operators_in_prof_sees_device_ops_of_the_region():
    x = torch.randn(8, 8, device="npu")
    torch.add(x, x)  # before the region: not counted
    with torch.autograd.profiler.profile() as prof:
        y = torch.mul(x, x)
    assert check_operators_in_prof(["aclnnMul"], prof)
    assert check_operators_in_prof(["aten::mul"], prof)
    assert not check_operators_in_prof(["aclnnAdd"], prof)
    assert not check_operators_in_prof(["aclnnMul"], prof, unexpected_operators=["aclnnMul"])
    del y
