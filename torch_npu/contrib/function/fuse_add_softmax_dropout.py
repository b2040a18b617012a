"""softmax(attn_mask + attn_scores / sqrt(head size)) with dropout: the attention probabilities of BERT-style
models in one call."""

import math

import torch
import torch.nn.functional as F

__all__ = ["fuse_add_softmax_dropout"]


def fuse_add_softmax_dropout(training, dropout, attn_mask, attn_scores, attn_head_size, p=0.5, dim=-1):
    """dropout(softmax(attn_mask + attn_scores / sqrt(attn_head_size), dim)): `dropout` is the model's
    dropout module (it drops with its own p while training, as the model would; `p` and `training` say the
    same for callers that pass them)."""
    if attn_scores.dim() != 4:
        raise ValueError(f"fuse_add_softmax_dropout: attn_scores must be (batch, heads, q, k), got "
                         f"{tuple(attn_scores.shape)}")
    probs = F.softmax(torch.add(attn_mask, attn_scores, alpha=1 / math.sqrt(attn_head_size)), dim=dim)
    return dropout(probs) if training else probs
