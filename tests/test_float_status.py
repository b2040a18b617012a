"""The software NPU's overflow flag: raised by device ops and generic ops that produce inf/nan from
finite inputs (float16, bfloat16, float32), read and cleared in stream order through the float
status ops and torch.npu's helpers; the apex-style facade uses it."""

import pytest
import torch

import torch_npu


@pytest.fixture(autouse=True)
def _clean_flag():
    """Each test starts with detection on and a clear flag; the rest of the suite runs as before."""
    before = torch.npu.utils.is_overflow_detection_enabled()
    torch.npu.clear_npu_overflow_flag()  # also turns detection on
    yield
    torch.npu.clear_npu_overflow_flag()
    torch.npu.utils.enable_overflow_detection(before)


def test_float_status_ops_as_torch_npu_tests_use_them():
    status = torch_npu.npu_alloc_float_status(torch.zeros(8).npu())  # starts the detection
    assert status.shape == (8,) and status.dtype == torch.float32 and status.device.type == "npu"
    x = torch.tensor([40000.0], dtype=torch.float16).npu()
    x = x + x
    local = torch_npu.npu_get_float_status(status)
    assert local.cpu()[0] != 0
    cleared = torch_npu.npu_clear_float_status(local)
    assert cleared.cpu().tolist() == [0.0] * 8
    assert torch_npu.npu_get_float_status(torch_npu.npu_alloc_float_status(torch.zeros(8).npu())).cpu()[0] == 0


def test_first_generation_scripts_read_the_status_buffer():
    float_status = torch.zeros(8).npu()
    torch_npu.npu_clear_float_status(float_status)
    torch.tensor([3e38]).npu() * 10
    torch_npu.npu_get_float_status(float_status)
    assert float_status.cpu()[0] != 0


@pytest.mark.parametrize("dtype,big", [(torch.float16, 60000.0), (torch.bfloat16, 3e38), (torch.float32, 3e38)])
def test_device_ops_raise_the_flag(dtype, big):
    x = torch.tensor([big, 1.0], dtype=dtype).npu()
    assert not torch.npu.get_npu_overflow_flag()
    y = x * 4
    assert torch.isinf(y.cpu()).any()
    assert torch.npu.get_npu_overflow_flag()
    torch.npu.clear_npu_overflow_flag()
    assert not torch.npu.get_npu_overflow_flag()


def test_nan_from_finite_inputs_and_generic_ops():
    torch.tensor([-1.0, 4.0]).npu().sqrt()      # nan: a device op
    assert torch.npu.get_npu_overflow_flag()
    torch.npu.clear_npu_overflow_flag()
    torch.tensor([100.0, 1.0]).npu().cosh()     # inf: an op without a device op (generic executor)
    assert torch.npu.get_npu_overflow_flag()
    torch.npu.clear_npu_overflow_flag()
    torch.tensor([1.0, 2.0]).npu().logaddexp(torch.tensor([3.0, 4.0]).npu())
    assert not torch.npu.get_npu_overflow_flag()


def test_finite_results_and_non_finite_inputs_leave_the_flag_alone():
    a = torch.randn(64, 64).npu()
    (a @ a).relu().softmax(-1).sum()
    torch.tensor([float("inf"), 1.0]).npu() * 2                       # inf in, inf out
    torch.zeros(4).npu().masked_fill(torch.tensor([True, False, True, False]).npu(), float("-inf"))
    torch.full((3,), float("-inf")).npu().exp()
    torch.tensor([float("inf"), 1.0]).npu().cosh()                   # the same through the generic executor
    torch.tensor([float("nan"), 1.0]).npu().sinh()
    assert not torch.npu.get_npu_overflow_flag()


def test_flag_is_per_device_and_read_in_stream_order():
    from conftest import stall_stream

    big = torch.tensor([60000.0], dtype=torch.float16).npu()  # a blocking copy: before the stall
    stall_stream()
    big * 2                                                   # queued behind the stall
    assert torch.npu.get_npu_overflow_flag(0)                 # the read waits for it
    assert not torch.npu.get_npu_overflow_flag(1)
    torch.npu.clear_npu_overflow_flag(0)
    assert not torch.npu.get_npu_overflow_flag("npu:0")


def test_npu_check_overflow():
    from torch.npu.utils import npu_check_overflow

    assert npu_check_overflow(torch.tensor([1.0, float("nan")]).npu())
    assert not npu_check_overflow(torch.tensor([1.0, 2.0]).npu())
    torch.tensor([60000.0], dtype=torch.float16).npu() * 2
    assert npu_check_overflow()


def test_bad_arguments():
    with pytest.raises(ValueError, match="mode must be 0 .* or 1"):
        torch_npu.npu_get_float_status(torch.zeros(8).npu(), 3)
    with pytest.raises(NotImplementedError, match="npu_get_float_status.*CPU"):
        torch_npu.npu_get_float_status(torch.zeros(8))


def test_apex_facade_skips_the_step_on_an_overflowing_backward():
    from torch_npu.contrib import amp

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = amp.initialize(model, optimizer, opt_level="O2", loss_scale=2.0 ** 120, verbosity=0)
    before = [p.detach().clone() for p in model.parameters()]
    loss = model(torch.full((2, 4), 1e4).npu().half()).float().sum()
    with amp.scale_loss(loss, optimizer) as scaled:
        scaled.backward()
    optimizer.step()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_apex_facade_counts_overflows_of_its_backward_only():
    from torch_npu.contrib import amp

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).npu()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1", loss_scale=8.0, verbosity=0)
    assert torch.npu.utils.is_overflow_detection_enabled()  # the autouse fixture used the flag
    before = [p.detach().clone() for p in model.parameters()]
    loss = model(torch.ones(2, 4).npu()).sum()
    torch.tensor([60000.0], dtype=torch.float16).npu() * 2   # an overflow before scale_loss
    with amp.scale_loss(loss, optimizer) as scaled:
        scaled.backward()
    optimizer.step()
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # the step ran


def test_private_format_operands_raise_the_flag_from_their_logical_values():
    """An in-place op over NC1HWC0 storage and an mm of FRACTAL_NZ operands judge the logical
    values: an overflow sets the flag, an inf already in an input does not."""
    old = torch.npu.config.allow_internal_format
    torch.npu.config.allow_internal_format = True
    try:
        x = torch.full((1, 20, 2, 2), 40000.0, dtype=torch.float16)
        a = torch_npu.npu_format_cast(x.npu(), torch_npu.Format.NC1HWC0)
        a.add_(torch_npu.npu_format_cast(x.npu(), torch_npu.Format.NC1HWC0))
        assert torch.isinf(a.cpu()).all() and torch.npu.get_npu_overflow_flag()
        torch.npu.clear_npu_overflow_flag()
        a.add_(torch_npu.npu_format_cast(x.npu(), torch_npu.Format.NC1HWC0))  # inf + finite: not an overflow
        assert not torch.npu.get_npu_overflow_flag()
        m = torch_npu.npu_format_cast(torch.full((20, 20), 300.0, dtype=torch.float16).npu(),
                                      torch_npu.Format.FRACTAL_NZ)
        p = torch.mm(m, m)                      # 20 * 300 * 300 = 1.8e6 > 65504
        assert torch.isinf(p.cpu()).all() and torch.npu.get_npu_overflow_flag()
    finally:
        torch.npu.config.allow_internal_format = old
