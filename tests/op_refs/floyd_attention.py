"""CPU reference of npu_fused_floyd_attention from its documented formula (float32 autograd gives the gradients)."""

import torch


def floyd_attention(q, k1, v1, k2, v2, mask=None, scale=1.0):
    """(softmax_max [B, H, N, M, 8], softmax_sum [B, H, N, M, 8], out [B, H, N, M, D]) in float32."""
    s = torch.einsum("bhikc,bhijc->bhikj", q, k1) + torch.einsum("bhikc,bhjkc->bhikj", q, k2)
    if mask is not None:
        s = s + mask.bool().float() * -4000000000.0
    s = s * scale
    m = s.amax(-1, keepdim=True)
    e = torch.exp(s - m)
    total = e.sum(-1, keepdim=True)
    p = e / total
    out = torch.einsum("bhikj,bhijc->bhikc", p, v1) + torch.einsum("bhikj,bhjkc->bhikc", p, v2)
    lanes = list(m.shape[:-1]) + [8]
    return m.expand(lanes), total.expand(lanes), out
