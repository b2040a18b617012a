"""CPU references for the quantised communication-fused matmuls (npu_all_gather_quant_mm, npu_quant_mm_reduce_scatter,
npu_quant_matmul_all_to_all, npu_all_to_all_quant_matmul): the unfused quant matmul, then the collective, written
out over every rank's inputs so one process can compute any rank's expected result."""

import torch

FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def out_dtype(x1, y_dtype):
    """float16 / bfloat16 operands keep their dtype; quantised ones need y_dtype."""
    return x1.dtype if x1.dtype in (torch.float16, torch.bfloat16) else y_dtype


def dequant_matmul(x1, x2, x1_scale=None, x2_scale=None, bias=None, bias_first=False):
    """float64 (x1 @ x2) * x1_scale (per tensor or per row) * x2_scale (per tensor or per column), plus bias.
    An int32 bias joins the integer accumulator before the scales; a float one comes after them, or before them
    with bias_first (the all_to_all pair's definition)."""
    acc = x1.double() @ x2.double()
    scaled_bias = bias is not None and bias.dtype != torch.int32 and not bias_first
    if bias is not None and not scaled_bias:
        acc = acc + bias.double()
    if x2_scale is not None:
        acc = acc * x2_scale.double().reshape(1, -1)
    if x1_scale is not None:
        acc = acc * x1_scale.double().reshape(-1, 1)
    if scaled_bias:
        acc = acc + bias.double()
    return acc


def all_gather_quant_mm(x1s, x2, x1_scales=None, x2_scale=None, bias=None, y_dtype=None):
    """(all_gather(x1) @ x2 dequantised + bias, all_gather(x1)); per-row x1 scales travel with their rows."""
    gathered = torch.cat(x1s)
    scale = None
    if x1_scales is not None:
        scale = torch.cat([s.reshape(-1).expand(x.size(0)) for s, x in zip(x1_scales, x1s)])
    y = dequant_matmul(gathered, x2, scale, x2_scale, bias)
    return y.to(out_dtype(x1s[0], y_dtype)), gathered


def quant_mm_reduce_scatter(x1s, x2s, rank, x1_scales=None, x2_scales=None, bias=None, y_dtype=None):
    """Rows [rank * m / world, (rank + 1) * m / world) of sum over ranks of (x1 @ x2 dequantised + bias)."""
    world = len(x1s)
    total = sum(dequant_matmul(x1s[r], x2s[r], None if x1_scales is None else x1_scales[r],
                               None if x2_scales is None else x2_scales[r], bias) for r in range(world))
    return total.chunk(world)[rank].to(out_dtype(x1s[0], y_dtype))


def quant_matmul_all_to_all(x1s, x2s, rank, x1_scales=None, x2_scales=None, biases=None, y_dtype=torch.float32):
    """Rank `rank` gets column block `rank` of every rank's dequantised product, rows stacked by source rank."""
    world = len(x1s)
    blocks = []
    for r in range(world):
        y = dequant_matmul(x1s[r], x2s[r], None if x1_scales is None else x1_scales[r],
                           None if x2_scales is None else x2_scales[r], None if biases is None else biases[r],
                           bias_first=True)
        blocks.append(y.chunk(world, dim=1)[rank])
    return torch.cat(blocks).to(y_dtype)


def dynamic_quant_rows(x, quant_dtype, smooth=None):
    """Per-row dynamic quantisation: scale = max|x * smooth| / max(quant_dtype) (1 for an all-zero row)."""
    x = x.float() if smooth is None else x.float() * smooth.float()
    fmax = 127.0 if quant_dtype == torch.int8 else torch.finfo(quant_dtype).max
    scale = x.abs().amax(dim=1, keepdim=True) / fmax
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    v = x / scale
    q = v.round().clamp(-128, 127).to(torch.int8) if quant_dtype == torch.int8 else v.to(quant_dtype)
    return q, scale.reshape(-1)


def all_to_all_quant_matmul(x1s, x2s, rank, x2_scales=None, biases=None, smooth=None, quant_dtype=torch.float8_e5m2,
                            y_dtype=torch.float32):
    """all_to_all of x1's row blocks (rank r gets block r of every rank, side by side), dynamically quantised per row,
    then the dequantised matmul with this rank's x2. Returns (y, the exchanged float x1)."""
    world = len(x1s)
    permuted = torch.cat([x.chunk(world)[rank] for x in x1s], dim=1)
    q, scale = dynamic_quant_rows(permuted, quant_dtype, smooth)
    y = dequant_matmul(q.float(), x2s[rank], scale, None if x2_scales is None else x2_scales[rank],
                       None if biases is None else biases[rank], bias_first=True)
    return y.to(y_dtype), permuted
