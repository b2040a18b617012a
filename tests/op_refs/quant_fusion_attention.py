"""CPU reference of npu_quant_fusion_attention, from its definition: block-dequantised float8 attention whose
softmax probabilities are rounded to float8_e4m3fn before they weight the values."""

import torch


def block_scales(scale, rows):
    """Per-row scales [B, N, rows, 1] from per-block ones [B, N, blocks, 1] (power-of-two block length)."""
    blocks = scale.shape[2]
    block = 1
    while block * blocks < rows:
        block *= 2
    return scale.repeat_interleave(block, dim=2)[:, :, :rows]


def block_quantize(x, block, fp8=torch.float8_e4m3fn):
    """x [B, N, S, D] float -> (float8 data, dequantisation scale [B, N, ceil(S / block), 1])."""
    b, n, s, d = x.shape
    blocks = -(-s // block)
    pad = torch.zeros(b, n, blocks * block, d)
    pad[:, :, :s] = x.float()
    amax = pad.view(b, n, blocks, block * d).abs().amax(-1, keepdim=True).clamp_min(1e-8)
    qscale = torch.finfo(fp8).max / amax  # [B, N, blocks, 1]
    data = (x.float() * qscale.repeat_interleave(block, dim=2)[:, :, :s]).to(fp8)
    return data, (1.0 / qscale).float()


def to_bnsd(t, layout, heads):
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.permute(0, 2, 1, 3)
    if layout == "BSH":
        return t.view(t.shape[0], t.shape[1], heads, -1).permute(0, 2, 1, 3)
    return t.view(t.shape[0], t.shape[1], heads, -1).permute(1, 2, 0, 3)  # SBH


def from_bnsd(t, layout):
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.permute(0, 2, 1, 3)
    b, n, s, d = t.shape
    if layout == "BSH":
        return t.permute(0, 2, 1, 3).reshape(b, s, n * d)
    return t.permute(2, 0, 1, 3).reshape(s, b, n * d)


def quant_fusion_attention(query, key, value, head_num, layout, d_scale_q, d_scale_k, d_scale_v, scale):
    """(attention_out float16, softmax_max [B, N, Sq, 1], softmax_sum [B, N, Sq, 1])."""
    q = to_bnsd(query.float(), layout, head_num)
    d = q.shape[-1]
    kv_heads = key.shape[-1] // d if layout in ("BSH", "SBH") else key.shape[1 if layout == "BNSD" else 2]
    k = to_bnsd(key.float(), layout, kv_heads)
    v = to_bnsd(value.float(), layout, kv_heads)
    q = q * block_scales(d_scale_q, q.shape[2])
    k = (k * block_scales(d_scale_k, k.shape[2])).repeat_interleave(head_num // kv_heads, dim=1)
    v = (v * block_scales(d_scale_v, v.shape[2])).repeat_interleave(head_num // kv_heads, dim=1)
    s = q @ k.transpose(-2, -1) * scale
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m).to(torch.float8_e4m3fn).float()
    total = p.sum(-1, keepdim=True)
    out = (p @ v) / total
    return from_bnsd(out, layout).half(), m, total
