"""npu_moe_distribute_dispatch_setup / _teardown and npu_moe_distribute_combine_setup / _teardown over a 2-rank
expert-parallel group: their outputs equal the one-phase npu_moe_distribute_dispatch / _combine for the same inputs,
and a CPU routing of every rank's tokens; dynamic int8 quantisation; two exchanges in flight at once; errors."""

import pytest
import torch
import torch.distributed as dist

import torch_npu
from common import LOCAL_RANK, RANK, WORLD, close, done, init
from moe_common import BS, E, H, K, LOCAL, check_expert_rows, stand_in_experts
from moe_common import inputs as moe_inputs

dev = init(device_id=torch.device("npu", LOCAL_RANK))
group = dist.distributed_c10d._get_default_group()._get_backend(torch.device("npu")).get_hccl_comm_name(RANK)
A = BS * WORLD * min(LOCAL, K)  # expand_x rows


def inputs(rank, dtype):
    return moe_inputs(rank, dtype, seed=300)


def split_dispatch(x, ids, **kw):
    setup_kw = {n: kw[n] for n in ("scales", "quant_mode") if n in kw}
    y, expand_idx, cmd = torch_npu.npu_moe_distribute_dispatch_setup(x, ids, group, WORLD, RANK, E, **setup_kw)
    teardown_kw = {n: kw[n] for n in ("quant_mode", "expert_token_nums_type") if n in kw}
    outs = torch_npu.npu_moe_distribute_dispatch_teardown(x, y, ids, cmd, group, WORLD, RANK, E, **teardown_kw)
    return (y, expand_idx, cmd), outs


def split_combine(processed, ids, expand_idx, assist, weights, **kw):
    quant_expand_x, cmd = torch_npu.npu_moe_distribute_combine_setup(processed, ids, assist, group, WORLD, RANK, E)
    out = torch_npu.npu_moe_distribute_combine_teardown(processed, quant_expand_x, ids, expand_idx, weights, cmd, group,
                                                        WORLD, RANK, E, **kw)
    return (quant_expand_x, cmd), out


def equal(actual, expected, what):
    actual, expected = actual.cpu(), expected.cpu()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, \
        f"{what}: {actual.dtype}{tuple(actual.shape)} != {expected.dtype}{tuple(expected.shape)}"
    assert torch.equal(actual, expected), f"{what}:\n{actual}\n!=\n{expected}"


for dtype in (torch.float32, torch.float16, torch.bfloat16):
    every = [inputs(r, dtype) for r in range(WORLD)]
    x, ids, weights = every[RANK]
    xd, idsd, wd = x.to(dev), ids.to(dev), weights.to(dev)
    one = torch_npu.npu_moe_distribute_dispatch(xd, idsd, group, WORLD, RANK, E)
    (y, expand_idx, cmd), (expand_x, dyn, assist, token_nums) = split_dispatch(xd, idsd)
    # Upstream's buffer shapes: y is (BS * (K + shared_expert_num), hs), rows padded to 512 bytes.
    assert y.shape == (BS * (K + 1), 256) and y.dtype == dtype, (y.shape, y.dtype)
    assert cmd.shape == ((BS * (K + 1) + WORLD * LOCAL) * 16,) and cmd.dtype == torch.int32
    assert assist.shape == (A * 128,) and assist.dtype == torch.int32
    assert dyn.shape == (A,) and dyn.dtype == torch.float32
    equal(expand_idx, one[2], f"expand_idx {dtype}")
    equal(expand_x, one[0], f"expand_x {dtype}")
    equal(token_nums, one[3], f"expert_token_nums {dtype}")
    counts, start = check_expert_rows(expand_x, token_nums, every, f"rows {dtype}")
    processed = stand_in_experts(expand_x, counts, start, dtype)  # the shared expert adds 1
    shared = torch.ones(BS, H, dtype=dtype)
    (qx, ccmd), out = split_combine(processed, idsd, expand_idx, assist, wd, shared_expert_x=shared.to(dev))
    assert qx.shape == (A, 512) and qx.dtype == torch.int8
    assert ccmd.shape == ((A + WORLD) * 16,) and ccmd.dtype == torch.int32
    one_out = torch_npu.npu_moe_distribute_combine(processed, idsd, one[2], one[4], wd, group, WORLD, RANK, E,
                                                   shared_expert_x=shared.to(dev))
    equal(out, one_out, f"combine {dtype}")
    expect = (x.double()[:, None, :] * (ids.double() + 1)[..., None] * weights.double()[..., None]).sum(1) + 1
    close(out, expect.to(dtype), f"combine vs CPU {dtype}")
done("split dispatch / combine")

# Dynamic int8 quantisation with per-expert smoothing scales, expert_token_nums as prefix sums: as dispatch.
x, ids, weights = inputs(RANK, torch.float16)
smooth = torch.linspace(0.5, 1.5, E * H).reshape(E, H).to(dev)
one = torch_npu.npu_moe_distribute_dispatch(x.to(dev), ids.to(dev), group, WORLD, RANK, E, scales=smooth,
                                            quant_mode=2, expert_token_nums_type=0)
(y, expand_idx, cmd), (q, dyn, assist, token_nums) = split_dispatch(x.to(dev), ids.to(dev), scales=smooth,
                                                                    quant_mode=2, expert_token_nums_type=0)
assert y.shape == (BS * (K + 1), 512) and y.dtype == torch.float16
equal(q, one[0], "quant expand_x")
received = int(token_nums.cpu()[-1])
equal(dyn, one[1], "quant dynamic_scales")
equal(token_nums, one[3], "quant expert_token_nums (prefix sums)")
every = [inputs(r, torch.float16) for r in range(WORLD)]
rows = torch.cat([torch.cat([xs[(i == RANK * LOCAL + j).any(1)].float() * smooth.cpu()[RANK * LOCAL + j]
                             for xs, i, _ in every]) for j in range(LOCAL)])
deq = q.cpu()[:received].float() * dyn.cpu()[:received, None]
torch.testing.assert_close(deq, rows, atol=rows.abs().max().item() / 100, rtol=0)
done("split dispatch quant")

# Two exchanges in flight: both setups, other work, then both teardowns (every rank in the same order).
x, ids, weights = inputs(RANK, torch.bfloat16)
x2 = (x.float() * 2).bfloat16()
ya, ia, ca = torch_npu.npu_moe_distribute_dispatch_setup(x.to(dev), ids.to(dev), group, WORLD, RANK, E)
yb, ib, cb = torch_npu.npu_moe_distribute_dispatch_setup(x2.to(dev), ids.to(dev), group, WORLD, RANK, E)
_ = torch.ones(4, 4, device=dev) @ torch.ones(4, 4, device=dev)
ea, _, aa, na = torch_npu.npu_moe_distribute_dispatch_teardown(x.to(dev), ya, ids.to(dev), ca, group, WORLD, RANK, E)
eb, _, ab, nb = torch_npu.npu_moe_distribute_dispatch_teardown(x2.to(dev), yb, ids.to(dev), cb, group, WORLD, RANK, E)
close(eb, (ea.cpu().float() * 2).bfloat16(), "second exchange")
equal(nb, na, "second exchange token counts")
qa, cca = torch_npu.npu_moe_distribute_combine_setup(ea, ids.to(dev), aa, group, WORLD, RANK, E)
qb, ccb = torch_npu.npu_moe_distribute_combine_setup(eb, ids.to(dev), ab, group, WORLD, RANK, E)
wd = weights.to(dev)
outb = torch_npu.npu_moe_distribute_combine_teardown(eb, qb, ids.to(dev), ib, wd, ccb, group, WORLD, RANK, E)
outa = torch_npu.npu_moe_distribute_combine_teardown(ea, qa, ids.to(dev), ia, wd, cca, group, WORLD, RANK, E)
close(outa, (x.double() * weights.double().sum(1, keepdim=True)).bfloat16(), "combine a")
close(outb, (x2.double() * weights.double().sum(1, keepdim=True)).bfloat16(), "combine b")
done("split overlapped")

# Errors are raised before any exchange, on every rank alike (so no rank waits for a peer that failed).
xd, idsd = x.to(dev), ids.to(dev)
with pytest.raises(ValueError, match="y_dtype"):
    torch_npu.npu_moe_distribute_dispatch_setup(xd, idsd, group, WORLD, RANK, E, quant_mode=2, y_dtype=2)
with pytest.raises(ValueError, match="quant_mode must be 0"):
    torch_npu.npu_moe_distribute_dispatch_setup(xd, idsd, group, WORLD, RANK, E, quant_mode=1)
with pytest.raises(ValueError, match="shared_expert_rank_num"):
    torch_npu.npu_moe_distribute_dispatch_setup(xd, idsd, group, WORLD, RANK, E, shared_expert_rank_num=1)
with pytest.raises(ValueError, match="is not this rank's"):
    torch_npu.npu_moe_distribute_dispatch_setup(xd, idsd, group, WORLD, 1 - RANK, E)
with pytest.raises(ValueError, match=r"expert_ids must be in \[0, 4\)"):
    torch_npu.npu_moe_distribute_dispatch_setup(xd, idsd + 4, group, WORLD, RANK, E)
with pytest.raises(ValueError, match="comm_cmd_info must be dispatch_setup's"):
    torch_npu.npu_moe_distribute_dispatch_teardown(xd, ya, idsd, cca, group, WORLD, RANK, E)
with pytest.raises(ValueError, match="comm_quant_mode"):
    torch_npu.npu_moe_distribute_combine_setup(ea, idsd, aa, group, WORLD, RANK, E, comm_quant_mode=2)
with pytest.raises(ValueError, match="assist_info_for_combine must be"):
    torch_npu.npu_moe_distribute_combine_setup(ea, idsd, ia, group, WORLD, RANK, E)
with pytest.raises(ValueError, match="x_active_mask"):
    torch_npu.npu_moe_distribute_combine_teardown(ea, qa, idsd, ia, weights.to(dev), cca, group, WORLD, RANK, E,
                                                  x_active_mask=torch.ones(BS, dtype=torch.bool, device=dev))
done("split errors")
dist.destroy_process_group()
