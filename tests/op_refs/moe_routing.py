"""CPU references of torch_npu's MoE routing ops, written from their documented definitions in plain torch
(to be merged into tests/custom_op_refs.py; every name starts with ``moe_``).

Ordering rules the ops document and these references spell out:
* top-k selections are stable and descending: of equal scores the lower expert (or group) index comes first;
* sorting tokens by expert is stable and ascending over the flattened [tokens, k] positions: of equal experts the
  lower flattened position (token-major, then its k slot) comes first.
The references loop where that is clearer than vectorised torch; shapes in the tests are small.
"""

import torch


def _stable_desc_order(row):
    """Indices of a 1-D tensor from the largest value to the smallest, ties by lower index."""
    return sorted(range(row.numel()), key=lambda i: (-float(row[i]), i))


def _stable_asc_order(values):
    """Indices of a 1-D integer tensor from the smallest value to the largest, ties by lower index."""
    return sorted(range(values.numel()), key=lambda i: (int(values[i]), i))


# ----------------------------------------------------------------------------------------------- gating


def moe_gating_top_k_softmax(x, finished=None, k=1):
    """softmax over the experts (float32), the k best per token; finished tokens get expert id E;
    row_idx[t, j] = j * tokens + t (the k-major position of each pick)."""
    experts = x.shape[-1]
    rows = x.reshape(-1, experts).float()
    tokens = rows.shape[0]
    probs = torch.softmax(rows, dim=-1)
    y = torch.zeros(tokens, k)
    idx = torch.zeros(tokens, k, dtype=torch.int32)
    done = finished.reshape(-1) if finished is not None else torch.zeros(tokens, dtype=torch.bool)
    for t in range(tokens):
        order = _stable_desc_order(probs[t])[:k]
        for j, e in enumerate(order):
            y[t, j] = probs[t, e]
            idx[t, j] = experts if bool(done[t]) else e
    row_idx = torch.tensor([[j * tokens + t for j in range(k)] for t in range(tokens)], dtype=torch.int32)
    shape = tuple(x.shape[:-1]) + (k,)
    return y.to(x.dtype).reshape(shape), idx.reshape(shape), row_idx.reshape(shape)


def moe_gating_select(x, k, bias=None, k_group=1, group_count=1, group_select_mode=0, norm_type=0):
    """The experts npu_moe_gating_top_k picks (int64 [tokens, k]) and the float32 scores they are weighted by."""
    scores = torch.softmax(x.float(), -1) if norm_type == 0 else torch.sigmoid(x.float())
    select = scores.detach() + (bias.float() if bias is not None else 0)
    tokens, experts = select.shape
    size = experts // group_count
    picks = torch.zeros(tokens, k, dtype=torch.long)
    for t in range(tokens):
        if group_count > 1:
            groups = select[t].reshape(group_count, size)
            if group_select_mode == 0:
                group_score = groups.max(-1).values
            else:
                group_score = torch.stack([g.sort(descending=True).values[:2].sum() for g in groups])
            kept = set(_stable_desc_order(group_score)[:k_group])
            row = torch.stack([select[t, e] if e // size in kept else torch.tensor(float("-inf"))
                               for e in range(experts)])
        else:
            row = select[t]
        picks[t] = torch.tensor(_stable_desc_order(row)[:k])
    return picks, scores


def moe_gating_top_k(x, k, bias=None, input_ids=None, tid2eid=None, k_group=1, group_count=1,
                     group_select_mode=0, norm_type=0, routed_scaling_factor=1.0, eps=1e-20):
    """(y, expert_idx int32, norm_out float32). Selection uses scores + bias; the weights are the unbiased scores
    at the picks, renormalised (sum + eps) for sigmoid, times routed_scaling_factor. Hash routing: the picks are
    tid2eid[input_ids]. Differentiable in x (the picks are constants)."""
    if tid2eid is not None:
        scores = torch.softmax(x.float(), -1) if norm_type == 0 else torch.sigmoid(x.float())
        picks = tid2eid.long()[input_ids.long()]
    else:
        picks, scores = moe_gating_select(x, k, bias, k_group, group_count, group_select_mode, norm_type)
    weights = scores.gather(1, picks)
    if norm_type == 1:
        weights = weights / (weights.sum(-1, keepdim=True) + eps)
    weights = weights * routed_scaling_factor
    return weights.to(x.dtype), picks.to(torch.int32), scores


# ---------------------------------------------------------------------------------------------- routing


def moe_init_routing(x, row_idx, expert_idx, active_num):
    """Stable sort of the flattened expert ids; expanded_row_idx[row_idx[p]] = rank of position p;
    expanded_x row i is x[row_idx[p_i] % tokens] for the first min(active_num, tokens) * k ranks."""
    tokens, k = expert_idx.shape
    flat_e, flat_r = expert_idx.reshape(-1), row_idx.reshape(-1)
    order = _stable_asc_order(flat_e)
    expanded_expert = torch.tensor([int(flat_e[p]) for p in order], dtype=torch.int32)
    dst_to_src = [int(flat_r[p]) for p in order]
    expanded_row = torch.zeros(tokens * k, dtype=torch.int32)
    for i, src in enumerate(dst_to_src):
        expanded_row[src] = i
    active = min(active_num, tokens) * k
    expanded_x = torch.stack([x[dst_to_src[i] % tokens] for i in range(active)]) if active else x[:0]
    return expanded_x, expanded_row, expanded_expert


def _histogram(experts_sorted, start, end, expert_num, mode):
    counts = [0] * (end - start)
    for e in experts_sorted:
        counts[e - start] += 1
    if mode == 1:
        return torch.tensor(counts, dtype=torch.int64)
    if mode == 0:
        return torch.tensor(counts, dtype=torch.int64).cumsum(0)
    pairs = torch.zeros(expert_num, 2, dtype=torch.int64)
    used = [(start + j, c) for j, c in enumerate(counts) if c > 0]
    for i, (e, c) in enumerate(used):
        pairs[i, 0], pairs[i, 1] = e, c
    return pairs


def _static_quant(rows, scale, offset):
    # As the op defines it: float16 arithmetic, then round half to even and saturate to int8.
    off = offset.half().reshape(-1)[0] if offset is not None else torch.tensor(0, dtype=torch.half)
    v = rows.half() * scale.half().reshape(-1)[0] + off
    return v.float().round().clamp(-128, 127).to(torch.int8)


def _dynamic_quant(rows, row_scales):
    """rows (float32) times their smoothing scales (or 1); per row scale = max|v| / 127, q = round(v / scale)."""
    v = rows.float() * row_scales if row_scales is not None else rows.float()
    scale = v.abs().amax(-1) / 127
    q = torch.where(scale[:, None] > 0, v / scale[:, None], torch.zeros_like(v))
    return q.round().clamp(-128, 127).to(torch.int8), scale


def moe_init_routing_v2(x, expert_idx, scale=None, offset=None, active_num=-1, expert_capacity=-1, expert_num=-1,
                        drop_pad_mode=0, expert_tokens_num_type=0, quant_mode=-1, active_expert_range=(),
                        row_idx_type=0):
    """(expanded_x, expanded_row_idx int32, expert_tokens int64, expanded_scale float32), shapes as the op's.

    Experts outside [start, end) are not routed; ids below start sort after every other id, ids at or above
    end after the routed ones (their relative order: by id, then position). Rows the op leaves unused are 0;
    expanded_scale is 0 where it carries nothing (no scale given, static quantization)."""
    tokens, k = expert_idx.shape
    h = x.shape[1]
    start, end = tuple(active_expert_range) if len(active_expert_range) else (0, expert_num)
    flat = expert_idx.reshape(-1).long()
    key = torch.where(flat < start, torch.full_like(flat, 2 ** 62), flat)
    order = _stable_asc_order(key)
    routed = [p for p in order if start <= int(flat[p]) < end]  # the first len(routed) entries of order
    avail = len(routed)
    expert_tokens = _histogram([int(flat[p]) for p in routed], start, end, expert_num, expert_tokens_num_type)
    out_type = x.dtype if quant_mode == -1 else torch.int8
    row_idx = torch.full((tokens * k,), -1, dtype=torch.int32)

    if drop_pad_mode == 0:
        rows = tokens * k if active_num <= 0 else min(active_num, tokens * k)
        used = avail if active_num <= 0 else min(active_num, avail)
        if row_idx_type == 1:
            row_idx = torch.tensor(order, dtype=torch.int32)
        else:
            for i, p in enumerate(routed):
                row_idx[p] = i
        slots = list(range(used))
        sources = [routed[i] for i in slots]
        expanded_x = torch.zeros(rows, h, dtype=out_type)
        expanded_scale = torch.zeros(rows)
    else:
        first_of = {}
        slots, sources = [], []
        for i, p in enumerate(routed):
            e = int(flat[p])
            first_of.setdefault(e, i)
            pos = i - first_of[e]
            if pos < expert_capacity:
                slot = (e - start) * expert_capacity + pos
                row_idx[p] = slot
                slots.append(slot)
                sources.append(p)
        expanded_x = torch.zeros(expert_num * expert_capacity, h, dtype=out_type)
        expanded_scale = torch.zeros(expert_num * expert_capacity)

    if sources:
        src_rows = torch.stack([x[p // k] for p in sources])
        if quant_mode == -1:
            values = src_rows
            if scale is not None:
                expanded_scale[slots] = torch.stack([scale[p // k] for p in sources]).float()
        elif quant_mode == 0:
            values = _static_quant(src_rows, scale, offset)
        else:
            smooth = None
            if scale is not None:
                smooth = scale.float() if scale.shape[0] == 1 else torch.stack(
                    [scale[int(flat[p]) - start] for p in sources]).float()
            values, row_scale = _dynamic_quant(src_rows, smooth)
            expanded_scale[slots] = row_scale
        expanded_x[slots] = values
    if drop_pad_mode == 1:
        expanded_x = expanded_x.reshape(expert_num, expert_capacity, h)
    return expanded_x, row_idx, expert_tokens, expanded_scale


def moe_finalize_routing(expanded_permuted_rows, skip1, skip2, bias, scales, expanded_src_to_dst_row,
                         expert_for_source_row, drop_pad_mode=0, k=1):
    """out[i] = skip1[i] + skip2[i] + sum_j scales[i, j] * (rows[dst(i, j)] + bias[expert(i, j)]), where dst(i, j)
    reads expanded_src_to_dst_row at j * tokens + i (modes 0, 1) or i * K + j (modes 2, 3); -1 reads a zero row."""
    h = expanded_permuted_rows.shape[-1]
    rows = expanded_permuted_rows.reshape(-1, h).float()
    kk = scales.shape[1] if scales is not None else k
    tokens = expanded_src_to_dst_row.numel() // kk
    out = torch.zeros(tokens, h)
    for s in (skip1, skip2):
        if s is not None:
            out += s.float()
    for i in range(tokens):
        for j in range(kk):
            pos = j * tokens + i if drop_pad_mode in (0, 1) else i * kk + j
            dst = int(expanded_src_to_dst_row[pos])
            v = rows[dst] if dst >= 0 else torch.zeros(h)
            if bias is not None:
                v = v + bias[int(expert_for_source_row[i, j])].float()
            out[i] += (float(scales[i, j]) if scales is not None else 1.0) * v
    return out.to(expanded_permuted_rows.dtype)


def moe_compute_expert_tokens(sorted_experts, num_expert):
    """out[e] = one past the last position holding an expert id <= e (a binary search on the sorted ids)."""
    values = [int(v) for v in sorted_experts]
    out = []
    for e in range(num_expert):
        lo, hi = 0, len(values)
        while lo < hi:  # the first position whose id is > e
            mid = (lo + hi) // 2
            if values[mid] <= e:
                lo = mid + 1
            else:
                hi = mid
        out.append(lo)
    return torch.tensor(out, dtype=sorted_experts.dtype)


# ------------------------------------------------------------------------------------ permute / unpermute


def moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False):
    """(permuted_tokens, sorted_indices int32). Unpadded: tokens grouped by expert (stable over the flattened
    [tokens, topk] positions); sorted_indices[p] = the row position p went to; the first num_out_tokens rows are
    kept (None / 0: all, negative: all but that many). Padded: indices hold token ids, row j is tokens[ids[j]].
    Differentiable in tokens."""
    flat = indices.reshape(-1)
    n = flat.numel()
    want = num_out_tokens or 0
    rows = min(want, n) if want > 0 else want + n
    if padded_mode:
        return tokens[flat.long()[:rows]], flat.to(torch.int32)
    topk = 1 if indices.dim() == 1 else indices.shape[1]
    order = _stable_asc_order(flat)
    sorted_indices = torch.zeros(n, dtype=torch.int32)
    for row, p in enumerate(order):
        sorted_indices[p] = row
    picked = torch.tensor([order[r] // topk for r in range(rows)], dtype=torch.long)
    return tokens[picked], sorted_indices


def moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    """Unpadded: out[t] = sum_j probs[t, j] * permuted[sorted_indices[t * topk + j]] (probs 1 and topk 1 when
    absent; indices past the permuted rows were dropped and add nothing). Padded: out (restore_shape) gets
    probs[j] * permuted[j] added at row sorted_indices[j]. Float32 sums, one rounding; differentiable."""
    h = permuted_tokens.shape[-1]
    src = permuted_tokens.float()
    if padded_mode:
        out = torch.zeros(tuple(restore_shape))
        weights = probs.reshape(-1).float() if probs is not None else torch.ones(src.shape[0])
        for j in range(src.shape[0]):
            out = out.index_add(0, sorted_indices[j:j + 1].long(), (weights[j] * src[j])[None])
        return out.to(permuted_tokens.dtype)
    topk = probs.shape[1] if probs is not None else 1
    tokens = sorted_indices.numel() // topk
    rows = []
    for t in range(tokens):
        acc = torch.zeros(h)
        for j in range(topk):
            r = int(sorted_indices[t * topk + j])
            if r < src.shape[0]:
                acc = acc + (probs[t, j].float() if probs is not None else 1.0) * src[r]
        rows.append(acc)
    return torch.stack(rows).to(permuted_tokens.dtype) if rows else src[:0]


# ------------------------------------------------------------------------------------------- re-routing


def moe_re_routing(tokens, expert_token_num_per_rank, per_token_scales=None, expert_token_num_type=1, idx_type=0):
    """Tokens arrive rank by rank, each rank's block expert by expert (counts[rank, expert]); the result holds them
    expert by expert, each expert's block rank by rank. idx_type 0: permute_token_idx[d] = source row of row d;
    1: permute_token_idx[s] = row that source s went to. expert_token_num: per expert counts (1) or their
    cumulative sums (0)."""
    counts = expert_token_num_per_rank.long()
    ranks, experts = counts.shape
    src_start = {}
    pos = 0
    for r in range(ranks):
        for e in range(experts):
            src_start[r, e] = pos
            pos += int(counts[r, e])
    gather = []
    for e in range(experts):
        for r in range(ranks):
            gather += range(src_start[r, e], src_start[r, e] + int(counts[r, e]))
    permuted = tokens[gather]
    if idx_type == 0:
        idx = torch.tensor(gather, dtype=torch.int32)
    else:
        idx = torch.zeros(len(gather), dtype=torch.int32)
        for d, s in enumerate(gather):
            idx[s] = d
    scales = per_token_scales[gather] if per_token_scales is not None else None
    per_expert = counts.sum(0)
    num = per_expert if expert_token_num_type == 1 else per_expert.cumsum(0)
    return permuted, scales, idx, num.to(expert_token_num_per_rank.dtype)
