"""CPU references for the second sparse-attention family (block-sparse attention, kv-quant sparse flash attention,
NSA select / compress attention) and the chunked gated delta rule, written from the documented definitions with
plain torch, float32 math."""

import math

import torch


def _softmax_rows(scores):
    """softmax over the last dim; rows whose scores are all -inf give zeros. Also returns log-sum-exp (-inf)."""
    row_max = scores.max(-1, keepdim=True).values
    safe = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    weights = torch.exp(scores - safe)
    total = weights.sum(-1, keepdim=True)
    lse = (torch.log(total) + safe).squeeze(-1)
    return weights / torch.where(total == 0, torch.ones_like(total), total), lse


# ------------------------------------------------------------------------------------------ block sparse attention

def block_sparse_attention(query, key, value, block_sparse_mask, block_shape, layout="TND", scale_value=0.0,
                           actual_seq_lengths=None, actual_seq_lengths_kv=None):
    """Returns (attention_out float32 shaped like query, softmax_lse float32 [T,N,1] / [B,N,S,1]).
    Query row i of batch b, head n sees key j (of key head n // (N1/N2)) iff
    block_sparse_mask[b, n, i // block_shape[0], j // block_shape[1]] != 0. TND lengths are one per batch (batches
    packed in order); BNSD lengths default to S. Rows with nothing visible: zeros and lse -inf; padded rows: 0."""
    bx, by = block_shape[0], block_shape[1]
    tnd = layout == "TND"
    heads, kv_heads = query.shape[1], key.shape[1]
    group = heads // kv_heads
    out = torch.zeros(query.shape)
    lse = torch.zeros(tuple(query.shape[:-1]) + (1,))
    batches = len(actual_seq_lengths) if tnd else query.shape[0]
    q_start = kv_start = 0
    for b in range(batches):
        sq = actual_seq_lengths[b] if actual_seq_lengths is not None else query.shape[2]
        skv = actual_seq_lengths_kv[b] if actual_seq_lengths_kv is not None else key.shape[2]
        for n in range(heads):
            h = n // group
            if tnd:
                q = query[q_start:q_start + sq, n].float()
                k = key[kv_start:kv_start + skv, h].float()
                v = value[kv_start:kv_start + skv, h].float()
            else:
                q, k, v = query[b, n, :sq].float(), key[b, h, :skv].float(), value[b, h, :skv].float()
            scores = q @ k.T * scale_value
            for i in range(sq):
                for j in range(skv):
                    if block_sparse_mask[b, n, i // bx, j // by] == 0:
                        scores[i, j] = float("-inf")
            probs, row_lse = _softmax_rows(scores)
            if tnd:
                out[q_start:q_start + sq, n] = probs @ v
                lse[q_start:q_start + sq, n, 0] = row_lse
            else:
                out[b, n, :sq] = probs @ v
                lse[b, n, :sq, 0] = row_lse
        q_start += sq
        kv_start += skv
    return out, lse


# ------------------------------------------------------------------------------------------ kv-quant sparse FA

def pack_kv_cache(nope_int8, rope, scales):
    """The per-tile combined cache row: [nope int8 | rope bytes (query dtype) | float32 tile scales as bytes]."""
    return torch.cat([nope_int8, rope.contiguous().view(torch.int8), scales.float().contiguous().view(torch.int8)], -1)


def unpack_kv_cache(key, query_dtype, rope_head_dim, tile_size):
    """(k_nope dequantized and rounded to the query dtype, k_rope) from a combined cache, both float32."""
    esize = torch.empty(0, dtype=query_dtype).element_size()
    dn = (key.shape[-1] - rope_head_dim * esize) * tile_size // (tile_size + 4)
    nope = key[..., :dn].float()
    rope = key[..., dn:dn + rope_head_dim * esize].contiguous().view(query_dtype).float()
    scales = key[..., dn + rope_head_dim * esize:].contiguous().view(torch.float32)
    k_nope = (nope * scales.repeat_interleave(tile_size, -1)).to(query_dtype).float()
    return k_nope, rope


def _kv_rows(kv, layout, lengths, block_table, b):
    if layout == "TND":
        start = 0 if b == 0 else lengths[b - 1]
        return kv[start:lengths[b]]
    if layout == "PA_BSND":
        bs = kv.shape[1]
        rows = [kv[int(block_table[b, p // bs]), p % bs] for p in range(lengths[b])]
        return torch.stack(rows) if rows else kv.new_zeros((0,) + tuple(kv.shape[2:]))
    return kv[b, :(kv.shape[1] if lengths is None else lengths[b])]


def kv_quant_sparse_flash_attention(query, key, sparse_indices, scale_value, block_table=None,
                                    actual_seq_lengths_query=None, actual_seq_lengths_kv=None, sparse_block_size=1,
                                    layout_query="BSND", layout_kv="BSND", sparse_mode=3, tile_size=128,
                                    rope_head_dim=64, sinks=None):
    """MLA-absorb sparse attention over a per-tile int8 cache: K = [dequant(nope) | rope], V = dequant(nope).
    Each index selects tokens [i*block, (i+1)*block) cut at the kv length, stopping at the first -1; mode 3 keeps
    keys j <= i + skv - sq. Probabilities are rounded to the query dtype before the value matmul (as the chip does).
    Returns float32 shaped like query with D = nope width."""
    qtype = query.dtype
    k_nope, k_rope = unpack_kv_cache(key, qtype, rope_head_dim, tile_size)
    k_full = torch.cat([k_nope, k_rope], -1)
    dn = k_nope.shape[-1]
    n1, n2 = query.shape[-2], key.shape[-2]
    group = n1 // n2
    out = torch.zeros(tuple(query.shape[:-1]) + (dn,))
    lq = None if actual_seq_lengths_query is None else [int(x) for x in actual_seq_lengths_query.tolist()]
    lkv = None if actual_seq_lengths_kv is None else [int(x) for x in actual_seq_lengths_kv.tolist()]
    if layout_query == "TND":
        spans, prev = [], 0
        for b, end in enumerate(lq):
            spans.append((b, prev, end - prev))
            prev = end
    else:
        spans = [(b, 0, query.shape[1] if lq is None else lq[b]) for b in range(query.shape[0])]
    for b, start, sq in spans:
        q = query[start:start + sq] if layout_query == "TND" else query[b, :sq]
        idx = sparse_indices[start:start + sq] if layout_query == "TND" else sparse_indices[b, :sq]
        o = out[start:start + sq] if layout_query == "TND" else out[b, :sq]
        k = _kv_rows(k_full, layout_kv, lkv, block_table, b)
        v = _kv_rows(k_nope, layout_kv, lkv, block_table, b)
        skv = k.shape[0]
        for i in range(sq):
            for h in range(n2):
                pos = []
                for blk in idx[i, h].tolist():
                    if blk < 0:
                        break
                    pos += [p for p in range(blk * sparse_block_size, min((blk + 1) * sparse_block_size, skv))
                            if sparse_mode != 3 or p <= i + skv - sq]
                for g in range(group):
                    head = h * group + g
                    logits = (k[pos, h] @ q[i, head].float()) * scale_value
                    extra = [float(sinks[head])] if sinks is not None else []
                    cands = logits.tolist() + extra
                    m = max(cands) if cands else 0.0
                    w = torch.exp(logits - m)
                    total = w.sum() + (math.exp(extra[0] - m) if extra else 0.0)
                    if pos:
                        probs = (w / total).to(qtype).float()
                        o[i, head] = probs @ v[pos, h]
    return out


# ------------------------------------------------------------------------------------------ NSA select attention

def _prefix_spans(tokens, prefix):
    if prefix is None:
        return [(0, tokens)]
    spans, prev = [], 0
    for end in prefix:
        spans.append((prev, end - prev))
        prev = end
    return spans


def nsa_select_attention(query, key, value, topk_indices, scale_value, select_block_size, causal=False,
                         actual_seq_qlen=None, actual_seq_kvlen=None):
    """TND selected-block attention. For token i of a sample and key head h, the keys are the union (in order,
    repeats kept) of blocks [b*size, (b+1)*size) cut at the sample's kv length for b in topk_indices[t, h] (b < 0
    skipped); `causal` keeps keys j <= i. Probabilities are rounded to the input dtype before the value matmul.
    Returns (out float32 [T1,N1,Dv], softmax_max [T1,N1,8], softmax_sum [T1,N1,8]); differentiable in q, k, v."""
    dtype = query.dtype
    t1, n1, _ = query.shape
    n2, dv = key.shape[1], value.shape[2]
    group = n1 // n2
    q_spans = _prefix_spans(t1, actual_seq_qlen)
    kv_spans = _prefix_spans(key.shape[0], actual_seq_kvlen)
    rows, maxes, sums = [], [], []
    for (qs, ql), (ks, kl) in zip(q_spans, kv_spans):
        for i in range(ql):
            t = qs + i
            row, row_max, row_sum = [], [], []
            for h in range(n2):
                pos = []
                for b in topk_indices[t, h].tolist():
                    if b < 0:
                        continue
                    pos += [ks + p for p in range(b * select_block_size, min((b + 1) * select_block_size, kl))
                            if not causal or p <= i]
                q = query[t, h * group:(h + 1) * group].float()
                if not pos:
                    row.append(torch.zeros(group, dv))
                    row_max.append(torch.full((group,), float("-inf")))
                    row_sum.append(torch.zeros(group))
                    continue
                s = q @ key[pos, h].float().T * scale_value
                m = s.max(-1, keepdim=True).values.detach()
                w = torch.exp(s - m)
                total = w.sum(-1, keepdim=True)
                p = w / total
                p = p + (p.to(dtype).float() - p).detach()  # the chip's rounding, with an identity gradient
                row.append(p @ value[pos, h].float())
                row_max.append(m.squeeze(-1))
                row_sum.append(total.squeeze(-1).detach())
            rows.append(torch.cat(row))
            maxes.append(torch.cat(row_max))
            sums.append(torch.cat(row_sum))
    out = torch.stack(rows)
    return out, torch.stack(maxes).unsqueeze(-1).expand(t1, n1, 8), torch.stack(sums).unsqueeze(-1).expand(t1, n1, 8)


def nsa_select_attention_infer(query, key, value, topk_indices, scale_value, head_num, key_value_head_num,
                               select_block_size, page_block_size, layout, block_table, actual_seq_kvlen,
                               actual_seq_qlen=None):
    """Paged-cache selected attention (no mask): query row r of batch b attends the blocks of topk_indices[r, h] in
    order up to the first -1, cut at actual_seq_kvlen[b]. Returns float32 shaped like the op's output."""
    n1, n2 = head_num, key_value_head_num
    group = n1 // n2
    if layout == "TND":
        q = query.float()
        prefix = actual_seq_qlen or list(range(1, len(actual_seq_kvlen) + 1))
        batch_of, prev = [], 0
        for b, end in enumerate(prefix):
            batch_of += [(r, b) for r in range(prev, end)]
            prev = end
    else:
        bsz, s1 = query.shape[:2]
        q = query.float().reshape(bsz * s1, n1, -1)
        lengths = actual_seq_qlen or [s1] * bsz
        batch_of = [(b * s1 + s, b) for b in range(bsz) for s in range(lengths[b])]
    d = q.shape[-1]
    k4 = key.float().reshape(key.shape[0], page_block_size, n2, d)
    v4 = value.float().reshape(value.shape[0], page_block_size, n2, -1)
    dv = v4.shape[-1]
    idx = topk_indices.reshape(-1, n2, topk_indices.shape[-1])
    out = torch.zeros(q.shape[0], n1, dv)
    for r, b in batch_of:
        length = actual_seq_kvlen[b]
        tokens = [(int(block_table[b, p // page_block_size]), p % page_block_size) for p in range(length)]
        for h in range(n2):
            pos = []
            for blk in idx[r, h].tolist():
                if blk < 0:
                    break
                pos += list(range(blk * select_block_size, min((blk + 1) * select_block_size, length)))
            if not pos:
                continue
            k = torch.stack([k4[tokens[p][0], tokens[p][1], h] for p in pos])
            v = torch.stack([v4[tokens[p][0], tokens[p][1], h] for p in pos])
            probs = torch.softmax(q[r, h * group:(h + 1) * group] @ k.T * scale_value, -1)
            out[r, h * group:(h + 1) * group] = probs @ v
    if layout == "BSH":
        return out.reshape(query.shape[0], query.shape[1], n1 * dv)
    if layout == "BSND":
        return out.reshape(query.shape[0], query.shape[1], n1, dv)
    return out


# ------------------------------------------------------------------------------------------ chunk gated delta rule

def chunk_gated_delta_rule(query, key, value, beta, initial_state, actual_seq_lengths, scale=1.0, g=None):
    """Token-by-token gated delta rule (the chunked form computes the same thing): per sequence b (plain lengths
    packed in T) and value head h (key head h // (Nv/Nk)): S = S0[b,h]; S = e^g S; S += beta (v - S k) k^T;
    o = S (scale q). Returns (out float32 (T,Nv,Dv), final_state float32 (B,Nv,Dv,Dk))."""
    t_total, nk, _ = query.shape
    nv = value.shape[1]
    group = nv // nk
    out = torch.zeros(value.shape)
    final = initial_state.float().clone()
    start = 0
    for b, length in enumerate(int(x) for x in actual_seq_lengths.tolist()):
        for h in range(nv):
            S = final[b, h].clone()
            for t in range(start, start + length):
                q = query[t, h // group].float() * scale
                k = key[t, h // group].float()
                if g is not None:
                    S = S * math.exp(float(g[t, h]))
                S = S + float(beta[t, h]) * torch.outer(value[t, h].float() - S @ k, k)
                out[t, h] = S @ q
            final[b, h] = S
        start += length
    return out, final


# ------------------------------------------------------------------------------------------ NSA compress attention

def _spans(prefix):
    spans, prev = [], 0
    for end in prefix:
        spans.append((prev, end - prev))
        prev = end
    return spans


def nsa_importance(probs, sel_len, m, n):
    """[N1, s1, s2] compressed-token probabilities -> [N1, s1, sel_len] select-block importance: block d collects the
    compressed tokens m*(d+1) - j, j in [0, m+n-1), weighted min(j+1, n) on the rising half and min(m+n-1-j, n) after."""
    s2 = probs.shape[-1]
    inner = m + n - 1
    out = torch.zeros(probs.shape[:-1] + (sel_len,))
    for d in range(sel_len):
        for j in range(inner):
            pos = m * (d + 1) - j
            if 0 <= pos < s2:
                times = min(j + 1 if j < inner / 2 else inner - j, n)
                out[..., d] += probs[..., pos] * times
    return out


def nsa_compress_attention(query, key, value, scale_value, compress_block_size, compress_stride, select_block_size,
                           select_block_count, topk_mask=None, atten_mask=None, actual_seq_qlen=None,
                           actual_cmp_seq_kvlen=None, actual_sel_seq_kvlen=None):
    """Returns (out float32 [T1,N1,Dv], importance list per sample [N2, s1, sel] (after topk_mask), softmax_max
    [T1,N1], softmax_sum [T1,N1]). atten_mask (1 = hidden) is read from its top-left corner per sample; masked keys
    are left out. out is differentiable in query/key/value."""
    t1, n1, _ = query.shape
    n2 = key.shape[1]
    group = n1 // n2
    m, n = select_block_size // compress_stride, compress_block_size // compress_stride
    rows = [None] * t1
    smax = torch.full((t1, n1), float("-inf"))
    ssum = torch.zeros(t1, n1)
    importances = []
    for (qs, s1), (ks, s2), (_, sel) in zip(_spans(actual_seq_qlen), _spans(actual_cmp_seq_kvlen),
                                            _spans(actual_sel_seq_kvlen)):
        q = query[qs:qs + s1].float().transpose(0, 1)
        k = key[ks:ks + s2].float().transpose(0, 1).repeat_interleave(group, 0)
        v = value[ks:ks + s2].float().transpose(0, 1).repeat_interleave(group, 0)
        scores = q @ k.transpose(1, 2) * scale_value
        if atten_mask is not None:
            scores = scores.masked_fill(atten_mask[:s1, :s2].bool(), float("-inf"))
        row_max = scores.max(-1, keepdim=True).values.detach()
        safe = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
        w = torch.exp(scores - safe)
        total = w.sum(-1, keepdim=True)
        probs = w / torch.where(total == 0, torch.ones_like(total), total)
        o = (probs @ v).transpose(0, 1)
        for i in range(s1):
            rows[qs + i] = o[i]
        smax[qs:qs + s1] = row_max.squeeze(-1).T
        ssum[qs:qs + s1] = total.detach().squeeze(-1).T
        imp = nsa_importance(probs.detach(), sel, m, n).view(n2, group, s1, sel).sum(1)
        if topk_mask is not None:
            imp = imp.masked_fill(topk_mask[:s1, :sel].bool(), 23333.0)
        importances.append(imp)
    return torch.stack(rows), importances, smax, ssum
