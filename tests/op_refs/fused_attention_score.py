"""CPU references of the classic fused attention ops (npu_multi_head_attention, npu_fused_attention_score*),
written from their documented definitions in plain torch; float32 inside, outputs in the input dtype."""

import torch


def unpack_bit_mask(mask, numel):
    """torch_npu's bit mask (uint8, element i in bit i % 8 of byte i // 8, 1 = kept) -> bool [numel]."""
    bits = (mask.to(torch.int32).unsqueeze(1) >> torch.arange(8, dtype=torch.int32)) & 1
    return bits.flatten()[:numel].bool()


def pack_bit_mask(keep):
    """bool keep flags -> torch_npu's bit mask bytes (padded to whole bytes)."""
    flat = keep.flatten().to(torch.int32)
    pad = (-flat.numel()) % 8
    flat = torch.cat([flat, flat.new_zeros(pad)]).view(-1, 8)
    return (flat << torch.arange(8, dtype=torch.int32)).sum(1).to(torch.uint8)


def _linear(x, w, b):
    y = x.float() @ w.float().t()
    return y if b is None else y + b.float().reshape(-1)


def multi_head_attention(query, key, value, query_weight, key_weight, value_weight, attn_mask, out_proj_weight,
                         query_bias, key_bias, value_bias, out_proj_bias, keep, attn_head_num, attn_dim_per_head,
                         src_len, tgt_len, dropout_prob, softmax_use_float):
    """Returns (y, query_res, key_res, value_res, attn_scores, attn_res, context); `keep` is a bool
    [B, H, tgt, src] dropout keep mask (None: no dropout). Differentiable for CPU autograd."""
    dtype = query.dtype
    h, d = attn_head_num, attn_dim_per_head
    batch = query.shape[0] // tgt_len
    q = _linear(query, query_weight, query_bias) * d ** -0.5
    k = _linear(key, key_weight, key_bias)
    v = _linear(value, value_weight, value_bias)
    q = q.view(batch, tgt_len, h, d).permute(0, 2, 1, 3)
    k = k.view(batch, src_len, h, d).permute(0, 2, 1, 3)
    v = v.view(batch, src_len, h, d).permute(0, 2, 1, 3)
    probs = torch.softmax(q @ k.transpose(-2, -1) + attn_mask.float(), dim=-1)
    dropped = probs
    if keep is not None and dropout_prob > 0:
        dropped = probs * keep.view(probs.shape).float() / (1.0 - dropout_prob)
    ctx = (dropped @ v).permute(0, 2, 1, 3).reshape(batch * tgt_len, h * d)
    y = _linear(ctx, out_proj_weight, out_proj_bias)
    score_dtype = torch.float32 if softmax_use_float else dtype
    return (y.to(dtype), q.to(dtype), k.to(dtype), v.to(dtype), probs.to(score_dtype), dropped.to(dtype),
            ctx.to(dtype))


def fused_attention_score(query_layer, key_layer, value_layer, attention_mask, scale, keep_prob, keep=None):
    """Returns (attention_score [B*Sq, N*Dv], softmax_output [B, N, Sq, Sk]); `keep` is a bool keep mask of
    softmax_output's elements (None: keep all). Differentiable for CPU autograd."""
    dtype = query_layer.dtype
    b, n, sq, _ = query_layer.shape
    dv = value_layer.shape[-1]
    scores = (query_layer.float() @ key_layer.float().transpose(-2, -1)) * float(scale) + attention_mask.float()
    probs = torch.softmax(scores, dim=-1)
    dropped = probs
    if keep is not None and keep_prob < 1.0:
        dropped = probs * keep.view(probs.shape).float() / keep_prob
    ctx = (dropped @ value_layer.float()).permute(0, 2, 1, 3).reshape(b * sq, n * dv)
    return ctx.to(dtype), probs.to(dtype)
