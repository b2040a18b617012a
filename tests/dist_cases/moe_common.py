"""What the MoE dispatch / combine cases share: the routing setup, per-rank inputs, the check of the rows each
local expert receives against CPU routing, and the stand-in experts applied to them."""

import torch

from common import RANK, WORLD, close

E, BS, K, H = 4, 5, 2, 8
LOCAL = E // WORLD


def inputs(rank, dtype, seed):
    g = torch.Generator().manual_seed(seed + rank)
    x = torch.randn(BS, H, generator=g).to(dtype)
    ids = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(BS)]).int()
    weights = torch.rand(BS, K, generator=g)
    return x, ids, weights


def check_expert_rows(expand_x, token_nums, every, what):
    """Local expert j receives, from each rank in turn, that rank's tokens routed to it (in token order); rows past
    the received ones are zeros. Returns the counts and the number of received rows."""
    got, counts, start = expand_x.cpu(), token_nums.cpu(), 0
    for j in range(LOCAL):
        e = RANK * LOCAL + j
        expect = torch.cat([xs[(i == e).any(1)] for xs, i, _ in every])
        assert counts[j] == expect.shape[0], (what, j)
        close(got[start:start + counts[j]], expect, f"{what} of expert {e}")
        start += int(counts[j])
    assert torch.equal(got[start:], torch.zeros_like(got[start:]))
    return counts, start


def stand_in_experts(expand_x, counts, received, dtype):
    """A stand-in expert: expert e multiplies its tokens by e + 1."""
    scale_rows = torch.repeat_interleave(torch.arange(LOCAL) + RANK * LOCAL + 1, counts).to(dtype)
    processed = expand_x.clone()
    processed[:received] *= scale_rows.to(expand_x.device)[:, None]
    return processed
