"""CPU references for the quantized-matmul variants, written from the documented definitions."""

import torch


def unpack_int4_words(packed):
    """int32 words -> eight signed int4 values each along the last dimension, lowest nibble first (as int64)."""
    words = packed.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(0, 32, 4, dtype=torch.int64)
    nibbles = (words.unsqueeze(-1) >> shifts) & 0xF
    signed = torch.where(nibbles >= 8, nibbles - 16, nibbles)
    return signed.reshape(*packed.shape[:-1], packed.shape[-1] * 8)


def integer_values(t):
    return unpack_int4_words(t) if t.dtype == torch.int32 else t.to(torch.int64)


def quant_matmul_gelu(x1, x2, x1_scale, x2_scale, bias=None, approximate="gelu_erf"):
    """gelu((x1 @ x2) * x1_scale per row * x2_scale per column + bias); float16 out unless a scale/bias is bf16."""
    acc = torch.matmul(integer_values(x1), integer_values(x2))
    if bias is not None and bias.dtype == torch.int32:
        acc = acc + bias.to(torch.int64)
    v = acc.float() * x1_scale.float().reshape(-1, 1) * x2_scale.float().reshape(-1)
    if bias is not None and bias.dtype != torch.int32:
        v = v + bias.float()
    v = torch.nn.functional.gelu(v, approximate="tanh" if approximate == "gelu_tanh" else "none")
    bf16 = x2_scale.dtype == torch.bfloat16 or (bias is not None and bias.dtype == torch.bfloat16)
    return v.to(torch.bfloat16 if bf16 else torch.float16)


def pack_int4_words(values):
    """Signed int4 values (last dimension a multiple of 8) -> int32 words, lowest nibble first."""
    nibbles = (values.to(torch.int64) & 0xF).reshape(*values.shape[:-1], values.shape[-1] // 8, 8)
    words = (nibbles << torch.arange(0, 32, 4, dtype=torch.int64)).sum(-1)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def quant_matmul_reduce_sum(x1, x2, x1_scale, x2_scale):
    """sum over the batch of (x1_b @ x2_b) * x1_scale[b, m] * x2_scale[n], as bfloat16 (m, n)."""
    acc = torch.matmul(x1.to(torch.int64), x2.to(torch.int64)).float()
    scaled = acc * x1_scale.float().unsqueeze(-1) * x2_scale.float()
    return scaled.sum(0).to(torch.bfloat16)


def rotate_quant(x, rotation, int4=False, round_mode="rint"):
    """x's K-wide blocks times rotation (kept in x's dtype), then symmetric per-row dynamic quantization.

    Returns (y, scale): y int8, or int32 carrying eight int4 values when int4; scale float32 (rows,)."""
    k = rotation.shape[0]
    rotated = torch.matmul(x.float().reshape(-1, k), rotation.float()).reshape(x.shape).to(x.dtype).float()
    dmax = 7.0 if int4 else 127.0
    top = rotated.abs().amax(-1, keepdim=True)
    scale = top * torch.tensor(1.0 / dmax, dtype=torch.float32)
    v = rotated * (torch.full_like(top, dmax) / top)
    if round_mode == "round":
        q = torch.sign(v) * torch.floor(v.abs() + 0.5)
    elif round_mode == "floor":
        q = torch.floor(v)
    else:
        q = torch.round(v)
    q = torch.nan_to_num(q, 0.0).clamp(-dmax - 1, dmax)
    y = pack_int4_words(q.to(torch.int64)) if int4 else q.to(torch.int8)
    return y, scale.reshape(-1)


def dequant_bias(x, weight_scale, activation_scale=None, bias=None, output_dtype=torch.float16):
    """(x [+ int32 bias]) * weight_scale per column [* activation_scale per row] [+ float bias], in float32."""
    int_bias = bias is not None and bias.dtype == torch.int32
    acc = x.to(torch.int64) + bias.to(torch.int64) if int_bias else x
    v = acc.float() * weight_scale.float()
    if activation_scale is not None:
        v = v * activation_scale.float().unsqueeze(-1)
    if bias is not None and not int_bias:
        v = v + bias.float()
    return v.to(output_dtype)


def gelu_quant(x, input_scale=None, input_offset=None, approximate="none", quant_mode="dynamic"):
    """gelu in float32, then int8: static round(g * scale + offset), or dynamic per-row symmetric (returns scale)."""
    g = torch.nn.functional.gelu(x.float(), approximate=approximate)
    if quant_mode == "static":
        v = g * input_scale.float()
        if input_offset is not None:
            v = v + input_offset.float()
        return torch.round(v).clamp(-128, 127).to(torch.int8), None
    if input_scale is not None:
        g = g * input_scale.float()
    scale = g.abs().amax(-1, keepdim=True) * torch.tensor(1.0 / 127.0, dtype=torch.float32)
    y = torch.nan_to_num(torch.round(g / scale), 0.0).clamp(-128, 127).to(torch.int8)
    return y, scale.squeeze(-1)


def quant_matmul_dequant(x, quantized_weight, weight_scale, bias=None, x_scale=None, x_offset=None,
                         smooth_scale=None):
    """x quantized to int8 (given scale, else per-row amax/127), times the (n, k) int8 weight, back in x's dtype."""
    v = x.float() * (smooth_scale.float() if smooth_scale is not None else 1.0)
    if x_scale is not None:
        s = x_scale.float().reshape(-1, 1)
    else:
        s = v.abs().amax(-1, keepdim=True) * torch.tensor(1.0 / 127.0, dtype=torch.float32)
    shifted = v * torch.reciprocal(s)
    offset = x_offset.float().reshape(-1, 1) if x_offset is not None else None
    if offset is not None:
        shifted = shifted + offset
    xq = torch.nan_to_num(torch.round(shifted), 0.0).clamp(-128, 127).double()
    if offset is not None:
        xq = xq - offset.double()
    acc = xq @ quantized_weight.double().t()
    int_bias = bias is not None and bias.dtype == torch.int32
    if int_bias:
        acc = acc + bias.double()
    y = acc.float() * weight_scale.float() * s
    if bias is not None and not int_bias:
        y = y + bias.float()
    return y.to(x.dtype)


def quant_grouped_matmul_dequant(x, quantized_weight, weight_scale, group_list, bias=None, x_scale=None,
                                 x_offset=None, smooth_scale=None):
    """quant_matmul_dequant per row group (group_list: cumulative end rows); rows past the last end are zero."""
    # Quantization is row-wise (or per tensor), so quantizing all rows at once and slicing matches per-group work.
    out = torch.zeros(x.shape[0], quantized_weight.shape[1], dtype=x.dtype)
    start = 0
    for g, end in enumerate(group_list.tolist()):
        if end > start:
            rows = slice(start, end)
            xs = x_scale if x_scale is None or x_scale.numel() == 1 else x_scale[rows]
            xo = x_offset if x_offset is None or x_offset.numel() == 1 else x_offset[rows]
            out[rows] = quant_matmul_dequant(x[rows], quantized_weight[g], weight_scale[g],
                                             None if bias is None else bias[g], xs, xo, smooth_scale)
        start = end
    return out
