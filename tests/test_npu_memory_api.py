"""torch.npu's allocator-facing names that torch_npu has beyond torch.accelerator: the pinned host
allocator's cache and statistics, raw caching-allocator blocks, nested statistics, the memory fraction,
legacy typed storages, autocast switches and peer access."""

import gc

import pytest
import torch

import torch_npu


def test_host_memory_stats_follow_pinned_tensors_and_empty_cache():
    gc.collect()
    torch.npu.synchronize()
    torch.npu.host_empty_cache()
    torch.npu.reset_accumulated_host_memory_stats()
    base = torch.npu.host_memory_stats()
    x = torch.randn(3000).pin_memory()
    assert x.is_pinned()
    held = torch.npu.host_memory_stats()
    assert held["active_requests.current"] == base["active_requests.current"] + 1
    assert held["allocated_bytes.current"] >= base["allocated_bytes.current"] + x.nbytes
    assert held["num_host_alloc"] >= 1
    nested = torch.npu.host_memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["current"] == held["allocated_bytes.current"]
    del x
    torch.npu.synchronize()
    cached = torch.npu.host_memory_stats()
    assert cached["active_requests.current"] == base["active_requests.current"]
    assert cached["allocated_bytes.current"] == held["allocated_bytes.current"]  # kept in the cache
    torch.npu.host_empty_cache()
    emptied = torch.npu.host_memory_stats()
    assert emptied["allocated_bytes.current"] == base["allocated_bytes.current"]
    assert emptied["allocated_bytes.peak"] >= held["allocated_bytes.current"]
    torch.npu.reset_peak_host_memory_stats()
    assert torch.npu.host_memory_stats()["allocated_bytes.peak"] == emptied["allocated_bytes.current"]
    torch.npu.reset_accumulated_host_memory_stats()
    assert torch.npu.host_memory_stats()["allocated_bytes.allocated"] == 0


def test_caching_allocator_alloc_and_delete_are_allocator_blocks():
    torch.npu.synchronize()
    before = torch.npu.memory_allocated()
    ptr = torch.npu.caching_allocator_alloc(1 << 20)
    assert isinstance(ptr, int) and ptr != 0
    assert torch.npu.memory_allocated() >= before + (1 << 20)
    side = torch.npu.Stream()
    ptr2 = torch.npu.caching_allocator_alloc(4096, device=0, stream=side)
    torch.npu.caching_allocator_delete(ptr)
    torch.npu.caching_allocator_delete(ptr2)
    assert torch.npu.memory_allocated() == before
    with pytest.raises(ValueError, match="not allocated by caching_allocator_alloc"):
        torch.npu.caching_allocator_delete(ptr)
    with pytest.raises(ValueError, match="non-negative"):
        torch.npu.caching_allocator_alloc(-1)


def test_memory_stats_as_nested_dict_matches_flat_stats():
    keep = torch.ones(1000, device="npu")
    flat = torch.npu.memory_stats()
    nested = torch.npu.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == flat["allocated_bytes.all.current"] > 0
    assert nested["num_alloc_retries"] == flat["num_alloc_retries"]
    del keep


def test_per_process_memory_fraction_reads_back():
    assert torch.npu.get_per_process_memory_fraction() == 1.0
    try:
        torch.npu.set_per_process_memory_fraction(0.5)
        assert torch.npu.get_per_process_memory_fraction(0) == 0.5
        free, total = torch.npu.mem_get_info()
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(int(total * 0.6), dtype=torch.uint8, device="npu")
    finally:
        torch.npu.set_per_process_memory_fraction(1.0)
    torch.npu.empty_cache()


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_legacy_typed_storages_live_on_npu():
    for cls, dtype in ((torch.npu.FloatStorage, torch.float32), (torch.npu.HalfStorage, torch.float16),
                       (torch.npu.LongStorage, torch.int64), (torch.npu.BoolStorage, torch.bool)):
        s = cls(6)
        assert s.device.type == "npu" and s.dtype == dtype and s.size() == 6
        s.fill_(1)
        assert torch.equal(torch.tensor([], dtype=dtype, device="npu").set_(s).cpu(), torch.ones(6, dtype=dtype))
        assert isinstance(torch.zeros(2, dtype=dtype, device="npu").storage(), cls)
        assert not isinstance(torch.zeros(2, dtype=dtype).storage(), cls)  # a CPU storage is not one
    data = torch.npu.IntStorage([1, 2, 3])
    assert data.tolist() == [1, 2, 3]
    with pytest.raises(RuntimeError, match="not available for npu storage"):
        torch.npu.FloatStorage.from_buffer(b"\0" * 8, "little")


def test_autocast_switches_are_torch_autocast_state():
    assert not torch.npu.is_autocast_enabled()
    assert torch.npu.get_autocast_dtype() == torch.float16
    with torch.autocast("npu", dtype=torch.bfloat16):
        assert torch.npu.is_autocast_enabled()
        assert torch.npu.get_autocast_dtype() == torch.bfloat16
    prev = torch.npu.get_autocast_dtype()
    try:
        torch.npu.set_autocast_enabled(True)
        torch.npu.set_autocast_dtype(torch.bfloat16)
        a = torch.randn(4, 4, device="npu")
        assert (a @ a).dtype == torch.bfloat16  # matmul autocasts as inside torch.autocast("npu")
    finally:
        torch.npu.set_autocast_enabled(False)
        torch.npu.set_autocast_dtype(prev)
    assert (a @ a).dtype == torch.float32
    with pytest.raises(ValueError, match="float16 or torch.bfloat16"):
        torch.npu.set_autocast_dtype(torch.float64)
    with pytest.raises(TypeError):
        torch.npu.set_autocast_enabled("yes")


def test_can_device_access_peer():
    n = torch.npu.device_count()
    assert torch.npu.can_device_access_peer(0, 0) is False
    if n > 1:
        assert torch.npu.can_device_access_peer(0, 1) is True
        # And the access works: a copy between the devices is exact.
        x = torch.randn(100, device="npu:0")
        assert torch.equal(x.to("npu:1").cpu(), x.cpu())
    with pytest.raises(RuntimeError, match=f"npu:{n} does not exist"):
        torch.npu.can_device_access_peer(0, n)


def test_stream_context_takes_stream_ctx():
    s = torch.npu.Stream()
    with torch.npu.StreamContext(stream_ctx=s):
        assert torch.npu.current_stream() == s
    with torch.npu.StreamContext(None):
        pass


def test_ipc_collect_keeps_live_tensors():
    x = torch.arange(10, device="npu")
    torch.npu.ipc_collect()
    assert torch.equal(x.cpu(), torch.arange(10))


def test_erase_stream_lets_the_block_be_reused_at_once():
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        torch.npu.synchronize()
        x = torch.ones(1 << 18, device="npu")
        ptr = x.data_ptr()
        other = torch.npu.Stream()
        x.record_stream(other)
        # Without erase_stream the block waits for `other` after the free: a new tensor gets other memory
        # while `other` has work queued (the runtime may have finished it already, so only the erased case
        # is asserted).
        torch_npu.erase_stream(x, other)
        del x
        y = torch.empty(1 << 18, device="npu")
        assert y.data_ptr() == ptr
    with pytest.raises(TypeError, match="torch.npu.Stream"):
        torch_npu.erase_stream(y, 3)
    with pytest.raises(ValueError, match="npu tensor"):
        torch_npu.erase_stream(torch.ones(2), side)


def test_stream_handle_and_reprs():
    s = torch.npu.Stream()
    assert isinstance(s.npu_stream, int) and s.npu_stream != 0
    assert s.npu_stream == torch.npu.Stream(stream_id=s.stream_id, device_index=s.device_index,
                                            device_type=s.device_type).npu_stream
    assert s.npu_stream != torch.npu.current_stream().npu_stream
    assert repr(s).startswith("<torch_npu.npu.Stream device=npu:0 npu_stream=0x")
    e = torch.npu.Event()
    assert "uninitialized" in repr(e)
    s.record_event(e)
    assert repr(e).startswith("<torch_npu.npu.Event 0x")


def test_device_uuid_and_device_index():
    p0, p0b = torch.npu.get_device_properties(0), torch.npu.get_device_properties("npu:0")
    assert len(str(p0.uuid)) == 36 and len(p0.uuid.bytes) == 16 and p0.uuid == p0b.uuid
    if torch.npu.device_count() > 1:
        assert torch.npu.get_device_properties(1).uuid != p0.uuid
    assert torch.npu._get_device_index("npu:1") == 1
    assert torch.npu._get_device_index(None, optional=True) == torch.npu.current_device()
    assert torch.npu._get_device_index(torch.device("cpu"), allow_cpu=True) == -1
    with pytest.raises(ValueError, match="Expected a npu device"):
        torch.npu._get_device_index("cpu")


def test_npurt_registers_host_memory_as_pinned_and_creates_streams():
    import ctypes

    rt = torch.npu.npurt()
    assert rt is torch_npu.npu.npurt() and rt is torch_npu._C._npurt
    t = torch.arange(4096, dtype=torch.float32)
    assert not t.is_pinned()
    assert rt.npuHostRegister(t.data_ptr(), t.numel() * 4, 0x10000000) == 0
    try:
        assert t.is_pinned()  # registered memory counts as pinned: async copies do not block
        d = t.to("npu", non_blocking=True)
        assert torch.equal(d.cpu(), t)
        assert rt.npuHostRegister(t.data_ptr() + 64, 16, 0x10000000) != 0  # overlaps
    finally:
        assert rt.npuHostUnregister(t.data_ptr()) == 0
    assert not t.is_pinned()
    assert rt.npuHostUnregister(t.data_ptr()) != 0 and rt.npuHostRegister(0, 4096, 0x10000000) != 0
    assert rt.npuHostRegister(t.data_ptr(), 0, 0x10000000) != 0 and rt.npuHostRegister(t.data_ptr(), 64, 0x4) != 0
    handle = ctypes.c_void_p()
    assert rt.npuStreamCreate(ctypes.addressof(handle)) == 0 and handle.value
    assert rt.npuStreamDestroy(handle.value) == 0
    assert rt.npuStreamCreate(0) != 0 and rt.npuStreamDestroy(0) != 0


def test_empty_strided_npu_and_empty_with_swapped_memory():
    t = torch_npu._C._empty_strided_npu((4, 3), (1, 4), torch.float16)
    assert t.device == torch.device("npu", torch.npu.current_device()) and t.dtype == torch.float16
    assert t.shape == (4, 3) and t.stride() == (1, 4)
    t.copy_(torch.ones(4, 3))
    assert t.cpu().sum().item() == 12
    with pytest.raises(TypeError, match="torch.dtype"):
        torch_npu._C._empty_strided_npu((2,), (1,), "float")
    with pytest.raises(ValueError, match="2 sizes but 1 strides"):
        torch_npu._C._empty_strided_npu((2, 2), (1,), torch.float32)

    s = torch_npu.empty_with_swapped_memory((10, 9), dtype=torch.bfloat16, device="npu:1")
    assert s.shape == (10, 9) and s.dtype == torch.bfloat16 and s.device == torch.device("npu", 1)
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        assert torch_npu.empty_with_swapped_memory((3, 3), dtype=torch.float32).isnan().all()
        assert (torch_npu.empty_with_swapped_memory((3,), dtype=torch.int32).cpu() == 2 ** 31 - 1).all()
    finally:
        torch.use_deterministic_algorithms(False)
    m = torch_npu.empty_with_swapped_memory((2, 5), dtype=torch.float16, device="meta")
    assert m.shape == (2, 5) and m.device.type == "meta"


@pytest.fixture
def alloc_settings():
    yield torch_npu._C._npu_npuCachingAllocator_set_allocator_settings
    torch_npu._C._npu_npuCachingAllocator_set_allocator_settings("")
    torch.npu.empty_cache()


def test_throw_on_npumalloc_oom_rejects_past_the_fraction_and_counts(alloc_settings):
    total = torch.npu.mem_get_info()[1]
    torch.npu.empty_cache()
    torch.npu.reset_accumulated_memory_stats()
    assert torch.npu.memory_stats()["num_oom_rejections"] == 0
    alloc_settings("throw_on_npumalloc_oom:True,per_process_memory_fraction:0.01")
    small = torch.ones(1024, device="npu")  # far inside 1% of the device
    assert torch.npu.memory_stats()["num_oom_rejections"] == 0
    with pytest.raises(torch.OutOfMemoryError, match="throw_on_npumalloc_oom"):
        torch.empty(int(total * 0.02) // 4, device="npu")
    assert torch.npu.memory_stats()["num_oom_rejections"] > 0
    torch.npu.reset_accumulated_memory_stats()
    assert torch.npu.memory_stats()["num_oom_rejections"] == 0
    # Without the flag the fraction still caps the reserve, but nothing counts as a rejection.
    alloc_settings("per_process_memory_fraction:0.01")
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(int(total * 0.02) // 4, device="npu")
    assert torch.npu.memory_stats()["num_oom_rejections"] == 0
    alloc_settings("")
    big = torch.empty(int(total * 0.02) // 4, device="npu")  # fits again once the setting is gone
    assert big.numel() > small.numel()


@pytest.mark.parametrize("text, message", [
    ("throw_on_npumalloc_oom:maybe", "throw_on_npumalloc_oom"),
    ("per_process_memory_fraction:1.5", "per_process_memory_fraction"),
    ("per_process_memory_fraction:abc", "per_process_memory_fraction"),
])
def test_npu_allocator_keys_reject_bad_values(alloc_settings, text, message):
    with pytest.raises(RuntimeError, match=message):
        alloc_settings(text)


def test_event_recorded_time_orders_records():
    start = torch.npu.Event(enable_timing=True)
    start.record()
    torch.ones(1000, device="npu").sum()
    end = torch.npu.Event(enable_timing=True)
    end.record()
    t0, t1 = start.recorded_time(), end.recorded_time()
    assert isinstance(t0, int) and 0 < t0 <= t1
    # Microseconds, consistent with elapsed_time's milliseconds.
    assert abs((t1 - t0) / 1000.0 - start.elapsed_time(end)) < 1.0
    with pytest.raises(RuntimeError, match="never recorded"):
        torch.npu.Event().recorded_time()
