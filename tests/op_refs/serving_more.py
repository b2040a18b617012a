"""CPU references (plain torch) for the serving / linear-attention leftovers: npu_top_k_top_p_sample,
npu_fused_causal_conv1d_v2, npu_mhc_pre and npu_nsa_compress_infer, written from their documented definitions."""

import torch


def _filter_row(row, k, p, min_p, k_limit, input_is_logits):
    """The kept vocabulary indices and probabilities of one row (float32) after top-k, top-p and min-p."""
    vocab = row.numel()
    use_k = 1 <= k <= min(k_limit, vocab)
    use_p = p < 1.0
    vals, idx = torch.sort(row, descending=True, stable=True)
    if use_k:
        vals, idx = vals[:k], idx[:k]
    probs = torch.softmax(vals, 0) if input_is_logits else vals
    if use_p:
        kept = int(((probs.cumsum(0) - probs) < p).sum()) if p > 0 else 1
        kept = max(kept, 1)
        idx, probs = idx[:kept], probs[:kept].clone()
        if p <= 0 and input_is_logits:
            probs[0] = 1.0
    if not use_k and not use_p and min_p < 1:
        idx = torch.arange(vocab)
        probs = torch.softmax(row, 0) if input_is_logits else row
    if min_p >= 1:
        idx, probs = idx[:1], probs[:1]
    elif min_p > 0:
        keep = probs >= probs.max() * min_p
        idx, probs = idx[keep], probs[keep]
    return idx, probs


def top_k_top_p_sample(logits, top_k, top_p, q=None, eps=1e-8, min_ps=None, ks_max=1024, input_is_logits=True,
                       post_sample="qSample"):
    """(logits_select_idx, logits_top_kp_select, kept) for post_sample 'qSample' / 'None'; for 'multiNomial' the
    index output is None and `kept` lists each row's (indices, probs) the draw chooses from."""
    batch, vocab = logits.shape
    k_limit = min((min(ks_max, 1024) + 7) // 8 * 8, 1024)
    x = logits.float()
    picks = torch.zeros(batch, dtype=torch.long)
    fill = float("-inf") if input_is_logits else 0.0
    kept_logits = torch.full((batch, vocab), fill)
    kept = []
    for b in range(batch):
        min_p = float(min_ps[b]) if min_ps is not None else -1.0
        idx, probs = _filter_row(x[b], int(top_k[b]), float(top_p[b]), min_p, k_limit, input_is_logits)
        kept.append((idx, probs))
        kept_logits[b, idx] = x[b, idx]
        if post_sample == "multiNomial":
            continue
        score = probs
        if post_sample == "qSample" and q is not None:
            score = probs / (q[b, :idx.numel()].float().abs() + eps)
        picks[b] = idx[score.argmax()]
    return (None if post_sample == "multiNomial" else picks), kept_logits, kept


def fused_causal_conv1d_v2(x, weight, conv_states, query_start_loc=None, cache_indices=None, pad_slot_id=-1,
                           num_accepted_tokens=None, num_computed_tokens=None, block_first=None, block_last=None,
                           initial_state_idx=None, block_size=128, pangu=False, residual=False):
    """(new x, new conv_states): the depthwise causal conv per sequence, outputs over x, cache refreshed."""
    x = x.clone().float()
    states = conv_states.clone().float()
    shape = x.shape
    if x.dim() == 3:
        bsz, seq, dim = x.shape
        x = x.reshape(-1, dim)
        if query_start_loc is None:
            query_start_loc = torch.arange(0, (bsz + 1) * seq, seq)
    w = weight.float()
    width, dim = w.shape
    apc = block_last is not None
    for b in range(query_start_loc.numel() - 1):
        start, end = int(query_start_loc[b]), int(query_start_loc[b + 1])
        length = end - start
        tokens = x[start:end].clone()
        if apc:
            read = int(cache_indices[b, int(initial_state_idx[b])])
            write = int(cache_indices[b, int(block_last[b])])
        else:
            read = write = int(cache_indices[b]) if cache_indices is not None else b
        if read == pad_slot_id:
            continue
        computed = int(num_computed_tokens[b]) if num_computed_tokens is not None else 0
        if num_computed_tokens is not None and computed == 0:
            prefix, offset = torch.zeros(width - 1, dim), 0
        else:
            offset = int(num_accepted_tokens[b]) - 1 if num_accepted_tokens is not None else states.size(1) - (width - 1)
            prefix = states[read, :offset + width - 1].clone()
        padded = torch.cat([prefix, tokens])
        keep = min(states.size(1), padded.size(0))
        states[write, states.size(1) - keep:] = padded[padded.size(0) - keep:]
        window = padded[offset:]
        if apc:
            n_fill = int(block_last[b]) - int(block_first[b])
            into = block_size - computed % block_size
            tail = (length - into) % block_size
            last_full = length - tail - (block_size if tail == 0 else 0)
            for c in range(n_fill):
                edge = last_full - (n_fill - c - 1) * block_size
                line = int(cache_indices[b, int(block_first[b]) + c])
                states[line, states.size(1) - (width - 1):] = window[edge:edge + width - 1]
        y = sum(window[j:j + length] * w[j] for j in range(width))
        if pangu:
            y[:min(max(width - 1 - computed, 0), length)] = 0
        x[start:end] = y + tokens if residual else y
    return x.reshape(shape), states


def mhc_pre(x, phi, alpha, bias, gamma=None, norm_eps=1e-6, hc_eps=1e-6):
    """(h_in (x's dtype), h_post, h_res (zero (1,) with 2 alphas), inv_rms, h_mix, h_pre), differentiable."""
    n, d = x.shape[-2:]
    lead = x.shape[:-2]
    xf = x.reshape(-1, n * d).float()
    inv_rms = torch.rsqrt(xf.square().mean(-1, keepdim=True) + norm_eps)
    lhs = xf * gamma.reshape(n * d).float() if gamma is not None else xf
    h_mix = lhs @ phi.float().t()
    w = h_mix * inv_rms
    h_pre = torch.sigmoid(w[:, :n] * alpha[0] + bias[:n]) + hc_eps
    h_post = 2 * torch.sigmoid(w[:, n:2 * n] * alpha[1] + bias[n:2 * n])
    if alpha.numel() == 3:
        h_res = (w[:, 2 * n:] * alpha[2] + bias[2 * n:]).reshape(*lead, n, n)
    else:
        h_res = torch.zeros(1)
    h_in = (h_pre.unsqueeze(-1) * xf.view(-1, n, d)).sum(1)
    return (h_in.reshape(*lead, d).to(x.dtype), h_post.reshape(*lead, n), h_res, inv_rms.reshape(lead),
            h_mix.reshape(*lead, -1), h_pre.reshape(*lead, n))


def nsa_compress_infer(inp, weight, slot_mapping, compress_block_size, compress_stride, page_block_size, block_table,
                       actual_seq_len, cache):
    """The updated cache: cache[slot[b]] = sum_t weight[t, n] * token[t, n, :] over the last block of sequence b
    when it just completed a window."""
    out = cache.clone().float()
    x, w = inp.float(), weight.float()
    for b, length in enumerate(actual_seq_len):
        if length < compress_block_size or (length - compress_block_size) % compress_stride:
            continue
        rows = [x[int(block_table[b, t // page_block_size]), t % page_block_size]
                for t in range(length - compress_block_size, length)]
        out[int(slot_mapping[b])] = (torch.stack(rows) * w.unsqueeze(-1)).sum(0)
    return out.to(cache.dtype)
