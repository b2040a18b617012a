"""The communication-fused matmuls and hccl group names over 2 ranks (tests/dist_cases/comm_matmul.py)."""

from dist_launch import check_all, run_ranks


def test_fused_matmul_collectives_equal_matmul_then_collective():
    results = check_all(run_ranks("comm_matmul", timeout=180))
    for r in results:
        for name in ("comm names", "fused float", "fused quant", "fused all_to_all", "fused errors"):
            assert f"ok {name}\n" in r.out, repr(r)
