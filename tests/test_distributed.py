"""The hccl backend with 2 ranks: every collective against a CPU reference, async work and stream
order, groups, clear errors for bad input and disagreeing ranks, dead and silent ranks within the
timeout, and init / destroy without leaks. Each test is one 2-process job bounded by a hard timeout
(dist_launch.py kills the processes and shows their output when one fails or hangs)."""

import re

from dist_launch import check_all, run_ranks


def _ok(results, *names):
    for r in results:
        for name in names:
            assert f"ok {name}\n" in r.out, repr(r)


def test_every_collective_dtype_and_op():
    results = check_all(run_ranks("collectives", timeout=240))
    _ok(results, "all_reduce", "broadcast / reduce", "all_gather / gather / scatter", "reduce_scatter", "all_to_all",
        "send / recv", "coalesced / barrier", "object collectives", "async / stream order / lifetime", "groups", "all")


def test_collectives_with_synchronous_launch():
    """TASK_QUEUE_ENABLE=0: every task, collectives included, runs on the calling thread."""
    _ok(check_all(run_ranks("collectives", env={"TASK_QUEUE_ENABLE": "0"}, timeout=240)), "all")


def test_dtensor_fsdp_and_pipelining_modules():
    _ok(check_all(run_ranks("parallel_modules", timeout=180)), "dtensor npu ops", "fsdp fully_shard", "pipelining fx")


def test_uneven_all_gather_and_reduce_scatter():
    _ok(check_all(run_ranks("uneven", timeout=120)), "uneven")


def test_sync_batch_norm_and_stress_detect_over_ranks():
    _ok(check_all(run_ranks("sync_batch_norm", timeout=120)), "sync batch norm")


def test_bad_input_raises_on_the_calling_rank():
    _ok(check_all(run_ranks("bad_input", timeout=120)), "bad input")


def test_ranks_that_disagree_get_a_clear_error():
    results = check_all(run_ranks("mismatch", timeout=120))
    _ok(results, "mismatch")
    # HCCL_ASYNC_ERROR_HANDLING (on by default) prints each failure on the failing rank's stderr.
    assert "[rank 0] hccl all_reduce #1 in process group 1" in results[0].err


def test_mismatch_under_torch_distributed_debug_detail():
    _ok(check_all(run_ranks("mismatch", env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, timeout=120)),
        "mismatch (TORCH_DISTRIBUTED_DEBUG=DETAIL)")


def test_dead_rank_fails_the_others_within_the_timeout():
    survivor, dead = run_ranks("dead_rank", args=["crash"], timeout=90)
    assert dead.returncode == 3, repr(dead)
    assert survivor.returncode == 0, repr(survivor)
    seconds = float(re.search(r"dead-rank error after ([\d.]+)s", survivor.out).group(1))
    assert seconds < 30


def test_silent_rank_times_out_and_hccl_env_vars():
    waiting, silent = check_all(run_ranks("dead_rank", args=["silent"], timeout=90))
    assert "silent-rank error after" in waiting.out and "HCCL_EXEC_TIMEOUT error after" in waiting.out
    _ok([waiting, silent], "silent")


def test_init_destroy_cycles_release_threads_and_memory():
    _ok(check_all(run_ranks("cycles", timeout=180)), "cycles", "destroy flushes queued work")


def test_private_storage_formats_travel_in_base_format():
    _ok(check_all(run_ranks("formats", timeout=120)), "formats")
