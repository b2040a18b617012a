"""npu_moe_distribute_dispatch / npu_moe_distribute_combine over a 2-rank expert-parallel group: the tokens each rank
receives per local expert (against a CPU routing of every rank's tokens), a stand-in expert per expert id, and the
weighted sum combine returns to each token's rank; dynamic int8 quantisation; Meta shapes and errors."""

import pytest
import torch
import torch.distributed as dist

import torch_npu
from common import LOCAL_RANK, RANK, WORLD, close, done, init
from moe_common import BS, E, H, K, LOCAL, check_expert_rows, stand_in_experts
from moe_common import inputs as moe_inputs

dev = init(device_id=torch.device("npu", LOCAL_RANK))
group = dist.distributed_c10d._get_default_group()._get_backend(torch.device("npu")).get_hccl_comm_name(RANK)


def inputs(rank, dtype):
    return moe_inputs(rank, dtype, seed=100)


for dtype in (torch.float32, torch.float16, torch.bfloat16):
    every = [inputs(r, dtype) for r in range(WORLD)]
    x, ids, weights = every[RANK]
    expand_x, dyn, expand_idx, token_nums, recv_counts, tp_counts, expand_scales = \
        torch_npu.npu_moe_distribute_dispatch(x.to(dev), ids.to(dev), group, WORLD, RANK, E,
                                              expert_scales=weights.to(dev))
    assert expand_x.shape == (BS * WORLD * min(LOCAL, K), H) and expand_x.dtype == dtype
    assert expand_idx.dtype == torch.int32 and expand_idx.shape == (BS * K,) and dyn.numel() == 0
    assert token_nums.dtype == torch.int64 and token_nums.shape == (LOCAL,)
    counts, start = check_expert_rows(expand_x, token_nums, every, f"dispatch rows {dtype}")
    processed = stand_in_experts(expand_x, counts, start, dtype)
    shared = torch.ones(BS, H, dtype=dtype)
    out = torch_npu.npu_moe_distribute_combine(processed, ids.to(dev), expand_idx, recv_counts, weights.to(dev), group,
                                               WORLD, RANK, E, shared_expert_x=shared.to(dev))
    expect = (x.double()[:, None, :] * (ids.double() + 1)[..., None] * weights.double()[..., None]).sum(1) + 1
    close(out, expect.to(dtype), f"combine {dtype}")
done("dispatch / combine")

# Dynamic int8 quantisation with per-expert smoothing scales: expand_x * dynamic_scales ~ x * scales[e].
x, ids, weights = inputs(RANK, torch.float16)
smooth = torch.linspace(0.5, 1.5, E * H).reshape(E, H)
q, dyn, *_ = torch_npu.npu_moe_distribute_dispatch(x.to(dev), ids.to(dev), group, WORLD, RANK, E, scales=smooth.to(dev),
                                                   quant_mode=2, expert_token_nums_type=0)
assert q.dtype == torch.int8 and dyn.shape == (q.shape[0],)
every = [inputs(r, torch.float16) for r in range(WORLD)]
rows = []
for j in range(LOCAL):
    e = RANK * LOCAL + j
    rows.append(torch.cat([xs[(i == e).any(1)].float() * smooth[e] for xs, i, _ in every]))
rows = torch.cat(rows)
deq = q.cpu()[:rows.shape[0]].float() * dyn.cpu()[:rows.shape[0], None]
torch.testing.assert_close(deq, rows, atol=rows.abs().max().item() / 100, rtol=0)
done("dispatch quant")

# v2 and combine + add + RMS norm: the same exchange, then y = (combine + residual) / rms * gamma.
x, ids, weights = inputs(RANK, torch.bfloat16)
every = [inputs(r, torch.bfloat16) for r in range(WORLD)]
expand_x, _, assist, token_nums, recv_counts, _, _ = torch_npu.npu_moe_distribute_dispatch_v2(
    x.to(dev), ids.to(dev), group, WORLD, RANK, E, expert_scales=weights.to(dev))
combined = torch_npu.npu_moe_distribute_combine_v2(expand_x, ids.to(dev), assist, recv_counts, weights.to(dev), group,
                                                   WORLD, RANK, E)
close(combined, (x.double() * weights.double().sum(1, keepdim=True)).to(torch.bfloat16), "combine_v2")
residual, gamma = torch.randn(BS, 1, H).bfloat16(), torch.rand(H).bfloat16()
y, rstd, added = torch_npu.npu_moe_distribute_combine_add_rms_norm(
    expand_x, ids.to(dev), assist, recv_counts, weights.to(dev), residual.to(dev), gamma.to(dev), group, WORLD, RANK, E)
ref_sum = x.float()[:, None, :] * weights.float().sum(1)[:, None, None] + residual.float()
ref_rstd = torch.rsqrt(ref_sum.pow(2).mean(-1, keepdim=True) + 1e-6)
close(added, ref_sum.bfloat16(), "combine_add_rms_norm x")
close(rstd, ref_rstd, "combine_add_rms_norm rstd")
close(y, (ref_sum * ref_rstd * gamma.float()).bfloat16(), "combine_add_rms_norm y")
with pytest.raises(ValueError, match="zero, copy and constant experts"):
    torch_npu.npu_moe_distribute_dispatch_v2(x.to(dev), ids.to(dev), group, WORLD, RANK, E, zero_expert_num=1)
done("dispatch v2 / combine add rms norm")

# all_to_all_v + grouped matmul and back: rank r sends c(r, d, j) rows to rank d's local expert j.
e, H1, N1 = 2, 6, 3
def count(src, dst, j):
    return (src + 2 * dst + j) % 3 + 1
send = [count(RANK, d, j) for d in range(WORLD) for j in range(e)]
recv = [count(s, RANK, j) for s in range(WORLD) for j in range(e)]
rows = {s: data_rows for s, data_rows in ((s, torch.randn(sum(count(s, d, j) for d in range(WORLD) for j in range(e)), H1,
                                                            generator=torch.Generator().manual_seed(50 + s)).half())
                                          for s in range(WORLD))}
weights = torch.randn(WORLD, e, H1, N1, generator=torch.Generator().manual_seed(7)).half()  # rank d's experts
shared_x, shared_w = torch.randn(3, 4).half(), torch.randn(5, 4).half()
gmm_y, mm_y, permuted = torch_npu.npu_alltoallv_gmm(rows[RANK].to(dev), weights[RANK].to(dev), group, WORLD, send, recv,
                                                    mm_x=shared_x.to(dev), mm_weight=shared_w.to(dev),
                                                    trans_mm_weight=True, permute_out_flag=True)
def block(s, d, j):  # the rows rank s sends to rank d's expert j
    start = sum(count(s, dd, jj) for dd in range(WORLD) for jj in range(e) if (dd, jj) < (d, j))
    return rows[s][start:start + count(s, d, j)]
mine = torch.cat([block(s, RANK, j) for j in range(e) for s in range(WORLD)])
close(permuted, mine, "alltoallv_gmm permute_out")
expect = torch.cat([torch.cat([block(s, RANK, j) for s in range(WORLD)]).float() @ weights[RANK, j].float()
                    for j in range(e)])
close(gmm_y, expect.half(), "alltoallv_gmm gmm_y")
close(mm_y, (shared_x.float() @ shared_w.float().t()).half(), "alltoallv_gmm mm_y")
# Back: each rank's experts' rows (expert-major) return to their source ranks in the order they were sent.
y, _ = torch_npu.npu_gmm_alltoallv(permuted, torch.eye(H1).half().expand(e, H1, H1).contiguous().to(dev), group, WORLD,
                                   recv, send)
close(y, rows[RANK], "gmm_alltoallv round trip")
# Per-tensor float8: gmm_y = x_scale * w_scale * (x @ w), exchanged as the same bytes.
q_rows = rows[RANK].float().clamp(-4, 4).to(torch.float8_e4m3fn)
q_weights = (weights[RANK].float() / 4).to(torch.float8_e4m3fn)
xs, ws = torch.tensor([0.5]), torch.tensor([2.0])
gmm_y, _, permuted = torch_npu.npu_alltoallv_quant_gmm(q_rows.to(dev), q_weights.to(dev), xs.to(dev), ws.to(dev), group,
                                                       WORLD, send, recv, torch.bfloat16, permute_out_flag=True)
assert permuted.dtype == torch.float8_e4m3fn and gmm_y.dtype == torch.bfloat16
every_q = {s: rows[s].float().clamp(-4, 4).to(torch.float8_e4m3fn) for s in range(WORLD)}
def q_block(s, d, j):
    start = sum(count(s, dd, jj) for dd in range(WORLD) for jj in range(e) if (dd, jj) < (d, j))
    return every_q[s][start:start + count(s, d, j)]
expect = torch.cat([torch.cat([q_block(s, RANK, j) for s in range(WORLD)]).float() @ q_weights[j].float()
                    for j in range(e)]) * 1.0
close(gmm_y, expect.bfloat16(), "alltoallv_quant_gmm")
back, _ = torch_npu.npu_quant_gmm_alltoallv(permuted, torch.eye(H1).to(torch.float8_e4m3fn).expand(e, H1, H1)
                                            .contiguous().to(dev), torch.ones(1).to(dev), torch.ones(1).to(dev), group,
                                            WORLD, recv, send, torch.float32)
close(back, q_rows.float(), "quant_gmm_alltoallv round trip")
with pytest.raises(ValueError, match="per-tensor"):
    torch_npu.npu_alltoallv_quant_gmm(q_rows.to(dev), q_weights.to(dev), xs.to(dev), ws.to(dev), group, WORLD, send,
                                      recv, torch.bfloat16, gmm_x_quant_mode=6)
done("alltoallv gmm")

meta = torch.ops.npu.npu_moe_distribute_dispatch(torch.empty(BS, H, device="meta"),
                                                 torch.empty(BS, K, dtype=torch.int32, device="meta"), group, WORLD,
                                                 RANK, E)
assert meta[0].shape == (BS * WORLD * min(LOCAL, K), H) and meta[3].shape == (LOCAL,)
with pytest.raises(ValueError, match="multiple of ep_world_size"):
    torch_npu.npu_moe_distribute_dispatch(x.to(dev), ids.to(dev), group, WORLD, RANK, 3)
with pytest.raises(ValueError, match="shared_expert_rank_num"):
    torch_npu.npu_moe_distribute_dispatch(x.to(dev), ids.to(dev), group, WORLD, RANK, E, shared_expert_rank_num=1)
with pytest.raises(ValueError, match=r"expert_ids must be in \[0, 4\)"):
    torch_npu.npu_moe_distribute_dispatch(x.to(dev), (ids + 4).to(dev), group, WORLD, RANK, E)
done("dispatch errors")
dist.destroy_process_group()
