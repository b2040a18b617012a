"""CPU references for the sparse attention family (lightning indexer, sparse flash attention), written row by row
from the documented definitions. Layouts: query BSND [B,S1,N1,D] or TND [T1,N1,D]; key BSND, TND or PA_BSND
([blocks, block_size, N2, D] addressed through block_table)."""

import torch


def _lengths(t):
    return None if t is None else [int(x) for x in t.reshape(-1).tolist()]


def query_spans(query, layout, actual_q):
    """(batch, start, length) per batch: TND lengths are prefix sums, BSND lengths are plain (default S1)."""
    lengths = _lengths(actual_q)
    if layout == "TND":
        spans, previous = [], 0
        for b, end in enumerate(lengths):
            spans.append((b, previous, end - previous))
            previous = end
        return spans
    return [(b, 0, query.shape[1] if lengths is None else lengths[b]) for b in range(query.shape[0])]


def query_rows(t, layout, span):
    b, start, length = span
    return t[start:start + length] if layout == "TND" else t[b, :length]


def key_rows(kv, layout, actual_kv, block_table, b):
    """The valid tokens of batch b as [length, N2, D]."""
    lengths = _lengths(actual_kv)
    if layout == "TND":
        start = 0 if b == 0 else lengths[b - 1]
        return kv[start:lengths[b]]
    if layout == "PA_BSND":
        block_size = kv.shape[1]
        tokens = [kv[int(block_table[b, pos // block_size]), pos % block_size] for pos in range(lengths[b])]
        return torch.stack(tokens) if tokens else kv.new_zeros((0,) + tuple(kv.shape[2:]))
    length = kv.shape[1] if lengths is None else lengths[b]
    return kv[b, :length]


def visible(i, j, sq, skv, sparse_mode, pre_tokens=2**63 - 1, next_tokens=2**63 - 1):
    """Whether query row i may see key j: mode 3 is causal from the bottom-right corner, mode 0 a band."""
    if sparse_mode == 3:
        return j <= i + skv - sq
    return -pre_tokens <= j - i <= next_tokens


def lightning_indexer(query, key, weights, actual_seq_lengths_query=None, actual_seq_lengths_key=None,
                      block_table=None, layout_query="BSND", layout_key="BSND", sparse_count=2048, sparse_mode=3,
                      pre_tokens=2**63 - 1, next_tokens=2**63 - 1):
    """Returns (indices int32, values float32): the sparse_count best visible keys per query row and key head by
    score = sum_h weights[h] * relu(q[h] . k), highest first, padded with -1 / -inf."""
    n1, n2 = query.shape[-2], key.shape[-2]
    group = n1 // n2
    out_shape = tuple(query.shape[:-2]) + (n2, sparse_count)
    indices = torch.full(out_shape, -1, dtype=torch.int32)
    values = torch.full(out_shape, float("-inf"))
    for span in query_spans(query, layout_query, actual_seq_lengths_query):
        q = query_rows(query, layout_query, span).float()
        w = query_rows(weights, layout_query, span).float()
        k = key_rows(key, layout_key, actual_seq_lengths_key, block_table, span[0]).float()
        sq, skv = q.shape[0], k.shape[0]
        idx_rows = query_rows(indices, layout_query, span)
        val_rows = query_rows(values, layout_query, span)
        for i in range(sq):
            for h in range(n2):
                heads = range(h * group, (h + 1) * group)
                scores = []
                for j in range(skv):
                    if not visible(i, j, sq, skv, sparse_mode, pre_tokens, next_tokens):
                        continue
                    dots = torch.relu(q[i, list(heads)] @ k[j, h])  # [g]
                    scores.append(((w[i, list(heads)] * dots).sum().item(), j))
                # Highest score first; equal scores keep the lower key position first.
                scores.sort(key=lambda item: (-item[0], item[1]))
                for slot, (value, j) in enumerate(scores[:sparse_count]):
                    idx_rows[i, h, slot] = j
                    val_rows[i, h, slot] = value
    return indices, values


def lightning_indexer_scores(query, key, weights):
    """BSND, no masking helper: the full [B, S1, N2, S2] score tensor (for checking selected values)."""
    n1, n2 = query.shape[-2], key.shape[-2]
    q = query.float().unflatten(2, (n2, n1 // n2))                      # [B,S1,N2,G,D]
    dots = torch.relu(torch.einsum("bsngd,btnd->bsngt", q, key.float()))
    return (dots * weights.float().unflatten(2, (n2, n1 // n2)).unsqueeze(-1)).sum(3)


def sparse_flash_attention(query, key, value, sparse_indices, scale_value, block_table=None,
                           actual_seq_lengths_query=None, actual_seq_lengths_kv=None, query_rope=None,
                           key_rope=None, sparse_block_size=1, layout_query="BSND", layout_kv="BSND", sparse_mode=3,
                           sinks=None):
    """Returns (out float32 shaped like query, softmax_max, softmax_sum) with statistics laid out as
    [B, N2, S1, G] (BSND) or [N2, T1, G] (TND). Each index b selects tokens [b*block, (b+1)*block) cut at the kv
    length; a row's list ends at its first -1. Sinks join the softmax denominator (and its max)."""
    n1, n2 = query.shape[-2], key.shape[-2]
    group = n1 // n2
    out = torch.zeros(query.shape[:-1] + (value.shape[-1],))
    if layout_query == "TND":
        stats_shape = (n2, query.shape[0], group)
    else:
        stats_shape = (query.shape[0], n2, query.shape[1], group)
    softmax_max = torch.zeros(stats_shape)
    softmax_sum = torch.zeros(stats_shape)
    for span in query_spans(query, layout_query, actual_seq_lengths_query):
        b, start, _ = span
        q = query_rows(query, layout_query, span).float()
        k = key_rows(key, layout_kv, actual_seq_lengths_kv, block_table, b).float()
        v = key_rows(value, layout_kv, actual_seq_lengths_kv, block_table, b).float()
        if query_rope is not None:
            q = torch.cat([q, query_rows(query_rope, layout_query, span).float()], -1)
            k = torch.cat([k, key_rows(key_rope, layout_kv, actual_seq_lengths_kv, block_table, b).float()], -1)
        sq, skv = q.shape[0], k.shape[0]
        idx = query_rows(sparse_indices, layout_query, span)
        o = query_rows(out, layout_query, span)
        for i in range(sq):
            for h in range(n2):
                positions = []
                for block in idx[i, h].tolist():
                    if block < 0:
                        break
                    for p in range(block * sparse_block_size, min((block + 1) * sparse_block_size, skv)):
                        if visible(i, p, sq, skv, sparse_mode):
                            positions.append(p)
                for g in range(group):
                    head = h * group + g
                    logits = torch.stack([q[i, head] @ k[p, h] for p in positions]) * scale_value \
                        if positions else torch.zeros(0)
                    candidates = logits.tolist() + ([float(sinks[head])] if sinks is not None else [])
                    row_max = max(candidates) if candidates else float("-inf")
                    safe = 0.0 if row_max == float("-inf") else row_max
                    weights = torch.exp(logits - safe)
                    total = weights.sum() + (torch.exp(torch.tensor(float(sinks[head]) - safe))
                                             if sinks is not None else 0.0)
                    if positions:
                        o[i, head] = (weights.unsqueeze(-1) * v[positions, h]).sum(0) / total
                    where = (h, start + i, g) if layout_query == "TND" else (b, h, i, g)
                    softmax_max[where] = row_max
                    softmax_sum[where] = float(total)
    return out, softmax_max, softmax_sum


def indexer_score_rows(query, key, weights, span, actual_seq_lengths_key=None, block_table=None,
                       layout_query="BSND", layout_key="BSND"):
    """The unmasked indexer scores of one query span as [S1, N2, S2] (float32)."""
    n1, n2 = query.shape[-2], key.shape[-2]
    q = query_rows(query, layout_query, span).float().unflatten(1, (n2, n1 // n2))    # [S1,N2,G,D]
    w = query_rows(weights, layout_query, span).float().unflatten(1, (n2, n1 // n2))  # [S1,N2,G]
    k = key_rows(key, layout_key, actual_seq_lengths_key, block_table, span[0]).float()  # [S2,N2,D]
    dots = torch.relu(torch.einsum("sngd,tnd->sngt", q, k))
    return (dots * w.unsqueeze(-1)).sum(2)


def gather_sparse_index(input, index):
    """out[i..., j...] = input[index[i...], j...]; a 0-d input passes through."""
    if input.dim() == 0:
        return input.clone()
    rows = [input[int(row)] for row in index.reshape(-1).tolist()]
    stacked = torch.stack(rows) if rows else input.new_empty((0,) + tuple(input.shape[1:]))
    return stacked.reshape(tuple(index.shape) + tuple(input.shape[1:]))


def quant_lightning_indexer(query, key, weights, query_dequant_scale, key_dequant_scale, **kw):
    """int8 indexer: relu((s_q * s_k) * (q . k)) per head, i.e. the float indexer on per-token dequantized q and k.
    Returns the int32 indices only."""
    q = query.float() * query_dequant_scale.float().unsqueeze(-1)
    k = key.float() * key_dequant_scale.float().unsqueeze(-1)
    return lightning_indexer(q, k, weights.float(), **kw)[0]


def dense_lightning_indexer_softmax_lse(query_index, key_index, weights, actual_seq_qlen=None, actual_seq_klen=None,
                                        layout="BSND", sparse_mode=3):
    """(softmax_max, softmax_sum) of the masked indexer scores per query row and key head: [B, N2, S1] (BSND) or
    [N2, T1] (TND, prefix-sum lengths). Rows with no visible key: max -inf, sum 0."""
    n1, n2 = query_index.shape[-2], key_index.shape[-2]
    if layout == "TND":
        shape = (n2, query_index.shape[0])
        act_q = torch.tensor(actual_seq_qlen)
        act_k = torch.tensor(actual_seq_klen)
    else:
        shape = (query_index.shape[0], n2, query_index.shape[1])
        act_q = act_k = None
    softmax_max = torch.full(shape, float("-inf"))
    softmax_sum = torch.zeros(shape)
    for span in query_spans(query_index, layout, act_q):
        b, start, _ = span
        scores = indexer_score_rows(query_index, key_index, weights, span, act_k, None, layout, layout)  # [S1,N2,S2]
        sq, skv = scores.shape[0], scores.shape[2]
        for i in range(sq):
            for h in range(n2):
                row = [scores[i, h, j].item() for j in range(skv) if visible(i, j, sq, skv, sparse_mode)]
                if not row:
                    continue
                row = torch.tensor(row)
                where = (h, start + i) if layout == "TND" else (b, h, i)
                softmax_max[where] = row.max()
                softmax_sum[where] = torch.exp(row - row.max()).sum()
    return softmax_max, softmax_sum


def nsa_compress(input, weight, compress_block_size, compress_stride, actual_seq_len):
    """TND compression: for every sample (prefix-sum lengths) and every window start s = 0, stride, ... with a whole
    block inside the sample, out = sum_r weight[r, n] * input[start + s + r, n, :]. float32 math, input dtype out.
    Differentiable through input and weight (plain autograd)."""
    x, w = input.float(), weight.float()
    outputs, previous = [], 0
    for end in actual_seq_len:
        length = end - previous
        s = 0
        while s + compress_block_size <= length:
            window = x[previous + s:previous + s + compress_block_size]        # [block, N, D]
            outputs.append((window * w.unsqueeze(-1)).sum(0))
            s += compress_stride
        previous = end
    if not outputs:
        return input.new_zeros((0,) + tuple(input.shape[1:]))
    return torch.stack(outputs).to(input.dtype)
