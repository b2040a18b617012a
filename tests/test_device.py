"""torch.npu device management: availability, count, selection, synchronisation, invalid indices."""

import pytest
import torch

from conftest import default_env, stall_stream


def test_is_available_and_agrees_with_torch_accelerator():
    assert torch.npu.is_available()
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == "npu"
    assert torch.accelerator.device_count() == torch.npu.device_count()


@pytest.mark.skipif(not default_env(), reason="needs the default NPU_SIM_* configuration")
def test_device_count_default_is_8():
    assert torch.npu.device_count() == 8
    # every configured device is usable, the next index is not
    for i in range(8):
        x = torch.arange(3.0, device=f"npu:{i}")
        assert x.device == torch.device("npu", i)
        assert torch.equal(x.cpu(), torch.arange(3.0))
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.empty(1, device="npu:8")


def test_device_count_from_env_in_subprocess(run_python, tmp_path):
    ref = torch.arange(5.0)
    torch.save({"x": ref.to("npu:5")}, tmp_path / "on_npu5.pt")  # the child sees only 2 devices
    proc = run_python(
        """
        import torch
        assert torch.npu.device_count() == 2, torch.npu.device_count()
        try:
            torch.load("on_npu5.pt")
        except RuntimeError as e:
            assert "device_count" in str(e) or "does not exist" in str(e), str(e)
        else:
            raise AssertionError("loading onto npu:5 must fail with 2 devices")
        y = torch.load("on_npu5.pt", map_location="npu:1")["x"]
        assert y.device == torch.device("npu", 1)
        assert torch.equal(y.cpu(), torch.arange(5.0))
        assert torch.accelerator.device_count() == 2
        x = torch.arange(4.0).npu(1)
        assert x.device == torch.device("npu", 1)
        assert torch.equal((x * 2).cpu(), torch.arange(4.0) * 2)
        try:
            torch.empty(1, device="npu:2")
        except RuntimeError as e:
            assert "does not exist" in str(e), str(e)
        else:
            raise AssertionError("npu:2 must not exist with NPU_SIM_DEVICES=2")
        print("OK")
        """,
        env={"NPU_SIM_DEVICES": "2"},
    )
    assert proc.stdout.strip().endswith("OK")


def test_current_device_starts_at_zero_and_set_device_changes_it():
    assert torch.npu.current_device() == 0
    torch.npu.set_device(2)
    assert torch.npu.current_device() == 2
    assert torch.accelerator.current_device_index() == 2
    # the current device is where device="npu" and .npu() put tensors
    assert torch.empty(2, device="npu").device == torch.device("npu", 2)
    src = torch.randn(3, 3)
    x = src.npu()
    assert x.device == torch.device("npu", 2)
    assert torch.equal((x + 1).cpu(), src + 1)
    torch.npu.set_device(0)
    assert torch.npu.current_device() == 0


@pytest.mark.parametrize("spec", ["npu:3", torch.device("npu", 3), 3])
def test_set_device_accepts_string_device_and_int(spec):
    torch.npu.set_device(spec)
    assert torch.npu.current_device() == 3


def test_set_device_rejects_other_device_types():
    with pytest.raises(ValueError):
        torch.npu.set_device("cpu")
    assert torch.npu.current_device() == 0


def test_device_context_manager_switches_and_restores():
    torch.npu.set_device(1)
    with torch.npu.device(4):
        assert torch.npu.current_device() == 4
        t = torch.ones(2, device="npu")
        assert t.device.index == 4
        with torch.npu.device("npu:5"):
            assert torch.npu.current_device() == 5
        assert torch.npu.current_device() == 4
    assert torch.npu.current_device() == 1


def test_device_context_manager_restores_after_exception():
    with pytest.raises(KeyError):
        with torch.npu.device(6):
            assert torch.npu.current_device() == 6
            raise KeyError("boom")
    assert torch.npu.current_device() == 0


def test_device_context_none_is_noop():
    torch.npu.set_device(2)
    with torch.npu.device(None):
        assert torch.npu.current_device() == 2
    assert torch.npu.current_device() == 2


def test_device_of_uses_tensor_device():
    t = torch.ones(1, device="npu:3")
    with torch.npu.device_of(t):
        assert torch.npu.current_device() == 3
    assert torch.npu.current_device() == 0
    with torch.npu.device_of(torch.ones(1)):  # CPU tensor: no change
        assert torch.npu.current_device() == 0


def test_computation_on_non_default_device_matches_cpu():
    a, b = torch.randn(5, 7), torch.randn(5, 7)
    with torch.npu.device(3):
        x, y = a.npu(), b.npu()
        z = x * y + x
        assert z.device == torch.device("npu", 3)
    torch.testing.assert_close(z.cpu(), a * b + a)


def test_synchronize_then_results_match_cpu():
    a = torch.randn(16, 16)
    x = a.npu()
    for _ in range(5):
        x = x * 1.5 - 0.25
    torch.npu.synchronize()
    torch.npu.synchronize(0)
    torch.npu.synchronize("npu:0")
    torch.npu.synchronize(torch.device("npu", 0))
    expected = a
    for _ in range(5):
        expected = expected * 1.5 - 0.25
    torch.testing.assert_close(x.cpu(), expected)


def test_set_device_invalid_index_raises_and_keeps_current():
    torch.npu.set_device(1)
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.npu.set_device(99)
    assert torch.npu.current_device() == 1


def test_empty_on_invalid_device_raises():
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.empty(2, device="npu:99")


def test_to_invalid_device_raises():
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.ones(2).to("npu:99")


def test_synchronize_invalid_device_raises():
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.npu.synchronize(99)


def test_device_context_invalid_index_raises():
    with pytest.raises(RuntimeError, match="does not exist"):
        with torch.npu.device(99):
            pass
    assert torch.npu.current_device() == 0


def test_cross_device_op_raises():
    a = torch.ones(3, device="npu:0")
    b = torch.ones(3, device="npu:1")
    with pytest.raises(RuntimeError):
        a + b


def test_npu_and_cpu_mixed_op_raises():
    a = torch.ones(3, device="npu:0")
    with pytest.raises(RuntimeError):
        a + torch.ones(3)


@pytest.mark.parametrize("src_dev,dst_dev", [(0, 1), (1, 0), (2, 5)])
def test_copy_between_devices(src_dev, dst_dev):
    ref = torch.randn(6, 5)
    x = ref.to(f"npu:{src_dev}")
    y = x.to(f"npu:{dst_dev}")
    assert y.device == torch.device("npu", dst_dev)
    assert torch.equal(y.cpu(), ref)
    # copy_ into an existing tensor on the other device, while the current device is a third one
    dst = torch.zeros(6, 5, device=f"npu:{dst_dev}")
    with torch.npu.device(7):
        dst.copy_(x * 2)
    assert torch.equal(dst.cpu(), ref * 2)


def test_get_device_name():
    name = torch.npu.get_device_name()
    assert isinstance(name, str) and name
    assert torch.npu.get_device_name(1) == name
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.npu.get_device_name(99)


def test_torch_device_string_parsing():
    d = torch.device("npu:1")
    assert d.type == "npu" and d.index == 1
    x = torch.zeros(2, device=d)
    assert x.device == d
    assert x.is_npu
    assert x.get_device() == 1


def test_cross_device_copy_is_ordered_before_later_writes_to_source():
    for _ in range(3):
        src = torch.randn(1 << 16)
        x = src.to("npu:0")
        stall_stream(1)  # the copy queues on npu:1 behind this
        y = x.to("npu:1")
        x.fill_(0.0)  # queued on npu:0 after the copy: must not be seen by it
        assert torch.equal(y.cpu(), src)
        assert torch.equal(x.cpu(), torch.zeros(1 << 16))


def test_cross_device_copy_waits_for_queued_writes_to_source():
    src = torch.randn(1 << 12)
    x = torch.zeros(1 << 12, device="npu:0")
    stall_stream(0)
    x.copy_(src.pin_memory(), non_blocking=True)  # queued on npu:0 behind the stall
    x[::2].fill_(7.0)
    y = x.to("npu:1")
    expected = src.clone()
    expected[::2] = 7.0
    assert torch.equal(y.cpu(), expected)


def test_cross_device_copy_source_can_be_freed_and_reused():
    for _ in range(10):
        src = torch.randn(1 << 16)
        x = src.to("npu:0")
        y = x.to("npu:1")
        del x
        z = torch.empty(1 << 16, device="npu:0")  # may reuse x's block
        z.fill_(0.0)
        assert torch.equal(y.cpu(), src)


def test_ascend_rt_visible_devices_selects_and_counts(run_python):
    """ASCEND_RT_VISIBLE_DEVICES as Ascend reads it: ascending ids, read up to the first entry that is
    not one; torch.npu.device_count() and torch_npu._C._npu_getDeviceCount() agree."""
    proc = run_python(
        """
        import torch, torch_npu
        assert torch.npu.device_count() == 2 == torch_npu._C._npu_getDeviceCount()
        x = torch.arange(4.0, device="npu:1")
        assert torch.equal((x + 1).cpu(), torch.arange(4.0) + 1)
        try:
            torch.empty(1, device="npu:2")
        except RuntimeError as e:
            assert 'ASCEND_RT_VISIBLE_DEVICES="1,3,9"' in str(e), str(e)
        else:
            raise AssertionError("npu:2 must not exist")
        print("OK")
        """,
        env={"NPU_SIM_DEVICES": "4", "ASCEND_RT_VISIBLE_DEVICES": "1,3,9"},
    )
    assert proc.stdout.strip().endswith("OK")
    for value in ("", "1,0"):
        proc = run_python(
            """
            import torch, torch_npu
            assert torch.npu.device_count() == 0 == torch_npu._C._npu_getDeviceCount()
            assert not torch.npu.is_available()
            try:
                torch.ones(1, device="npu")
            except RuntimeError as e:
                assert "ASCEND_RT_VISIBLE_DEVICES" in str(e), str(e)
            else:
                raise AssertionError("no device is visible")
            print("OK")
            """,
            env={"ASCEND_RT_VISIBLE_DEVICES": value},
        )
        assert proc.stdout.strip().endswith("OK"), (value, proc.stdout, proc.stderr)
