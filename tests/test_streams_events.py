"""Streams and events on npu: torch.npu.Stream/Event, the stream context, cross-stream ordering,
torch.Stream / torch.Event / torch.accelerator integration, Tensor.record_stream."""

import copy

import pytest
import torch

from conftest import stall_stream

NPU = torch.device("npu", 0)


def _chain(x, n=8):
    """A few dependent element-wise steps (enough queued work for ordering bugs to show)."""
    for _ in range(n):
        x = x * 1.01 + 0.5
    return x


# ---------------------------------------------------------------------------------------------
# streams
# ---------------------------------------------------------------------------------------------


def test_default_and_current_stream():
    d = torch.npu.default_stream()
    c = torch.npu.current_stream()
    assert d.stream_id == 0
    assert d.device_index == 0
    assert d.device.type == "npu"
    assert c == d
    assert isinstance(c, torch.npu.Stream) and isinstance(c, torch.Stream)
    assert torch.npu.default_stream(3).device_index == 3
    assert torch.npu.current_stream("npu:3").device_index == 3


def test_new_stream_is_not_the_default_stream():
    s = torch.npu.Stream()
    assert isinstance(s, torch.Stream)
    assert s.device == NPU
    assert s.stream_id != 0
    assert s != torch.npu.default_stream()
    assert s == s
    assert hash(torch.npu.current_stream()) == hash(torch.npu.default_stream())


@pytest.mark.parametrize("spec", [2, "npu:2", torch.device("npu", 2)])
def test_stream_on_other_device(spec):
    s = torch.npu.Stream(spec)
    assert s.device_index == 2
    assert s.device == torch.device("npu", 2)


def test_stream_context_makes_current_and_restores():
    s = torch.npu.Stream()
    before = torch.npu.current_stream()
    with torch.npu.stream(s):
        assert torch.npu.current_stream() == s
        assert torch.accelerator.current_stream() == s
    assert torch.npu.current_stream() == before


def test_stream_context_restores_after_exception():
    s = torch.npu.Stream()
    with pytest.raises(ZeroDivisionError):
        with torch.npu.stream(s):
            1 / 0
    assert torch.npu.current_stream().stream_id == 0


def test_stream_context_nested():
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    with torch.npu.stream(s1):
        with torch.npu.stream(s2):
            assert torch.npu.current_stream() == s2
        assert torch.npu.current_stream() == s1
    assert torch.npu.current_stream() == torch.npu.default_stream()


def test_stream_context_for_other_device_switches_device_and_restores():
    s = torch.npu.Stream(3)
    with torch.npu.stream(s):
        assert torch.npu.current_device() == 3
        assert torch.npu.current_stream() == s
        x = torch.ones(2, device="npu")
        assert x.device == torch.device("npu", 3)
    assert torch.npu.current_device() == 0
    assert torch.npu.current_stream(3).stream_id == 0


def test_nested_stream_contexts_on_different_devices():
    s1, s2 = torch.npu.Stream(1), torch.npu.Stream(2)
    with torch.npu.stream(s1):
        with torch.npu.stream(s2):
            assert torch.npu.current_device() == 2
            assert torch.npu.current_stream() == s2
        assert torch.npu.current_device() == 1
        assert torch.npu.current_stream() == s1
        assert torch.npu.current_stream(2).stream_id == 0
    assert torch.npu.current_device() == 0
    assert torch.npu.current_stream(1).stream_id == 0


def test_stream_context_none_is_noop():
    with torch.npu.stream(None):
        assert torch.npu.current_stream().stream_id == 0


def test_set_stream():
    s = torch.npu.Stream()
    torch.npu.set_stream(s)
    assert torch.npu.current_stream() == s
    torch.npu.set_stream(torch.npu.default_stream())
    assert torch.npu.current_stream().stream_id == 0


def test_work_on_side_stream_then_wait_stream():
    a = torch.randn(32, 32)
    x = a.npu()  # produced on the default stream
    main = torch.npu.current_stream()
    side = torch.npu.Stream()
    side.wait_stream(main)
    with torch.npu.stream(side):
        y = _chain(x)
        z = y @ y.t()
    main.wait_stream(side)
    ref_y = _chain(a)
    torch.testing.assert_close(z.cpu(), ref_y @ ref_y.t())
    side.synchronize()
    assert side.query()


def test_work_on_side_stream_then_event_wait():
    a = torch.randn(16, 16)
    x = a.npu()
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    done = torch.npu.Event()
    with torch.npu.stream(side):
        y = _chain(x, 12)
        done.record()  # on the current (side) stream
    done.wait()  # the current (default) stream waits for it
    out = y + 1
    torch.testing.assert_close(out.cpu(), _chain(a, 12) + 1)


def test_stream_wait_event_and_record_event():
    a = torch.randn(8, 8)
    x = a.npu()
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    s1.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(s1):
        y = _chain(x)
    ev = s1.record_event()
    assert isinstance(ev, torch.npu.Event)
    s2.wait_event(ev)
    with torch.npu.stream(s2):
        z = y * 2
    s2.synchronize()
    torch.testing.assert_close(z.cpu(), _chain(a) * 2)


def test_streams_on_two_devices():
    a = torch.randn(8, 8)
    s0, s1 = torch.npu.Stream(0), torch.npu.Stream(1)
    x0 = a.to("npu:0")
    x1 = a.to("npu:1")
    s0.wait_stream(torch.npu.current_stream(0))
    s1.wait_stream(torch.npu.current_stream(1))
    with torch.npu.stream(s0):
        y0 = _chain(x0)
    with torch.npu.stream(s1):
        y1 = _chain(x1) * 3
    s0.synchronize()
    s1.synchronize()
    ref = _chain(a)
    torch.testing.assert_close(y0.cpu(), ref)
    torch.testing.assert_close(y1.cpu(), ref * 3)


def test_device_synchronize_waits_for_side_streams():
    a = torch.randn(32, 32)
    x = a.npu()
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        y = _chain(x, 16)
        y[::2].fill_(1.0)
    torch.npu.synchronize()  # every stream of the device
    ref = _chain(a, 16)
    ref[::2] = 1.0
    torch.testing.assert_close(y.cpu(), ref)


def test_stream_synchronize_and_query():
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        x = _chain(torch.ones(64, 64, device="npu"))
    s.synchronize()
    assert s.query()
    torch.testing.assert_close(x.cpu(), _chain(torch.ones(64, 64)))


# ---------------------------------------------------------------------------------------------
# events
# ---------------------------------------------------------------------------------------------


def test_event_record_query_synchronize():
    e = torch.npu.Event()
    assert isinstance(e, torch.Event)
    assert e.query()  # never recorded: nothing pending
    x = torch.randn(64, 64).npu()
    y = _chain(x)
    e.record()
    e.synchronize()
    assert e.query()
    torch.testing.assert_close(y.cpu(), _chain(x.cpu()))


def test_event_record_on_explicit_stream():
    s = torch.npu.Stream()
    e = torch.npu.Event()
    s.wait_stream(torch.npu.current_stream())
    a = torch.randn(4, 4)
    x = a.npu()
    with torch.npu.stream(s):
        y = x * 5
    e.record(s)
    e.synchronize()
    assert e.query()
    assert torch.equal(y.cpu(), a * 5)


def test_event_elapsed_time_with_timing():
    start = torch.npu.Event(enable_timing=True)
    end = torch.npu.Event(enable_timing=True)
    x = torch.randn(64, 64, device="npu")
    start.record()
    for _ in range(5):
        x = x @ x / 64
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float)
    assert ms >= 0


def test_event_elapsed_time_requires_enable_timing():
    start = torch.npu.Event()
    end = torch.npu.Event()
    start.record()
    end.record()
    end.synchronize()
    with pytest.raises(RuntimeError):
        start.elapsed_time(end)
    timed = torch.npu.Event(enable_timing=True)
    timed.record()
    timed.synchronize()
    with pytest.raises(RuntimeError):
        timed.elapsed_time(end)  # only one side has timing


def test_event_elapsed_time_requires_recorded_events():
    start = torch.npu.Event(enable_timing=True)
    end = torch.npu.Event(enable_timing=True)
    with pytest.raises(RuntimeError):
        start.elapsed_time(end)
    start.record()
    with pytest.raises(RuntimeError):
        start.elapsed_time(end)


def test_failed_task_is_reported_at_next_sync_and_device_stays_usable():
    dst = torch.empty(3, device="npu")
    src = torch.empty(4, device="npu")
    with pytest.raises(RuntimeError, match="must match"):  # as on the CPU, now or at the next sync
        dst.copy_(src)
        torch.npu.synchronize()
    torch.npu.synchronize()  # reported once
    a = torch.randn(6)
    x = a.npu()
    torch.testing.assert_close((x * 2).cpu(), a * 2)
    assert torch.equal(x.t().contiguous().cpu(), a)


def test_failed_task_on_side_stream_is_reported_by_that_stream():
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        dst = torch.empty(2, 3, device="npu")
        with pytest.raises(RuntimeError, match="must match"):
            dst.copy_(torch.empty(2, 5, device="npu"))
            s.synchronize()
    s.synchronize()
    with torch.npu.stream(s):
        y = torch.ones(2, 3, device="npu").t().contiguous()
    s.synchronize()
    assert torch.equal(y.cpu(), torch.ones(3, 2))


def test_torch_event_and_torch_stream_with_npu():
    s = torch.Stream(device="npu")
    assert s.device.type == "npu"
    start = torch.Event(device="npu", enable_timing=True)
    end = torch.Event(device="npu", enable_timing=True)
    a = torch.randn(16, 16)
    x = a.npu()
    s.wait_stream(torch.accelerator.current_stream())
    start.record(s)
    with s:  # torch.Stream context manager
        assert torch.accelerator.current_stream() == s
        y = _chain(x)
    end.record(s)
    end.synchronize()
    assert end.query()
    assert start.elapsed_time(end) >= 0
    assert torch.accelerator.current_stream().stream_id == 0
    torch.accelerator.current_stream().wait_event(end)
    torch.testing.assert_close(y.cpu(), _chain(a))


def test_torch_accelerator_stream_api():
    cur = torch.accelerator.current_stream()
    assert cur.device.type == "npu"
    assert cur == torch.npu.current_stream()
    s = torch.npu.Stream()
    torch.accelerator.set_stream(s)
    assert torch.npu.current_stream() == s
    a = torch.randn(8)
    x = a.npu()
    y = x.exp()
    torch.accelerator.synchronize()
    torch.accelerator.set_stream(torch.npu.default_stream())
    torch.testing.assert_close(y.cpu(), a.exp())


def test_current_streams_are_per_device():
    s1 = torch.npu.Stream(1)
    torch.npu.set_stream(s1)
    assert torch.npu.current_stream(1) == s1
    assert torch.npu.current_stream(0).stream_id == 0


def test_event_default_is_not_timing_and_blocking_flags_accepted():
    e = torch.npu.Event(blocking=True)
    e.record()
    e.synchronize()
    assert e.query()


# ---------------------------------------------------------------------------------------------
# record_stream
# ---------------------------------------------------------------------------------------------


def test_record_stream_is_accepted():
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    a = torch.randn(32)
    x = a.npu()
    with torch.npu.stream(side):
        y = x * 2
    y.record_stream(torch.npu.current_stream())
    x.record_stream(side)
    torch.npu.current_stream().wait_stream(side)
    assert torch.equal(y.cpu(), a * 2)


def test_record_stream_keeps_block_until_stream_is_done():
    n = 1 << 16
    for _ in range(3):
        src = torch.randn(n)
        x = src.npu()  # allocated on the default stream
        side = torch.npu.Stream()
        side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(side):
            stall_stream()
            y = torch.empty(n, device="npu")
            y.copy_(x)  # queued on the side stream, behind the stall
        x.record_stream(side)
        del x  # without record_stream the default stream could reuse x's block right away
        z = torch.empty(n, device="npu")
        z.fill_(0.0)
        torch.npu.current_stream().wait_stream(side)
        y.record_stream(torch.npu.current_stream())
        assert torch.equal(y.cpu(), src)


def test_record_stream_rejects_non_npu_stream():
    x = torch.ones(4, device="npu")
    with pytest.raises(RuntimeError):
        x.record_stream(torch.Stream(device="cpu"))


def test_empty_cache_with_block_pending_on_other_stream(quiet_allocator):
    src = torch.randn(1 << 16)
    x = src.npu()
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        stall_stream()
        y = torch.empty(1 << 16, device="npu")
        y.copy_(x)
    x.record_stream(side)
    del x
    torch.npu.empty_cache()  # waits for the side stream before giving the block back
    side.synchronize()
    torch.npu.current_stream().wait_stream(side)
    assert torch.equal(y.cpu(), src)
    assert torch.npu.memory_reserved() >= torch.npu.memory_allocated()


def test_allocator_does_not_hand_out_memory_still_used_by_side_stream():
    """The documented alternative to record_stream: keep a reference until the side stream is done."""
    a = torch.randn(256)
    x = a.npu()
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        y = _chain(x, 20)
    side.synchronize()
    del x
    z = torch.zeros(256, device="npu")  # may reuse x's block: y must not change
    torch.testing.assert_close(y.cpu(), _chain(a, 20))
    assert torch.equal(z.cpu(), torch.zeros(256))


def test_inference_mode_work_runs_on_the_stream_worker():
    """Tensors made under torch.inference_mode() are written by kernels on the stream's worker thread,
    which is not in that mode: forward passes (named device ops and ATen-backed ones) must still run."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.GELU(), torch.nn.Linear(20, 5))
    x = torch.randn(9, 10)
    npu_model = copy.deepcopy(model).npu()
    with torch.inference_mode():
        out = npu_model(x.npu())
        eye = torch.eye(10, device="npu")
        summed = (out * 2 + 1).sum(0)
        assert out.is_inference()
    torch.npu.synchronize()
    with torch.no_grad():
        ref = model(x)
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(summed.cpu(), (ref * 2 + 1).sum(0), rtol=1e-5, atol=1e-5)
    assert torch.equal(eye.cpu(), torch.eye(10))
