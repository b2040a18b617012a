"""The quantised communication-fused matmuls: over 2 ranks against the unfused quant matmul + collective
(tests/dist_cases/comm_quant_matmul.py); here, without a process group, their Meta kernels and argument errors."""

import pytest
import torch

import torch_npu
from dist_launch import check_all, run_ranks

HIFLOAT8 = 256 + 34  # torch_npu's hifloat8 code (aclDataType + 256)
FLOAT4_E2M1 = 256 + 40
FLOAT8_E8M0 = 256 + 37


def test_comm_quant_matmuls_equal_quant_matmul_then_collective():
    results = check_all(run_ranks("comm_quant_matmul", timeout=240))
    for r in results:
        for name in ("all_gather_quant_mm", "quant_mm_reduce_scatter", "quant_matmul_all_to_all",
                     "all_to_all_quant_matmul", "comm quant errors"):
            assert f"ok {name}\n" in r.out, repr(r)


def meta(shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device="meta")


@pytest.mark.parametrize("qtype", [torch.int8, torch.float8_e4m3fn, torch.float8_e5m2])
def test_meta_shapes(qtype):
    y, g, amax = torch.ops.npu.npu_all_gather_quant_mm(meta((4, 8), qtype), meta((8, 6), qtype), "g", 2,
                                                       x2_scale=meta((6,)), y_dtype=torch.bfloat16)
    assert (y.shape, y.dtype, g.shape, g.dtype, amax.shape) == ((8, 6), torch.bfloat16, (8, 8), qtype, (0,))
    _, g, _ = torch.ops.npu.npu_all_gather_quant_mm(meta((4, 8), qtype), meta((8, 6), qtype), "g", 2,
                                                    x2_scale=meta((6,)), y_dtype=torch.float32, gather_output=False)
    assert g.numel() == 0
    y, amax = torch.ops.npu.npu_quant_mm_reduce_scatter(meta((4, 8), qtype), meta((8, 6), qtype), "g", 2,
                                                        x2_scale=meta((6,)), y_dtype=torch.float16)
    assert (y.shape, y.dtype, amax.shape, amax.dtype) == ((2, 6), torch.float16, (0,), torch.float32)
    y = torch.ops.npu.npu_quant_matmul_all_to_all(meta((3, 8), qtype), meta((8, 4), qtype), "g", 2, None,
                                                  meta((3,)), meta((4,)))
    assert (y.shape, y.dtype) == ((6, 2), torch.float32)
    wtype = torch.float8_e5m2 if qtype != torch.int8 else torch.int8
    y, p = torch.ops.npu.npu_all_to_all_quant_matmul(meta((4, 3), torch.bfloat16), meta((6, 5), wtype), "g", 2,
                                                     x2_scale=meta((5,)), x1_quant_dtype=wtype, y_dtype=torch.float16)
    assert (y.shape, y.dtype, p.shape, p.dtype) == ((2, 5), torch.float16, (2, 6), torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_meta_float_forms_keep_dtype(dtype):
    y, g, _ = torch.ops.npu.npu_all_gather_quant_mm(meta((4, 8), dtype), meta((8, 6), dtype), "g", 2)
    assert (y.shape, y.dtype, g.shape) == ((8, 6), dtype, (8, 8))
    y, _ = torch.ops.npu.npu_quant_mm_reduce_scatter(meta((4, 8), dtype), meta((8, 6), dtype), "g", 2)
    assert (y.shape, y.dtype) == ((2, 6), dtype)


def npu_int8(*shape):
    return torch.ones(shape, dtype=torch.int8).npu()


def test_errors_need_no_group():
    a, b, s = npu_int8(4, 8), npu_int8(8, 6), torch.ones(6).npu()
    ag, rs = torch_npu.npu_all_gather_quant_mm, torch_npu.npu_quant_mm_reduce_scatter
    for op in (ag, rs):
        with pytest.raises(ValueError, match="chip number format the software NPU does not have"):
            op(a, b, "g", 2, x2_scale=s, y_dtype=torch.float16, x1_dtype=HIFLOAT8)
        with pytest.raises(ValueError, match="chip number format the software NPU does not have"):
            op(a, b, "g", 2, x2_scale=s, y_dtype=torch.float16, x2_scale_dtype=FLOAT8_E8M0)
        with pytest.raises(ValueError, match="MX"):
            op(a, b, "g", 2, x2_scale=s, y_dtype=torch.float16, block_size=32)
        with pytest.raises(ValueError, match="chip number format"):
            op(a, b, "g", 2, x2_scale=s, y_dtype=torch.float16, amax_output=True)
        with pytest.raises(ValueError, match="need y_dtype"):
            op(a, b, "g", 2, x2_scale=s)
        with pytest.raises(ValueError, match="need x2_scale"):
            op(a, b, "g", 2, y_dtype=torch.float16)
        with pytest.raises(ValueError, match="do not multiply"):
            op(a, a, "g", 2, x2_scale=s, y_dtype=torch.float16)
        with pytest.raises(TypeError, match="both int8"):
            op(a, b.to(torch.float16), "g", 2, x2_scale=s, y_dtype=torch.float16)
        with pytest.raises(ValueError, match="per channel"):
            op(a, b, "g", 2, x2_scale=torch.ones(5).npu(), y_dtype=torch.float16)
        with pytest.raises(ValueError, match="keeps their dtype"):
            op(a.half(), b.half(), "g", 2, y_dtype=torch.float32)
    with pytest.raises(ValueError, match="gather_index must be 0"):
        ag(a, b, "g", 2, x2_scale=s, y_dtype=torch.float16, gather_index=1)
    with pytest.raises(ValueError, match="reduce_op must be 'sum'"):
        rs(a, b, "g", 2, reduce_op="max", x2_scale=s, y_dtype=torch.float16)
    with pytest.raises(ValueError, match="divide evenly"):
        rs(npu_int8(3, 8), b, "g", 2, x2_scale=s, y_dtype=torch.float16)

    qa = torch_npu.npu_quant_matmul_all_to_all
    s1 = torch.ones(4).npu()
    with pytest.raises(ValueError, match="chip number format"):
        qa(a, b, "g", 2, None, s1, s, x1_dtype=HIFLOAT8)
    with pytest.raises(ValueError, match="x1_quant_mode must be 1"):
        qa(a, b, "g", 2, None, s1, s, x1_quant_mode=6)
    with pytest.raises(ValueError, match="all2all_axes"):
        qa(a, b, "g", 2, None, s1, s, all2all_axes=[-2, -1])
    with pytest.raises(ValueError, match="x1_scale is required"):
        qa(a, b, "g", 2, None, None, s)
    with pytest.raises(ValueError, match="divide by world_size"):
        qa(a, b, "g", 4, None, s1, s)
    with pytest.raises(ValueError, match="common_scale"):
        qa(a, b, "g", 2, None, s1, s, torch.ones(1).npu())

    aq = torch_npu.npu_all_to_all_quant_matmul
    x = torch.ones(4, 4).half().npu()
    w = torch.ones(8, 6).to(torch.float8_e5m2).npu()
    with pytest.raises(ValueError, match="chip number format"):
        aq(x, w, "g", 2, x2_scale=s, x1_quant_dtype=HIFLOAT8)
    with pytest.raises(ValueError, match="chip number format"):
        aq(x, w, "g", 2, x2_scale=s, x2_dtype=FLOAT4_E2M1)
    with pytest.raises(ValueError, match="x1_quant_mode must be 7"):
        aq(x, w, "g", 2, x2_scale=s, x1_quant_mode=3)
    with pytest.raises(TypeError, match="both must be int8 or both float8"):
        aq(x, w, "g", 2, x2_scale=s, x1_quant_dtype=torch.int8)
    with pytest.raises(ValueError, match="k \\* world_size"):
        aq(x, w, "g", 4, x2_scale=s)
    with pytest.raises(TypeError, match="x1 must be float16"):
        aq(npu_int8(4, 4), w, "g", 2, x2_scale=s)
