"""CPU references for the further quantized matmuls (npu_transpose_quant_batchmatmul, npu_add_quant_matmul(_),
npu_add_quant_gmm(_)), written from their documented formulas with int8 / int4-packed operands in place of the chip's
float8 / hifloat8: integer products exact in int64, dequantised in float32."""

import torch


def unpack_int4_words(packed):
    """int32 words -> eight signed int4 values each along the last dimension, lowest nibble first (as int64)."""
    words = packed.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(0, 32, 4, dtype=torch.int64)
    nibbles = (words.unsqueeze(-1) >> shifts) & 0xF
    signed = torch.where(nibbles >= 8, nibbles - 16, nibbles)
    return signed.reshape(*packed.shape[:-1], packed.shape[-1] * 8)


def pack_int4_words(values):
    """Signed int4 values (last dimension a multiple of 8) -> int32 words, lowest nibble first."""
    nibbles = (values.to(torch.int64) & 0xF).reshape(*values.shape[:-1], values.shape[-1] // 8, 8)
    words = (nibbles << torch.arange(0, 32, 4, dtype=torch.int64)).sum(-1)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def integer_values(t):
    """int8 / int4-packed operands as exact int64; float8 operands as their float32 values."""
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return t.float()
    return unpack_int4_words(t) if t.dtype == torch.int32 else t.to(torch.int64)


def transpose_quant_batchmatmul(x1, x2, dtype, x1_scale=None, x2_scale=None, perm_x2=(0, 1, 2),
                                batch_split_factor=1):
    """out = ((x1^[1,0,2] @ x2^perm_x2) * x2_scale[n] * x1_scale[m])^[1,0,2], x1 (M, B, K), out (M, B, N) in dtype.

    With batch_split_factor f > 1 the (M, B * N) result is cut into f column slices: (f, M, B * N / f)."""
    lhs = integer_values(x1).permute(1, 0, 2)  # (B, M, K)
    rhs = integer_values(x2)
    if tuple(perm_x2) == (0, 2, 1):
        rhs = rhs.transpose(1, 2)  # (B, K, N)
    v = torch.matmul(lhs, rhs).float()
    if x2_scale is not None:
        v = v * x2_scale.float().reshape(1, 1, -1)
    if x1_scale is not None:
        v = v * x1_scale.float().reshape(1, -1, 1)
    y = v.permute(1, 0, 2)
    m, b, n = y.shape
    if batch_split_factor > 1:
        y = y.reshape(m, batch_split_factor, b * n // batch_split_factor).transpose(0, 1)
    return y.to(dtype).contiguous()


def add_quant_matmul(y, x1, x2, x2_scale, x1_scale=None):
    """y (M, N) float32 + (x1 @ x2) * x2_scale * x1_scale; scales per tensor (1,) or per column / row."""
    v = torch.matmul(x1.to(torch.int64), x2.to(torch.int64)).float()
    v = v * x2_scale.float().reshape(1, -1)
    if x1_scale is not None:
        v = v * x1_scale.float().reshape(-1, 1)
    return y + v


def k_ranges(group_list, group_list_type=0):
    """[start, end) k rows of each group: group_list holds cumulative ends (type 0) or sizes (type 1)."""
    ranges, start = [], 0
    for v in group_list.tolist():
        end = v if group_list_type == 0 else start + v
        ranges.append((start, end))
        start = end
    return ranges


def add_quant_gmm(y, x1, x2, x2_scale, group_list, x1_scale=None, group_list_type=0):
    """y[g] (M, N) float32 + (x1[:, k_g] @ x2[k_g, :]) * x2_scale[g] * x1_scale[g] for each k group g."""
    groups = group_list.numel()
    m, n = x1.shape[0], x2.shape[1]
    acc = torch.zeros(groups, m, n, dtype=torch.float32)
    col_scale = x2_scale.float().reshape(groups, -1)
    for g, (start, end) in enumerate(k_ranges(group_list, group_list_type)):
        if end == start:
            continue
        v = torch.matmul(x1[:, start:end].to(torch.int64), x2[start:end].to(torch.int64)).float()
        v = v * col_scale[g].reshape(1, -1)
        if x1_scale is not None:
            v = v * x1_scale[g].float()
        acc[g] = v
    return y + acc.reshape(y.shape)
