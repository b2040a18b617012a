"""Split-phase expert-parallel exchange (npu_moe_distribute_dispatch_setup / _teardown, npu_moe_distribute_combine_setup
/ _teardown) over 2 ranks (tests/dist_cases/moe_split.py), and their Meta kernels' upstream buffer shapes."""

import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu ops and their Meta kernels)
from dist_launch import check_all, run_ranks

E, BS, K, H, WORLD = 4, 5, 2, 8, 2


def meta(shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device="meta")


def test_split_dispatch_and_combine_equal_one_phase_ops():
    results = check_all(run_ranks("moe_split", timeout=180))
    for r in results:
        for name in ("split dispatch / combine", "split dispatch quant", "split overlapped", "split errors"):
            assert f"ok {name}\n" in r.out, repr(r)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("quant_mode,hs", [(0, 256), (2, 512)])
def test_meta_shapes(dtype, quant_mode, hs):
    x, ids = meta((BS, H), dtype), meta((BS, K), torch.int32)
    y, expand_idx, cmd = torch.ops.npu.npu_moe_distribute_dispatch_setup(x, ids, "g", WORLD, 0, E,
                                                                        quant_mode=quant_mode)
    assert y.shape == (BS * (K + 1), hs) and y.dtype == dtype
    assert expand_idx.shape == (BS * K,) and expand_idx.dtype == torch.int32
    assert cmd.shape == ((BS * (K + 1) + WORLD * (E // WORLD)) * 16,) and cmd.dtype == torch.int32
    a = BS * WORLD * min(E // WORLD, K)
    expand_x, dyn, assist, nums = torch.ops.npu.npu_moe_distribute_dispatch_teardown(
        x, y, ids, cmd, "g", WORLD, 0, E, quant_mode=quant_mode)
    assert expand_x.shape == (a, H) and expand_x.dtype == (torch.int8 if quant_mode == 2 else dtype)
    assert dyn.shape == (a,) and dyn.dtype == torch.float32
    assert assist.shape == (a * 128,) and assist.dtype == torch.int32
    assert nums.shape == (E // WORLD,) and nums.dtype == torch.int64
    expert_out = meta((a, H), dtype)
    qx, ccmd = torch.ops.npu.npu_moe_distribute_combine_setup(expert_out, ids, assist, "g", WORLD, 0, E)
    assert qx.shape == (a, 512) and qx.dtype == torch.int8
    assert ccmd.shape == ((a + WORLD) * 16,) and ccmd.dtype == torch.int32
    out = torch.ops.npu.npu_moe_distribute_combine_teardown(expert_out, qx, ids, expand_idx, meta((BS, K)), ccmd, "g",
                                                            WORLD, 0, E)
    assert out.shape == (BS, H) and out.dtype == dtype


def test_meta_global_bs_and_wide_rows():
    # global_bs sizes expand_x for ranks of different BS; H = 300 pads y's rows to 512 bytes (256 half words).
    x, ids = meta((3, 300), torch.bfloat16), meta((3, 4), torch.int32)
    y, _, cmd = torch.ops.npu.npu_moe_distribute_dispatch_setup(x, ids, "g", WORLD, 1, 8, shared_expert_num=0)
    assert y.shape == (12, 512) and cmd.shape == ((12 + 8) * 16,)
    expand_x, *_ = torch.ops.npu.npu_moe_distribute_dispatch_teardown(x, y, ids, cmd, "g", WORLD, 1, 8,
                                                                      shared_expert_num=0, global_bs=10)
    assert expand_x.shape == (10 * 4, 300)


def test_meta_errors():
    x, ids = meta((BS, H)), meta((BS, K), torch.int32)
    with pytest.raises(ValueError, match="multiple of ep_world_size"):
        torch.ops.npu.npu_moe_distribute_dispatch_setup(x, ids, "g", WORLD, 0, 3)
    with pytest.raises(ValueError, match="quant_mode must be 0"):
        torch.ops.npu.npu_moe_distribute_dispatch_setup(x, ids, "g", WORLD, 0, E, quant_mode=4)
    with pytest.raises(ValueError, match="y_dtype"):
        torch.ops.npu.npu_moe_distribute_dispatch_setup(x, ids, "g", WORLD, 0, E, y_dtype=1)
    with pytest.raises(TypeError, match="expert_ids must be int32"):
        torch.ops.npu.npu_moe_distribute_dispatch_setup(x, meta((BS, K), torch.int64), "g", WORLD, 0, E)
    with pytest.raises(ValueError, match="comm_quant_mode"):
        torch.ops.npu.npu_moe_distribute_combine_setup(meta((20, H)), ids, meta((20 * 128,), torch.int32), "g",
                                                       WORLD, 0, E, comm_quant_mode=2)
