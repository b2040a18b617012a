"""CPU references for the remaining quantized matmul ops (npu_grouped_matmul_swiglu_quant(_v2)), written from their
documented formulas: integer products exact in int64, dequantised in float32, SwiGLU, then per-token dynamic int8
quantisation (m = 127 / amax of the row, y = rint(v * m) saturated, scale = 1 / m)."""

import torch


def unpack_int4_words(packed):
    """int32 words -> eight signed int4 values each along the last dimension, lowest nibble first (as int64)."""
    words = packed.to(torch.int64) & 0xFFFFFFFF
    nibbles = (words.unsqueeze(-1) >> torch.arange(0, 32, 4, dtype=torch.int64)) & 0xF
    signed = torch.where(nibbles >= 8, nibbles - 16, nibbles)
    return signed.reshape(*packed.shape[:-1], packed.shape[-1] * 8)


def pack_int4_words(values):
    """Signed int4 values (last dimension a multiple of 8) -> int32 words, lowest nibble first."""
    nibbles = (values.to(torch.int64) & 0xF).reshape(*values.shape[:-1], values.shape[-1] // 8, 8)
    words = (nibbles << torch.arange(0, 32, 4, dtype=torch.int64)).sum(-1)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def pack_scale_bits(scale):
    """float32 scales -> int64 holding their bits in bits 0-31 (npu_trans_quant_param's form, no offset)."""
    return scale.float().contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def _float_scale(s):
    if s.dtype == torch.int64:
        return (s & 0xFFFFFFFF).to(torch.int32).view(torch.float32)
    return s.float()


def _exact(t):
    return unpack_int4_words(t) if t.dtype == torch.int32 else t.to(torch.int64)


def a8w4_assist_matrix(weight, weight_scale):
    """The A8W4 weight assist matrix (E, N): 8 * the column sums of the scaled int4 weight, per k group."""
    w = unpack_int4_words(weight).float()  # (E, K, N)
    s = _float_scale(weight_scale)
    s = s.unsqueeze(1) if s.dim() == 2 else s  # (E, G, N)
    groups = s.shape[1]
    step = w.shape[1] // groups
    return 8 * sum(w[:, g * step:(g + 1) * step].sum(1) * s[:, g] for g in range(groups))


def group_ranges(group_list, group_list_type=0):
    ranges, start = [], 0
    for v in group_list.tolist():
        end = v if group_list_type == 0 else start + v
        ranges.append((start, end))
        start = end
    return ranges


def _dequant(x, w, ws, xs, assist, dequant_dtype):
    if x.is_floating_point():  # float8 operands
        c = (x.float() @ w.float()) * _float_scale(ws).reshape(1, -1)
    elif assist is not None:  # A8W4: (x - 8) @ w per k group, scaled, plus the assist row
        xi, wi = _exact(x) - 8, _exact(w)
        s = _float_scale(ws).reshape(-1, wi.shape[1])
        step = xi.shape[1] // s.shape[0]
        c = torch.zeros(xi.shape[0], wi.shape[1])
        for g in range(s.shape[0]):
            c = c + (xi[:, g * step:(g + 1) * step] @ wi[g * step:(g + 1) * step]).float() * s[g]
        c = c + assist.float().reshape(1, -1)
    else:
        c = (_exact(x) @ _exact(w)).float() * _float_scale(ws).reshape(1, -1)
    c = c * xs.float().reshape(-1, 1)
    return c.to(dequant_dtype).float()


def grouped_matmul_swiglu_quant(x, weight, group_list, weight_scale, x_scale, assist=None, smooth_scale=None,
                                group_list_type=0, dequant_dtype=torch.float32):
    """(y int8 (M, N/2), scale float32 (M,)); rows past the last group are 0. weight (E, K, N) int8 or int32
    carrying int4 (A8W4 with `assist`, A4W4 with an int32 x), weight_scale (E, N) or (E, G, N)."""
    m = x.shape[0]
    n = weight.shape[2] * (8 if weight.dtype == torch.int32 else 1)
    y = torch.zeros(m, n // 2, dtype=torch.int8)
    scale = torch.zeros(m)
    for e, (start, end) in enumerate(group_ranges(group_list, group_list_type)):
        if end == start:
            continue
        c = _dequant(x[start:end], weight[e], weight_scale[e], x_scale[start:end],
                     None if assist is None else assist[e], dequant_dtype)
        act, gate = c.chunk(2, dim=-1)
        v = act * torch.sigmoid(act) * gate
        if smooth_scale is not None:
            sm = smooth_scale[e].float()
            v = v * (sm if sm.dim() == 0 else sm.reshape(1, -1))
        mul = 127.0 / v.abs().amax(-1)
        q = torch.round(v * mul.unsqueeze(-1))
        y[start:end] = torch.nan_to_num(q, 0.0).clamp(-128, 127).to(torch.int8)
        scale[start:end] = 1.0 / mul
    return y, scale
