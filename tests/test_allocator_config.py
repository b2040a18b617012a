"""PYTORCH_NPU_ALLOC_CONF: parsing and validation, expandable segments, max_split_size_mb,
roundup_power2_divisions and garbage_collection_threshold, each against the behaviour PyTorch's CUDA
caching allocator documents."""

import gc

import pytest
import torch

MiB = 2**20


@pytest.fixture
def settings():
    """Apply allocator settings for one test (on an empty cache) and restore the defaults after."""
    def apply(text):
        gc.collect()
        torch.npu.synchronize()
        torch.npu.empty_cache()
        torch.npu.memory._set_allocator_settings(text)
        torch.npu.reset_peak_memory_stats()
    yield apply
    gc.collect()
    torch.npu.synchronize()
    torch.npu.empty_cache()
    torch.npu.memory._set_allocator_settings("")


@pytest.mark.parametrize("text, message", [
    ("foo:1", "Unrecognized key 'foo'"),
    ("max_split_size_mb:10", "max_split_size_mb too small"),
    ("garbage_collection_threshold:1.5", "garbage_collect_threshold is invalid"),
    ("expandable_segments:Yes", "Expected 'True' or 'False'"),
    ("roundup_power2_divisions:3", "power of 2"),
    ("expandable_segments:True,max_split_size_mb:40", "cannot be enabled with `expandable_segments`"),
    ("max_split_size_mb", "expected ':'"),
    ("expandable_segments:True;max_split_size_mb:40", "expected ',' after the value"),
])
def test_invalid_settings_raise_value_error(settings, text, message):
    with pytest.raises(ValueError, match=message):
        torch.npu.memory._set_allocator_settings(text)
    # A rejected setting changes nothing.
    assert torch.npu.memory._snapshot()["allocator_settings"]["expandable_segments"] is False


def test_settings_show_in_snapshot(settings):
    settings("max_split_size_mb:40, roundup_power2_divisions:[256:1,512:2,>:4]")
    s = torch.npu.memory._snapshot()["allocator_settings"]
    assert s["max_split_size"] == 40 * MiB
    assert s["roundup_power2_divisions"]["1"] == 1  # below 256 MiB: the first entry's value, 1 = off
    assert s["roundup_power2_divisions"]["512"] == 2
    assert s["roundup_power2_divisions"]["4096"] == 4
    assert s["PYTORCH_NPU_ALLOC_CONF"].startswith("max_split_size_mb:40")


def test_driver_only_keys_are_accepted_with_a_warning(settings):
    with pytest.warns(UserWarning, match="has no effect on the software NPU"):
        settings("page_size:1g,expandable_segments:True")
    assert torch.npu.memory._snapshot()["allocator_settings"]["expandable_segments"] is True


def test_environment_variable_is_read_at_start(run_python):
    code = """
        import torch, torch_npu
        x = torch.empty(3 * 2**20, dtype=torch.uint8, device="npu")
        s = torch.npu.memory._snapshot()
        assert s["allocator_settings"]["expandable_segments"] is True, s["allocator_settings"]
        assert any(seg["is_expandable"] for seg in s["segments"])
        # Only the pages in use are reserved, not a 20 MiB segment.
        assert torch.npu.memory_reserved() < 5 * 2**20, torch.npu.memory_reserved()
        print("ok")
    """
    assert "ok" in run_python(code, env={"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"}).stdout
    # PYTORCH_ALLOC_CONF is the fallback; PYTORCH_NPU_ALLOC_CONF wins when both are set.
    run_python(code, env={"PYTORCH_ALLOC_CONF": "expandable_segments:True"})
    proc = run_python("import torch, torch_npu; torch.empty(1, device='npu')",
                      env={"PYTORCH_NPU_ALLOC_CONF": "bogus:1", "PYTORCH_ALLOC_CONF": "expandable_segments:True"},
                      check=False)
    assert proc.returncode != 0 and "Unrecognized key 'bogus'" in proc.stderr


def test_expandable_segments_grow_in_place_and_reuse_the_space(settings):
    settings("expandable_segments:True")
    before = torch.npu.memory_stats()
    base_allocated, base_reserved = torch.npu.memory_allocated(), torch.npu.memory_reserved()
    tensors = [torch.full((MiB // 4 * (i + 1),), float(i), device="npu") for i in range(6)]  # 1..6 MiB
    stats = torch.npu.memory_stats()
    assert stats["segment.large_pool.current"] - before.get("segment.large_pool.current", 0) == 1
    allocated = torch.npu.memory_allocated() - base_allocated
    reserved = torch.npu.memory_reserved() - base_reserved
    assert allocated == 21 * MiB
    assert allocated <= reserved < allocated + 2 * MiB  # grown in small steps, not 20 MiB segments
    for i, t in enumerate(tensors):  # the data survives the growth
        assert torch.equal(t.cpu(), torch.full((MiB // 4 * (i + 1),), float(i)))
    # Freed blocks are reused without mapping more.
    del tensors[2:4]
    maps = torch.npu.memory_stats()["num_device_alloc"]
    again = torch.empty(7 * MiB // 4, device="npu")
    assert torch.npu.memory_stats()["num_device_alloc"] == maps
    del again, tensors, t  # t: the loop variable still holds the last tensor
    torch.npu.synchronize()
    torch.npu.empty_cache()  # every page goes back
    assert torch.npu.memory_reserved() == base_reserved


def test_expandable_segments_share_pages_between_small_and_large_blocks(settings):
    """Small and large blocks use one range: the pages a freed large tensor leaves serve small
    tensors without mapping more, and statistics still count allocations by size class."""
    settings("expandable_segments:True")
    base_reserved = torch.npu.memory_reserved()
    big = torch.full((4 * MiB // 4,), 1.0, device="npu")  # 4 MiB: a large-pool size
    reserved = torch.npu.memory_reserved() - base_reserved
    assert 4 * MiB <= reserved < 6 * MiB
    del big
    before = torch.npu.memory_stats()
    maps = before["num_device_alloc"]
    small_before = before.get("allocated_bytes.small_pool.current", 0)
    small = [torch.full((256 * 1024 // 4,), float(i), device="npu") for i in range(12)]  # 12 x 256 KiB
    stats = torch.npu.memory_stats()
    assert stats["num_device_alloc"] == maps  # served from the freed large block's pages
    assert torch.npu.memory_reserved() - base_reserved == reserved
    assert stats["allocated_bytes.small_pool.current"] - small_before == 12 * 256 * 1024
    for i, t in enumerate(small):
        assert torch.equal(t.cpu(), torch.full((256 * 1024 // 4,), float(i)))
    del small, t
    torch.npu.synchronize()
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() == base_reserved
    assert torch.npu.memory_stats()["allocated_bytes.small_pool.current"] == small_before


def test_expandable_segments_empty_cache_unmaps_only_free_pages(settings):
    settings("expandable_segments:True")
    base = torch.npu.memory_reserved()
    a = torch.ones(4 * MiB // 4, device="npu")
    b = torch.empty(4 * MiB // 4, device="npu")
    c = torch.full((MiB // 4,), 3.0, device="npu")
    del b
    torch.npu.empty_cache()
    reserved = torch.npu.memory_reserved() - base
    assert 5 * MiB <= reserved < 5 * MiB + 2 * MiB  # the hole went back, a and c stay mapped
    assert a.sum().item() == MiB // 4 * 4 and c.sum().item() == 3 * MiB // 4
    d = torch.full((4 * MiB // 4,), 2.0, device="npu")  # maps the hole again
    assert d.sum().item() == 2 * MiB
    del a, c, d


def test_expandable_segments_respect_the_memory_fraction_in_subprocess(run_python):
    run_python("""
        import torch, torch_npu
        torch.npu.set_per_process_memory_fraction(0.5)
        x = torch.empty(20 * 2**20, dtype=torch.uint8, device="npu")
        try:
            torch.empty(20 * 2**20, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError as e:
            assert "per-process limit" in str(e), e
        else:
            raise AssertionError("no out-of-memory error")
        assert torch.npu.memory_reserved() <= 32 * 2**20
    """, env={"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "NPU_SIM_MEMORY": "64M"})


def test_max_split_size_keeps_oversize_blocks_whole(settings):
    settings("max_split_size_mb:20")
    base = torch.npu.memory_reserved()
    big = torch.empty(30 * MiB, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_stats()["oversize_allocations.current"] == 1
    assert torch.npu.memory_stats()["max_split_size"] == 20 * MiB
    del big
    # A 12 MiB request does not split the cached 30 MiB block: it gets a segment of its own.
    small = torch.empty(12 * MiB, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_reserved() - base == 30 * MiB + 12 * MiB
    del small
    # A request close to the oversize block's size reuses it.
    again = torch.empty(29 * MiB, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_reserved() - base == 42 * MiB
    del again


def test_default_splits_cached_large_blocks(settings):
    settings("")
    base = torch.npu.memory_reserved()
    big = torch.empty(30 * MiB, dtype=torch.uint8, device="npu")
    del big
    small = torch.empty(12 * MiB, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_reserved() - base == 30 * MiB  # carved out of the cached block
    del small


@pytest.mark.parametrize("divisions, nbytes, expected", [
    (4, 1200 * 1024, 1280 * 1024),       # 1 MiB .. 2 MiB in 4 steps of 256 KiB
    (4, 1024 * 1024, 1024 * 1024),       # a power of two stays
    (2, 5 * MiB + 1, 6 * MiB),           # 4 MiB .. 8 MiB in 2 steps
    (1, 1200 * 1024 + 1, 1200 * 1024 + 512),  # 1 turns rounding off: 512-byte multiples
])
def test_roundup_power2_divisions(settings, divisions, nbytes, expected):
    settings(f"roundup_power2_divisions:{divisions}")
    before = torch.npu.memory_allocated()
    x = torch.empty(nbytes, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_allocated() - before == expected
    assert torch.npu.memory_stats()["requested_bytes.all.current"] >= nbytes
    del x


def test_garbage_collection_frees_old_cached_segments_in_subprocess(run_python):
    run_python("""
        import torch, torch_npu
        MiB = 2**20
        torch.npu.set_per_process_memory_fraction(1.0)
        # Cache three 12 MiB segments, then ask for other sizes: past 60% of the 64 MiB device the
        # allocator frees cached segments instead of failing or growing.
        for _ in range(3):
            xs = [torch.empty(12 * MiB, dtype=torch.uint8, device="npu") for _ in range(3)]
            del xs
        assert torch.npu.memory_reserved() == 36 * MiB
        ys = [torch.empty(14 * MiB, dtype=torch.uint8, device="npu") for _ in range(2)]
        assert torch.npu.memory_reserved() <= 0.6 * 64 * MiB + 14 * MiB, torch.npu.memory_reserved()
        assert torch.npu.memory_stats()["num_alloc_retries"] == 0  # no synchronising retry
    """, env={"PYTORCH_NPU_ALLOC_CONF": "garbage_collection_threshold:0.6", "NPU_SIM_MEMORY": "64M"})
