"""The communication-fused ops over 2 ranks: matmuls with collectives and hccl group names
(tests/dist_cases/comm_matmul.py), expert-parallel dispatch / combine (tests/dist_cases/moe_distribute.py)."""

from dist_launch import check_all, run_ranks


def test_fused_matmul_collectives_equal_matmul_then_collective():
    results = check_all(run_ranks("comm_matmul", timeout=180))
    for r in results:
        for name in ("comm names", "fused float", "fused quant", "fused all_to_all", "fused errors"):
            assert f"ok {name}\n" in r.out, repr(r)


def test_moe_distribute_dispatch_and_combine():
    results = check_all(run_ranks("moe_distribute", timeout=180))
    for r in results:
        for name in ("dispatch / combine", "dispatch quant", "dispatch v2 / combine add rms norm", "alltoallv gmm",
                     "dispatch errors"):
            assert f"ok {name}\n" in r.out, repr(r)
