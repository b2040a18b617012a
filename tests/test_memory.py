"""npu memory: caching-allocator statistics, summary, device capacity, empty_cache, memory fraction, OOM."""

import gc

import pytest
import torch

from conftest import default_env, stall_stream

MiB = 2**20
BLOCK = 512  # the allocator rounds every request up to a multiple of 512 bytes


def _rounded(nbytes):
    return max(BLOCK, -(-nbytes // BLOCK) * BLOCK)


@pytest.mark.parametrize("nbytes", [1, 511, 512, 513, 4000, 100_000, MiB + 1, 3 * MiB])
def test_memory_allocated_grows_by_rounded_size_and_drops_after_del(quiet_allocator, nbytes):
    before = torch.npu.memory_allocated()
    x = torch.empty(nbytes, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_allocated() - before == _rounded(nbytes)
    assert torch.npu.memory_allocated(0) == torch.npu.memory_allocated()
    del x
    assert torch.npu.memory_allocated() == before


def test_empty_tensor_does_not_allocate(quiet_allocator):
    before = torch.npu.memory_allocated()
    stats = torch.npu.memory_stats()
    x = torch.empty(0, 5, device="npu")
    assert torch.npu.memory_allocated() == before
    assert torch.npu.memory_stats()["allocation.all.current"] == stats["allocation.all.current"]
    del x


def test_memory_allocated_counts_float_tensors_by_bytes(quiet_allocator):
    before = torch.npu.memory_allocated()
    x = torch.empty(1000, dtype=torch.float32, device="npu")
    y = torch.empty(1000, dtype=torch.float64, device="npu")
    assert torch.npu.memory_allocated() - before == _rounded(4000) + _rounded(8000)
    del x
    assert torch.npu.memory_allocated() - before == _rounded(8000)
    del y
    assert torch.npu.memory_allocated() == before


def test_views_do_not_allocate(quiet_allocator):
    x = torch.empty(64, 64, device="npu")
    before = torch.npu.memory_allocated()
    v = x.t()[::2]
    w = x.view(4096)
    assert torch.npu.memory_allocated() == before
    del v, w, x


def test_memory_is_per_device(quiet_allocator):
    before0 = torch.npu.memory_allocated(0)
    before1 = torch.npu.memory_allocated("npu:1")
    x = torch.empty(10_000, dtype=torch.uint8, device="npu:1")
    assert torch.npu.memory_allocated(torch.device("npu", 1)) - before1 == _rounded(10_000)
    assert torch.npu.memory_allocated(0) == before0
    del x
    assert torch.npu.memory_allocated(1) == before1


def test_memory_allocated_default_is_current_device(quiet_allocator):
    before2 = torch.npu.memory_allocated(2)
    with torch.npu.device(2):
        x = torch.empty(2048, dtype=torch.uint8, device="npu")
        assert torch.npu.memory_allocated() - before2 == 2048
    del x


def test_max_memory_allocated_and_reset_peak(quiet_allocator):
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    assert torch.npu.max_memory_allocated() == base
    x = torch.empty(2 * MiB, dtype=torch.uint8, device="npu")
    del x
    assert torch.npu.memory_allocated() == base
    assert torch.npu.max_memory_allocated() >= base + 2 * MiB
    assert torch.npu.max_memory_reserved() >= torch.npu.memory_reserved()
    torch.npu.reset_peak_memory_stats()
    assert torch.npu.max_memory_allocated() == base
    assert torch.npu.max_memory_reserved() == torch.npu.memory_reserved()


def test_memory_reserved_at_least_allocated(quiet_allocator):
    xs = [torch.empty(n, dtype=torch.uint8, device="npu") for n in (100, 5000, MiB, 3 * MiB)]
    assert torch.npu.memory_reserved() >= torch.npu.memory_allocated()
    assert torch.npu.memory_reserved() >= sum(_rounded(x.numel()) for x in xs)
    del xs


def test_memory_stats_keys_and_consistency(quiet_allocator):
    stats = torch.npu.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "active.all.current",
                "active_bytes.all.current", "reserved_bytes.all.current", "segment.all.current",
                "allocation.all.current", "requested_bytes.all.current", "num_ooms",
                "num_alloc_retries", "allocated_bytes.small_pool.current",
                "allocated_bytes.large_pool.current"):
        assert key in stats, key
        assert isinstance(stats[key], int)
    assert stats["allocated_bytes.all.current"] == torch.npu.memory_allocated()
    assert stats["reserved_bytes.all.current"] == torch.npu.memory_reserved()

    x = torch.empty(777, dtype=torch.uint8, device="npu")
    after = torch.npu.memory_stats()
    assert after["active.all.current"] == stats["active.all.current"] + 1
    assert after["allocation.all.current"] == stats["allocation.all.current"] + 1
    assert after["allocated_bytes.all.current"] == stats["allocated_bytes.all.current"] + _rounded(777)
    assert after["requested_bytes.all.current"] == stats["requested_bytes.all.current"] + 777
    assert after["allocated_bytes.small_pool.current"] == (
        stats["allocated_bytes.small_pool.current"] + _rounded(777))
    assert after["segment.all.current"] >= 1
    del x
    final = torch.npu.memory_stats()
    assert final["active.all.current"] == stats["active.all.current"]
    assert final["allocation.all.allocated"] == stats["allocation.all.allocated"] + 1
    assert final["allocation.all.freed"] == stats["allocation.all.freed"] + 1


def test_large_allocation_uses_large_pool(quiet_allocator):
    stats = torch.npu.memory_stats()
    x = torch.empty(2 * MiB, dtype=torch.uint8, device="npu")
    after = torch.npu.memory_stats()
    assert after["allocated_bytes.large_pool.current"] - stats["allocated_bytes.large_pool.current"] == 2 * MiB
    assert after["allocated_bytes.small_pool.current"] == stats["allocated_bytes.small_pool.current"]
    del x


def test_memory_stats_agree_with_torch_accelerator(quiet_allocator):
    x = torch.empty(1234, device="npu")
    assert torch.accelerator.memory_allocated(0) == torch.npu.memory_allocated(0)
    assert torch.accelerator.memory_reserved(0) == torch.npu.memory_reserved(0)
    del x


def test_reset_accumulated_memory_stats(quiet_allocator):
    x = torch.empty(10, device="npu")
    del x
    torch.npu.reset_accumulated_memory_stats()
    stats = torch.npu.memory_stats()
    assert stats["allocation.all.allocated"] == 0
    assert stats["allocation.all.freed"] == 0
    y = torch.empty(10, device="npu")
    assert torch.npu.memory_stats()["allocation.all.allocated"] == 1
    del y


def test_memory_summary():
    x = torch.empty(1000, device="npu")
    s = torch.npu.memory_summary()
    assert isinstance(s, str)
    assert "npu:0" in s
    s1 = torch.npu.memory_summary(device=1)
    assert "npu:1" in s1 and "npu:0" not in s1
    short = torch.npu.memory_summary(abbreviated=True)
    assert "npu:0" in short and len(short) < len(s)
    del x


def test_mem_get_info():
    free, total = torch.npu.mem_get_info()
    assert 0 < free <= total
    assert (free, total) == torch.npu.mem_get_info(0)
    assert torch.npu.mem_get_info(1)[1] == total
    if default_env():
        assert total == 16 * 2**30


def test_mem_get_info_free_tracks_reserved_memory(quiet_allocator):
    torch.npu.empty_cache()
    free0, total = torch.npu.mem_get_info()
    x = torch.empty(12 * MiB, dtype=torch.uint8, device="npu")
    free1, _ = torch.npu.mem_get_info()
    assert free0 - free1 >= 12 * MiB
    del x
    torch.npu.empty_cache()
    free2, _ = torch.npu.mem_get_info()
    assert free2 - free1 >= 12 * MiB


def test_empty_cache_lowers_memory_reserved(quiet_allocator):
    torch.npu.empty_cache()
    r0 = torch.npu.memory_reserved()
    x = torch.empty(12 * MiB, dtype=torch.uint8, device="npu")
    r1 = torch.npu.memory_reserved()
    assert r1 - r0 >= 12 * MiB
    del x
    assert torch.npu.memory_reserved() == r1  # freed memory stays cached ...
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() <= r0  # ... until empty_cache returns it
    assert r1 - torch.npu.memory_reserved() >= 12 * MiB


def test_empty_cache_keeps_live_tensors_intact(quiet_allocator):
    a = torch.randn(300, 300)
    x = a.npu()
    tmp = torch.empty(4 * MiB, dtype=torch.uint8, device="npu")
    del tmp
    torch.npu.empty_cache()
    assert torch.equal(x.cpu(), a)
    assert torch.npu.memory_reserved() >= torch.npu.memory_allocated()


def test_cached_block_is_reused(quiet_allocator):
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="npu")
    r = torch.npu.memory_reserved()
    del x
    y = torch.empty(3 * MiB, dtype=torch.uint8, device="npu")
    assert torch.npu.memory_reserved() == r
    del y


def test_memory_allocated_drops_after_del_with_queued_work(quiet_allocator):
    stall_stream()  # the fill below stays queued for a while
    before = torch.npu.memory_allocated()
    x = torch.full((3 * MiB,), 1.0, device="npu")  # the fill is queued behind the stall
    reserved = torch.npu.memory_reserved()
    del x
    assert torch.npu.memory_allocated() == before
    y = torch.empty(3 * MiB, dtype=torch.float32, device="npu")  # reuses the freed block, in order
    assert torch.npu.memory_reserved() == reserved
    del y


def test_freed_tensors_with_queued_work_do_not_exhaust_memory_in_subprocess(run_python):
    run_python(
        """
        import torch
        MiB = 2 ** 20
        src = torch.empty(2048, 2048, device="npu")
        dst = torch.empty(2048, 2048, device="npu")
        for _ in range(3):
            dst.copy_(src.t())  # some tens of ms of queued work ahead of the loop
        for i in range(6):
            x = torch.full((5 * MiB,), 1.0, device="npu")  # 20 MiB; only one alive at a time
            del x
        torch.npu.synchronize()
        assert torch.npu.memory_stats()["num_ooms"] == 0
        print("OK")
        """,
        env={"NPU_SIM_MEMORY": "128M"},
    )


@pytest.mark.parametrize("fraction", [-0.5, 1.5, 2.0])
def test_set_per_process_memory_fraction_invalid_value(fraction):
    with pytest.raises(ValueError, match="Invalid fraction value"):
        torch.npu.set_per_process_memory_fraction(fraction)


@pytest.mark.parametrize("fraction", ["0.5", 1, 0])
def test_set_per_process_memory_fraction_invalid_type(fraction):
    # As torch.cuda: a float, even for 0 and 1.
    with pytest.raises(TypeError, match="must be `float`"):
        torch.npu.set_per_process_memory_fraction(fraction)


def test_memory_fraction_zero_allows_nothing_and_huge_requests_fail_clearly():
    torch.npu.empty_cache()
    try:
        torch.npu.set_per_process_memory_fraction(0.0)
        # Bigger than any cached block: it needs a new reservation, which the limit refuses.
        with pytest.raises(torch.OutOfMemoryError, match="per-process limit"):
            torch.empty(256 << 20, dtype=torch.uint8, device="npu")
    finally:
        torch.npu.set_per_process_memory_fraction(1.0)
    with pytest.raises(torch.OutOfMemoryError, match="more than 1EB"):
        torch.empty(1 << 61, dtype=torch.uint8, device="npu")


def test_memory_functions_reject_invalid_device():
    for fn in (torch.npu.memory_allocated, torch.npu.memory_reserved, torch.npu.memory_stats,
               torch.npu.mem_get_info, torch.npu.max_memory_allocated):
        with pytest.raises(RuntimeError, match="does not exist"):
            fn(99)


def test_memory_fraction_limits_allocation_in_subprocess(run_python):
    run_python(
        """
        import torch
        MiB = 2 ** 20
        assert torch.npu.mem_get_info() == (64 * MiB, 64 * MiB), torch.npu.mem_get_info()
        torch.npu.set_per_process_memory_fraction(0.5)
        # more than half of the device at once is refused
        try:
            torch.empty(40 * MiB, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError as e:
            assert "out of memory" in str(e).lower(), str(e)
        else:
            raise AssertionError("40 MiB must exceed the 0.5 fraction of 64 MiB")
        # below the cap works; two such tensors together exceed it
        a = torch.empty(20 * MiB, dtype=torch.uint8, device="npu")
        try:
            b = torch.empty(20 * MiB, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError:
            pass
        else:
            raise AssertionError("40 MiB in total must exceed the 0.5 fraction of 64 MiB")
        # other devices are not limited
        c = torch.empty(40 * MiB, dtype=torch.uint8, device="npu:1")
        # freeing makes room again, and the process keeps computing correctly
        del a
        torch.npu.empty_cache()
        d = torch.empty(24 * MiB, dtype=torch.uint8, device="npu")
        x = torch.randn(8, 8)
        assert torch.equal((x.npu() * 3).cpu(), x * 3)
        try:
            torch.npu.set_per_process_memory_fraction(1.5)
        except ValueError:
            pass
        else:
            raise AssertionError("fraction 1.5 must be rejected")
        print("OK")
        """,
        env={"NPU_SIM_MEMORY": "64M"},
    )


def test_out_of_memory_beyond_device_capacity_in_subprocess(run_python):
    proc = run_python(
        """
        import torch
        MiB = 2 ** 20
        free, total = torch.npu.mem_get_info()
        assert total == 64 * MiB, total
        x = torch.randn(16, 16)
        keep = x.npu()
        try:
            torch.empty(100 * MiB, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError as e:
            msg = str(e)
            assert isinstance(e, RuntimeError)
            assert "out of memory" in msg.lower(), msg
            assert "memory summary" in msg.lower() and "npu:0" in msg, msg
            assert "allocated" in msg and "reserved" in msg, msg
        else:
            raise AssertionError("100 MiB on a 64 MiB device must fail")
        stats = torch.npu.memory_stats()
        assert stats["num_ooms"] == 1, stats["num_ooms"]
        # the process stays usable
        assert torch.equal(keep.cpu(), x)
        y = torch.randn(32, 32)
        z = y.npu()
        torch.testing.assert_close((z @ z + 1).cpu(), y @ y + 1)
        small = [torch.ones(1000, device="npu") for _ in range(10)]
        assert all(torch.equal(s.cpu(), torch.ones(1000)) for s in small)
        # memory cached from freed tensors is given back and reused when a big request needs it
        big = torch.empty(40 * MiB, dtype=torch.uint8, device="npu")
        del big
        big2 = torch.empty(50 * MiB, dtype=torch.uint8, device="npu")
        del big2
        assert torch.npu.memory_stats()["num_ooms"] == 1
        print("OK")
        """,
        env={"NPU_SIM_MEMORY": "64M"},
    )
    assert proc.stdout.strip().endswith("OK")
