"""The communication-fused matmuls (npu_mm_all_reduce_base, npu_all_gather_base_mm, npu_mm_reduce_scatter_base)
over a 2-rank hccl group, each against the unfused matmul + collective computed on the CPU from every rank's
inputs; the group names they are given (get_hccl_comm_name / _set_hccl_comm_name); Meta shapes and errors."""

import pytest
import torch
import torch.distributed as dist

import torch_npu
from common import LOCAL_RANK, RANK, WORLD, close, data, done, init

dev = init(device_id=torch.device("npu", LOCAL_RANK))
backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("npu"))
hcom = backend.get_hccl_comm_name(RANK)
assert hcom and backend.get_hccl_comm_name(RANK) == hcom  # stable
assert torch_npu.distributed._is_support_hccl_comm_name()

named = dist.new_group()._get_backend(torch.device("npu"))
named._set_hccl_comm_name("tp_group")
named._set_hccl_comm_name("tp_group")  # the same name again is fine
assert named.get_hccl_comm_name(RANK) == "tp_group"
with pytest.raises(RuntimeError, match="already named"):
    named._set_hccl_comm_name("other")
with pytest.raises(RuntimeError, match="empty"):
    dist.new_group()._get_backend(torch.device("npu"))._set_hccl_comm_name("")
with pytest.raises(RuntimeError, match="at most 127"):
    dist.new_group()._get_backend(torch.device("npu"))._set_hccl_comm_name("x" * 128)
done("comm names")

for dtype in (torch.float32, torch.float16, torch.bfloat16):
    x1 = [data(r, dtype, shape=(4, 6), seed=1) for r in range(WORLD)]
    x2 = [data(r, dtype, shape=(6, 5), seed=2) for r in range(WORLD)]
    bias, x3 = data(9, dtype, shape=(5,), seed=3), data(8, dtype, shape=(4, 5), seed=4)
    # all_reduce(x1 @ x2 + bias + x3): every rank adds its bias and x3 before the sum.
    got = torch_npu.npu_mm_all_reduce_base(x1[RANK].to(dev), x2[RANK].to(dev), hcom, reduce_op="sum",
                                           bias=bias.to(dev), x3=x3.to(dev))
    expect = sum(a.double() @ b.double() + bias.double() + x3.double() for a, b in zip(x1, x2)).to(dtype)
    close(got, expect, f"npu_mm_all_reduce_base {dtype}")
    got3 = torch_npu.npu_mm_all_reduce_base(x1[RANK].reshape(2, 2, 6).to(dev), x2[RANK].to(dev), "tp_group")
    close(got3, sum(a.double() @ b.double() for a, b in zip(x1, x2)).to(dtype).reshape(2, 2, 5),
          f"npu_mm_all_reduce_base 3-d on a named group {dtype}")
    # (all_gather(x1) @ x2 + bias, all_gather(x1))
    out, gathered = torch_npu.npu_all_gather_base_mm(x1[RANK].to(dev), x2[RANK].to(dev), hcom, WORLD,
                                                     bias=bias.to(dev))
    close(gathered, torch.cat(x1), f"npu_all_gather_base_mm gather_out {dtype}")
    close(out, (torch.cat(x1).double() @ x2[RANK].double() + bias.double()).to(dtype), f"npu_all_gather_base_mm {dtype}")
    out, empty = torch_npu.npu_all_gather_base_mm(x1[RANK].to(dev), x2[RANK].to(dev), hcom, WORLD, gather_output=False)
    assert empty.numel() == 0
    # reduce_scatter(x1 @ x2 + bias): rank r keeps rows [r * m / world, (r + 1) * m / world).
    got = torch_npu.npu_mm_reduce_scatter_base(x1[RANK].to(dev), x2[RANK].to(dev), hcom, WORLD, bias=bias.to(dev))
    full = sum(a.double() @ b.double() + bias.double() for a, b in zip(x1, x2)).to(dtype)
    close(got, full.chunk(WORLD)[RANK], f"npu_mm_reduce_scatter_base {dtype}")
done("fused float")

# Weight-dequantised all-reduce: x1 @ ((x2 + offset) * scale), int8 weights.
xf = [data(r, torch.float16, shape=(3, 8), seed=5) for r in range(WORLD)]
w8 = [data(r, torch.int8, shape=(8, 4), seed=6) for r in range(WORLD)]
scale, offset = torch.full((4,), 0.5, dtype=torch.float16), torch.ones(4, dtype=torch.float16)
got = torch_npu.npu_mm_all_reduce_base(xf[RANK].to(dev), w8[RANK].to(dev), hcom, antiquant_scale=scale.to(dev),
                                       antiquant_offset=offset.to(dev))
expect = sum(a.float() @ ((b.float() + 1) * 0.5) for a, b in zip(xf, w8)).half()
close(got, expect, "npu_mm_all_reduce_base antiquant")
# int8 x int8 with a per-channel float32 scale and per-token scales: float16 output.
q1 = [data(r, torch.int8, shape=(4, 8), seed=7) for r in range(WORLD)]
q2 = [data(r, torch.int8, shape=(8, 6), seed=8) for r in range(WORLD)]
dq, pt = torch.linspace(0.1, 0.6, 6), torch.linspace(0.5, 2.0, 4)
got = torch_npu.npu_mm_all_reduce_base(q1[RANK].to(dev), q2[RANK].to(dev), hcom, dequant_scale=dq.to(dev),
                                       pertoken_scale=pt.to(dev))
expect = sum((a.double() @ b.double()) * dq.double() * pt.double()[:, None] for a, b in zip(q1, q2)).half()
close(got, expect, "npu_mm_all_reduce_base int8")
out, _ = torch_npu.npu_all_gather_base_mm(q1[RANK].to(dev), q2[RANK].to(dev), hcom, WORLD, x2_scale=dq.to(dev),
                                          x1_scale=pt.to(dev), output_dtype=torch.bfloat16)
expect = ((torch.cat(q1).double() @ q2[RANK].double()) * dq.double() * pt.repeat(WORLD).double()[:, None])
close(out, expect.to(torch.bfloat16), "npu_all_gather_base_mm int8")
done("fused quant")

# all_to_all then matmul: rank r gets block r of every rank's x1 rows, side by side, times x2.
for dtype in (torch.float16, torch.bfloat16):
    xs = [data(r, dtype, shape=(4, 3), seed=10) for r in range(WORLD)]
    w = data(0, dtype, shape=(3 * WORLD, 5), seed=11)
    bias = data(1, torch.float32 if dtype == torch.bfloat16 else dtype, shape=(5,), seed=12)
    out, permuted = torch_npu.npu_all_to_all_matmul(xs[RANK].to(dev), w.to(dev), hcom, WORLD, bias=bias.to(dev))
    mine = torch.cat([x.view(WORLD, 4 // WORLD, 3)[RANK] for x in xs], dim=1)
    close(permuted, mine, f"npu_all_to_all_matmul all2all_out {dtype}")
    close(out, (mine.double() @ w.double() + bias.double()).to(dtype), f"npu_all_to_all_matmul {dtype}")
    # matmul then all_to_all: rank r gets column block r of every rank's product, rows stacked by rank.
    w2 = data(2, dtype, shape=(3, 2 * WORLD), seed=13)
    got = torch_npu.npu_matmul_all_to_all(xs[RANK].to(dev), w2.to(dev), hcom, WORLD)
    expect = torch.cat([(x.double() @ w2.double()).to(dtype)[:, 2 * RANK:2 * RANK + 2] for x in xs])
    close(got, expect, f"npu_matmul_all_to_all {dtype}")
assert torch.ops.npu.npu_matmul_all_to_all(torch.empty(4, 3, device="meta"), torch.empty(3, 4, device="meta"), hcom,
                                           2).shape == (8, 2)
done("fused all_to_all")

meta = torch.ops.npu.npu_all_gather_base_mm(torch.empty(4, 6, device="meta"), torch.empty(6, 5, device="meta"), hcom, 2)
assert meta[0].shape == (8, 5) and meta[1].shape == (8, 6)
assert torch.ops.npu.npu_mm_reduce_scatter_base(torch.empty(4, 6, device="meta"), torch.empty(6, 5, device="meta"),
                                                hcom, 2).shape == (2, 5)
a, b = torch.ones(4, 6, device=dev), torch.ones(6, 5, device=dev)
with pytest.raises(ValueError, match="names no hccl group"):
    torch_npu.npu_mm_all_reduce_base(a, b, "no_such_group")
with pytest.raises(ValueError, match="reduce_op must be 'sum'"):
    torch_npu.npu_mm_all_reduce_base(a, b, hcom, reduce_op="max")
with pytest.raises(ValueError, match="world_size 3"):
    torch_npu.npu_mm_reduce_scatter_base(a, b, hcom, 3)
with pytest.raises(ValueError, match="do not multiply"):
    torch_npu.npu_all_gather_base_mm(a, a, hcom, WORLD)
done("fused errors")
dist.destroy_process_group()
