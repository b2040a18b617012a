"""The quantised communication-fused matmuls (npu_all_gather_quant_mm, npu_quant_mm_reduce_scatter,
npu_quant_matmul_all_to_all, npu_all_to_all_quant_matmul) over a 2-rank hccl group, each against the unfused quant
matmul + collective computed on the CPU (tests/op_refs/comm_quant.py) from every rank's inputs."""

import os
import sys

import pytest
import torch
import torch.distributed as dist

import torch_npu
from common import LOCAL_RANK, RANK, WORLD, close, data, done, init

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from op_refs import comm_quant as ref  # noqa: E402

dev = init(device_id=torch.device("npu", LOCAL_RANK))
hcom = dist.distributed_c10d._get_default_group()._get_backend(torch.device("npu")).get_hccl_comm_name(RANK)


def npu(t):
    return None if t is None else t.to(dev)


def device_op_count(name):
    return torch.npu.op_stats().get(name, {}).get("device_op", 0)


def scales(shape, seed):
    return [(data(r, torch.float32, shape=shape, seed=seed).abs() + 0.25) for r in range(WORLD)]


QUANT = (torch.int8, torch.float8_e4m3fn, torch.float8_e5m2)

# ---- npu_all_gather_quant_mm: (all_gather(x1) @ x2 dequantised + bias, all_gather(x1), empty amax) ----
for dtype in (torch.float16, torch.bfloat16):
    x1 = [data(r, dtype, shape=(4, 6), seed=1) for r in range(WORLD)]
    x2 = data(RANK, dtype, shape=(6, 5), seed=2)
    bias = data(9, dtype, shape=(5,), seed=3)
    y, gathered, amax = torch_npu.npu_all_gather_quant_mm(npu(x1[RANK]), npu(x2), hcom, WORLD, bias=npu(bias))
    ey, eg = ref.all_gather_quant_mm(x1, x2, bias=bias)
    close(y, ey, f"npu_all_gather_quant_mm {dtype}")
    close(gathered, eg, f"npu_all_gather_quant_mm gather_out {dtype}")
    assert amax.numel() == 0 and amax.dtype == torch.float32
for qtype in QUANT:
    for per_token in (False, True):
        for y_dtype in (torch.float16, torch.bfloat16, torch.float32):
            x1 = [data(r, qtype, shape=(4, 8), seed=4) for r in range(WORLD)]
            x2 = data(RANK, qtype, shape=(8, 6), seed=5)
            s1 = scales((4,) if per_token else (1,), 6)
            s2 = scales((6,), 7)[RANK]
            bias = data(3, torch.float32, shape=(6,), seed=8)
            before = device_op_count("aclnnQuantMatmulV4")
            y, gathered, _ = torch_npu.npu_all_gather_quant_mm(npu(x1[RANK]), npu(x2), hcom, WORLD, bias=npu(bias),
                                                               x1_scale=npu(s1[RANK]), x2_scale=npu(s2),
                                                               y_dtype=y_dtype)
            ey, eg = ref.all_gather_quant_mm(x1, x2, s1, s2, bias, y_dtype)
            close(y, ey, f"npu_all_gather_quant_mm {qtype} per_token={per_token} {y_dtype}")
            assert gathered.dtype == qtype and torch.equal(gathered.cpu().view(torch.uint8), eg.view(torch.uint8))
            if qtype == torch.int8:
                assert device_op_count("aclnnQuantMatmulV4") > before
_, empty, _ = torch_npu.npu_all_gather_quant_mm(npu(x1[RANK]), npu(x2), hcom, WORLD, x2_scale=npu(s2),
                                                y_dtype=torch.float16, gather_output=False)
assert empty.numel() == 0
done("all_gather_quant_mm")

# ---- npu_quant_mm_reduce_scatter: rows block RANK of sum over ranks of (x1 @ x2 dequantised + bias) ----
for dtype in (torch.float16, torch.bfloat16):
    x1 = [data(r, dtype, shape=(4, 6), seed=11) for r in range(WORLD)]
    x2 = [data(r, dtype, shape=(6, 5), seed=12) for r in range(WORLD)]
    bias = data(9, dtype, shape=(5,), seed=13)
    y, amax = torch_npu.npu_quant_mm_reduce_scatter(npu(x1[RANK]), npu(x2[RANK]), hcom, WORLD, bias=npu(bias))
    close(y, ref.quant_mm_reduce_scatter(x1, x2, RANK, bias=bias), f"npu_quant_mm_reduce_scatter {dtype}")
    assert amax.numel() == 0
for qtype in QUANT:
    for per_token in (False, True):
        for y_dtype in (torch.bfloat16, torch.float32):
            x1 = [data(r, qtype, shape=(4, 8), seed=14) for r in range(WORLD)]
            x2 = [data(r, qtype, shape=(8, 6), seed=15) for r in range(WORLD)]
            s1, s2 = scales((4,) if per_token else (1,), 16), scales((6,), 17)
            bias = data(2, torch.int32 if qtype == torch.int8 else torch.float32, shape=(6,), seed=18)
            y, _ = torch_npu.npu_quant_mm_reduce_scatter(npu(x1[RANK]), npu(x2[RANK]), hcom, WORLD, bias=npu(bias),
                                                         x1_scale=npu(s1[RANK]), x2_scale=npu(s2[RANK]),
                                                         y_dtype=y_dtype)
            close(y, ref.quant_mm_reduce_scatter(x1, x2, RANK, s1, s2, bias, y_dtype),
                  f"npu_quant_mm_reduce_scatter {qtype} per_token={per_token} {y_dtype}")
done("quant_mm_reduce_scatter")

# ---- npu_quant_matmul_all_to_all: rank r gets column block r of every rank's dequantised product ----
for qtype in QUANT:
    for y_dtype in (None, torch.float16, torch.bfloat16):
        x1 = [data(r, qtype, shape=(3, 8), seed=21) for r in range(WORLD)]
        x2 = [data(r, qtype, shape=(8, 2 * WORLD), seed=22) for r in range(WORLD)]
        s1, s2 = scales((3,), 23), scales((2 * WORLD,), 24)
        biases = [data(r, torch.float32, shape=(2 * WORLD,), seed=25) for r in range(WORLD)]
        y = torch_npu.npu_quant_matmul_all_to_all(npu(x1[RANK]), npu(x2[RANK]), hcom, WORLD, npu(biases[RANK]),
                                                  npu(s1[RANK]), npu(s2[RANK]), y_dtype=y_dtype)
        expect = ref.quant_matmul_all_to_all(x1, x2, RANK, s1, s2, biases, y_dtype or torch.float32)
        close(y, expect, f"npu_quant_matmul_all_to_all {qtype} {y_dtype}")
# per-tensor modes, upstream's explicit argument spelling
x1 = [data(r, torch.int8, shape=(2, 4), seed=26) for r in range(WORLD)]
x2 = [data(r, torch.int8, shape=(4, 2 * WORLD), seed=27) for r in range(WORLD)]
s1, s2 = scales((1,), 28), scales((1,), 29)
y = torch_npu.npu_quant_matmul_all_to_all(npu(x1[RANK]), npu(x2[RANK]), hcom, WORLD, None, npu(s1[RANK]),
                                          npu(s2[RANK]), None, None, None, 1, 1, 0, [0], [-1, -2], -1)
close(y, ref.quant_matmul_all_to_all(x1, x2, RANK, s1, s2), "npu_quant_matmul_all_to_all per tensor")
done("quant_matmul_all_to_all")

# ---- npu_all_to_all_quant_matmul: exchange float rows, quantise per row dynamically, dequantised matmul ----
for dtype in (torch.float16, torch.bfloat16):
    for qtype in (None, torch.float8_e4m3fn, torch.int8):
        x1 = [data(r, dtype, shape=(4, 3), seed=31) for r in range(WORLD)]
        wtype = torch.float8_e5m2 if qtype is None else qtype
        x2 = [data(r, wtype, shape=(3 * WORLD, 5), seed=32) for r in range(WORLD)]
        s2 = scales((5,), 33)
        biases = [data(r, torch.float32, shape=(5,), seed=34) for r in range(WORLD)]
        smooth = data(5, torch.float32, shape=(3 * WORLD,), seed=35).abs() + 0.5
        y, permuted = torch_npu.npu_all_to_all_quant_matmul(npu(x1[RANK]), npu(x2[RANK]), hcom, WORLD,
                                                            bias=npu(biases[RANK]), x1_scale=npu(smooth),
                                                            x2_scale=npu(s2[RANK]), x1_quant_dtype=qtype,
                                                            all2all_axes=[-2, -1])
        ey, ep = ref.all_to_all_quant_matmul(x1, x2, RANK, s2, biases, smooth, qtype or torch.float8_e5m2)
        close(permuted, ep, f"npu_all_to_all_quant_matmul all2all_out {dtype} {qtype}")
        close(y, ey, f"npu_all_to_all_quant_matmul {dtype} {qtype}")
y, empty = torch_npu.npu_all_to_all_quant_matmul(npu(x1[RANK]), npu(x2[RANK]), hcom, WORLD, x2_scale=npu(s2[RANK]),
                                                 x1_quant_dtype=torch.int8, all2all_out_flag=False,
                                                 y_dtype=torch.bfloat16)
assert empty.numel() == 0 and y.dtype == torch.bfloat16
done("all_to_all_quant_matmul")

a8, b8 = torch.ones(4, 6, dtype=torch.int8, device=dev), torch.ones(6, 5, dtype=torch.int8, device=dev)
s = torch.ones(5, device=dev)
with pytest.raises(ValueError, match="names no hccl group"):
    torch_npu.npu_all_gather_quant_mm(a8, b8, "no_such_group", WORLD, x2_scale=s, y_dtype=torch.float16)
with pytest.raises(ValueError, match="world_size 3"):
    torch_npu.npu_quant_mm_reduce_scatter(a8[:3], b8, hcom, 3, x2_scale=s, y_dtype=torch.float16)
done("comm quant errors")
dist.destroy_process_group()
