"""CPU references for the attention inference ops of tests/test_custom_ops_attention_infer_more.py, written from
the documented definitions: scaled dot-product attention with masks, GQA, learnable sinks and the softmax lse."""

import torch


def attend(q, k, v, scale, masked=None, sink=None):
    """softmax(scale * q k^T, masked) v for one batch, in float32.

    q [N, Sq, D], k / v [Nkv, Skv, D(v)] (N a multiple of Nkv: grouped-query attention), masked a bool
    [Sq, Skv] (True = not attended), sink a per-head logit [N] that joins every row's softmax without a value.
    Returns (out [N, Sq, Dv], lse [N, Sq, 1]); the lse includes the sink, as the output's normaliser does."""
    group = q.shape[0] // k.shape[0]
    k, v = k.float().repeat_interleave(group, 0), v.float().repeat_interleave(group, 0)
    s = q.float() @ k.transpose(-2, -1) * scale
    if masked is not None:
        s = s.masked_fill(masked, float("-inf"))
    if sink is not None:
        z = sink.float().view(-1, 1, 1).expand(s.shape[0], s.shape[1], 1)
        s = torch.cat([s, z], -1)
    p = torch.softmax(s, -1)
    lse = torch.logsumexp(s, -1, keepdim=True)
    if sink is not None:
        p = p[..., :-1]
    return p @ v, lse


def causal(sq, skv, shift=0):
    """The mask of causal attention: query row i sees keys j <= i + shift (True = masked)."""
    i, j = torch.arange(sq).view(-1, 1), torch.arange(skv).view(1, -1)
    return j > i + shift
