"""Data-parallel training over hccl gives the parameters of single-process training on the global
batch: DDP (several buckets, find_unused_parameters, no_sync, fp16 / bf16 compression hooks), FSDP2
fully_shard (plain and with MixedPrecisionPolicy) and ZeroRedundancyOptimizer."""

from dist_launch import check_all, run_ranks


def test_ddp_fsdp2_and_zero_match_single_process_training():
    results = check_all(run_ranks("training", timeout=300))
    for name in ("ddp", "fsdp2", "zero", "all"):
        assert all(f"ok {name}\n" in r.out for r in results), results
    assert "parity ddp (several buckets)" in results[0].out
