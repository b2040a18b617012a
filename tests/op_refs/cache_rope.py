"""CPU references of the KV-cache / RoPE / MLA serving ops, written in plain torch from their documented
definitions. The lead copies this file to tests/op_refs/cache_rope.py.

MLA prolog: the documented chain is matmul -> RMSNorm -> matmul -> split -> per-head matmul / RoPE for the query,
and matmul -> split -> RMSNorm / RoPE for the latent KV written into paged caches. With reduced-precision inputs
the query branch rounds to the input dtype after each stage (as the upstream golden does); the KV branch rounds
only when it is stored.
"""

import torch


def _rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def interleaved_rope(x, cos, sin):
    """RoPE of x whose value pairs are interleaved: (x0, x1, x2, x3, ...) is first regrouped to (x0, x2, ..., x1,
    x3, ...), then rotated by halves with cos / sin (broadcast against x)."""
    d = x.shape[-1]
    grouped = x.reshape(*x.shape[:-1], d // 2, 2).transpose(-1, -2).reshape(x.shape)
    return grouped * cos + _rotate_half(grouped) * sin


def rms_norm(x, gamma, eps):
    return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps) * gamma.float()


def _nz_rows(cache):
    """A [blocks, block_size, Nkv, H] cache in the fractal NZ layout seen as [blocks, block_size, Nkv * H]: the
    memory holds [blocks, Nkv * H / C0, block_size, C0] with C0 = 32 bytes of values."""
    blocks, block_size, nkv, h = cache.shape
    c0 = 32 // cache.element_size()
    return cache.view(blocks, (nkv * h) // c0, block_size, c0).permute(0, 2, 1, 3)


def write_paged(cache, rows, slots, mode="PA_BSND"):
    """Returns a copy of `cache` [blocks, block_size, Nkv, H] with rows [T, H] written at slots [T] (every one of
    the Nkv heads gets the same row; negative slots are skipped). Dense modes (BSND [B, S, Nkv, H], TND [T, Nkv, H])
    take token t at position t."""
    out = cache.clone()
    if mode in ("BSND", "TND"):
        nkv, h = out.shape[-2:]
        out.view(-1, nkv, h)[:] = rows.to(out.dtype).unsqueeze(1).expand(rows.shape[0], nkv, h)
        return out
    blocks, block_size, nkv, h = out.shape
    for t, slot in enumerate(slots.reshape(-1).tolist()):
        if slot < 0:
            continue
        row = rows[t].to(out.dtype)
        if mode == "PA_NZ":
            view = _nz_rows(out)
            view[slot // block_size, slot % block_size] = row.repeat(nkv).view(view.shape[-2], view.shape[-1])
        else:
            out[slot // block_size, slot % block_size] = row.expand(nkv, h)
    return out


def mla_prolog(token_x, weight_dq, weight_uq_qr, weight_uk, weight_dkv_kr, gamma_cq, gamma_ckv, rope_sin, rope_cos,
               cache_index, kv_cache, kr_cache, eps_cq=1e-5, eps_ckv=1e-5, cache_mode="PA_BSND", qc_qr_scale=1.0,
               kc_scale=1.0, with_query_norm=False):
    """Returns (query [.., N, Hckv], query_rope [.., N, Dr], kv_cache_out, kr_cache_out) in float32 (the
    caches in their own dtype); token_x is [B, S, He] or [T, He]. v3's qc_qr_scale scales the normalised c^Q and
    kc_scale the normalised latent KV; with_query_norm appends that scaled c^Q [.., Hcq]."""
    dt = token_x.dtype
    stage = (lambda t: t.to(dt).float()) if dt != torch.float32 else (lambda t: t)
    lead = token_x.shape[:-1]
    n, d, hckv = weight_uk.shape
    dr = rope_sin.shape[-1]
    x = token_x.reshape(-1, token_x.shape[-1]).float()
    t_count = x.shape[0]
    cos = rope_cos.reshape(t_count, dr).float()
    sin = rope_sin.reshape(t_count, dr).float()

    cq = stage(x @ weight_dq.float())
    cq_norm = stage(rms_norm(cq, gamma_cq, eps_cq) * qc_qr_scale)
    q_all = stage(cq_norm @ weight_uq_qr.float()).reshape(t_count, n, d + dr)
    q_nope = q_all[..., :d]
    query = torch.bmm(q_nope.transpose(0, 1), weight_uk.float()).transpose(0, 1)  # [T, N, Hckv]
    query_rope = interleaved_rope(q_all[..., d:], cos.unsqueeze(1), sin.unsqueeze(1))

    kv_kr = x @ weight_dkv_kr.float()
    ckv = rms_norm(kv_kr[:, :hckv], gamma_ckv, eps_ckv) * kc_scale
    kr = interleaved_rope(kv_kr[:, hckv:], cos, sin)
    kv_out = write_paged(kv_cache, ckv, cache_index, cache_mode)
    kr_out = write_paged(kr_cache, kr, cache_index, cache_mode)
    result = (stage(query).reshape(*lead, n, hckv), stage(query_rope).reshape(*lead, n, dr), kv_out, kr_out)
    return result + (cq_norm.reshape(*lead, -1),) if with_query_norm else result


# ------------------------------------------------------------------------------------------------ MoE routing

def moe_update_expert(expert_ids, eplb_table, expert_scales=None, pruning_threshold=None, active_mask=None,
                      local_rank_id=-1, world_size=-1, balance_mode=0):
    """(balanced_expert_ids, balanced_active_mask): each logical expert e is replaced by one of its eplb_table[e][0]
    physical copies eplb_table[e][1:]: copy local_rank_id // ceil(world_size / count) (mode 0) or token % count (mode
    1). A top-k slot stays active unless its scale < threshold[j] * sum of the token's scales or the token is masked
    off."""
    bs, k = expert_ids.shape
    balanced = torch.empty_like(expert_ids)
    for i in range(bs):
        for j in range(k):
            e = int(expert_ids[i, j])
            count = int(eplb_table[e, 0])
            place = local_rank_id // -(-world_size // count) if balance_mode == 0 else i % count
            balanced[i, j] = eplb_table[e, 1 + place]
    if expert_scales is None:
        return balanced, torch.ones(bs, k, dtype=torch.bool)
    scales = expert_scales.float()
    keep = ~(scales < pruning_threshold.float().reshape(1, k) * scales.sum(-1, keepdim=True))
    if active_mask is not None:
        keep &= active_mask.reshape(bs, 1)
    return balanced, keep


# --------------------------------------------------------------------------------- KV RMSNorm + RoPE into caches

def kv_rmsnorm_rope_rows(kv, gamma, cos, sin, eps=1e-5):
    """(k_rope [B, 1, S, Dr], c_kv [B, 1, S, Dc]) in float32: RMSNorm of kv's first Dc = len(gamma) values, RoPE
    of the remaining interleaved Dr values."""
    dc = gamma.shape[0]
    x = kv.float()
    return interleaved_rope(x[..., dc:], cos.float(), sin.float()), rms_norm(x[..., :dc], gamma, eps)


def write_kv_rows(cache, rows, index, mode):
    """A copy of `cache` with rows [B, 1, S, D] written: Norm caches [B, 1, L, D] at index[b, s]; PA_BNSD caches
    [blocks, block_size, 1, D] at slot index[b * S + s] (negative positions are skipped)."""
    out = cache.clone()
    b_count, _, s_count, d = rows.shape
    flat_index = index.reshape(-1).tolist()
    for b in range(b_count):
        for s in range(s_count):
            at = flat_index[b * s_count + s]
            if at < 0:
                continue
            if mode == "Norm":
                out[b, 0, at] = rows[b, 0, s].to(out.dtype)
            else:
                out[at // out.shape[1], at % out.shape[1], 0] = rows[b, 0, s].to(out.dtype)
    return out


def qkv_rms_norm_rope_cache(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size, head_nums,
                            k_scale=None, v_scale=None, k_offset=None, v_offset=None, eps=1e-6):
    """(q_out, k_cache, v_cache, q_before, k_before, v_before): q and k heads RMS-normalised and rotated by halves
    (cos / sin [B * Srope, Nrope * D] broadcast over S and heads), v as is; k / v quantized as round(x / scale +
    offset) clipped to int8 when a scale is given, then written into PA_NZ caches [blocks, N * D / C0, block_size,
    C0] at slot index[t] (negative: skipped). The *_before rows are [B * S, N * D] float32."""
    b, s, _, d = qkv_size
    nq, nk, nv = head_nums
    x = qkv.float().reshape(b * s, nq + nk + nv, d)
    c = cos.float().reshape(b, -1, cos.shape[1] // d, d)
    sn = sin.float().reshape(b, -1, sin.shape[1] // d, d)

    def norm_rope(part, gamma):
        y = rms_norm(part, gamma, eps).reshape(b, s, part.shape[1], d)
        return (y * c + _rotate_half(y) * sn).reshape(b * s, part.shape[1], d)

    q, k, v = norm_rope(x[:, :nq], q_gamma), norm_rope(x[:, nq:nq + nk], k_gamma), x[:, nq + nk:]

    def to_cache(rows, cache, scale, offset):
        if scale is not None:
            rows = rows / scale.float()
            if offset is not None:
                rows = rows + offset.float()
            rows = rows.round().clamp(-128, 127)
        out = cache.clone()
        blocks, groups, block_size, c0 = out.shape
        for t, slot in enumerate(index.reshape(-1).tolist()):
            if slot >= 0:
                out[slot // block_size, :, slot % block_size] = rows[t].reshape(groups, c0).to(out.dtype)
        return out

    q_flat = q.reshape(b * s, nq * d)
    return (q_flat.to(q_out.dtype), to_cache(k, k_cache, k_scale, k_offset), to_cache(v, v_cache, v_scale, v_offset),
            q_flat, k.reshape(b * s, nk * d), v.reshape(b * s, nv * d))


def scatter_pa_cache(key, slot_mapping, key_cache):
    """A copy of key_cache [blocks, block_size, N, D] with key [T, N, D] row t at slot slot_mapping[t] (negative
    slots skipped)."""
    out = key_cache.clone()
    block_size = out.shape[1]
    for t, slot in enumerate(slot_mapping.tolist()):
        if slot >= 0:
            out[slot // block_size, slot % block_size] = key[t]
    return out


def rope_quant_kvcache(x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, size_splits, offset_k=None,
                       offset_v=None, cache_mode="contiguous", weight_scale=None, activation_scale=None, bias=None):
    """(q, k, v, k_cache_out, v_cache_out): x [B, S, H] (int32 x dequantized first: (x + int bias) * weight_scale *
    activation_scale [+ float bias]) split into q / k / v heads of D = cache.shape[-1]; q, k rotated by halves with
    cos / sin [B, S, 1, D]; k (rotated) and v quantized as round(x * scale + offset) clipped to int8 and written:
    contiguous caches [B, L, N, D] from position indices[b], page caches [blocks, bs, N, D] at slot indices[b*S+s].
    q / k / v are returned float32 [B, S, N, D]."""
    b, s = x.shape[0], (x.shape[1] if x.dim() == 3 else 1)
    xf = x.reshape(b * s, x.shape[-1]).float()
    if x.dtype == torch.int32:
        int_bias = bias is not None and bias.dtype == torch.int32
        if int_bias:
            xf = xf + bias.float()
        xf = xf * weight_scale.float().reshape(-1)
        if activation_scale is not None:
            xf = xf * activation_scale.float().reshape(-1, 1)
        if bias is not None and not int_bias:
            xf = xf + bias.float().reshape(-1)
    d, nkv = v_cache.shape[3], v_cache.shape[2]
    q, k, v = xf.reshape(b, s, -1).split(list(size_splits), dim=-1)
    q, k, v = q.reshape(b, s, -1, d), k.reshape(b, s, nkv, d), v.reshape(b, s, nkv, d)
    c, sn = cos.float().reshape(b, s, 1, d), sin.float().reshape(b, s, 1, d)
    q, k = q * c + _rotate_half(q) * sn, k * c + _rotate_half(k) * sn

    def quant_into(cache, rows, scale, offset):
        per = (lambda t: t.float().reshape(nkv, d)) if scale.numel() == nkv * d else (lambda t: t.float().reshape(d))
        qv = rows * per(scale) + (per(offset) if offset is not None else 0)
        qv = qv.round().clamp(-128, 127).to(torch.int8)
        out = cache.clone()
        if cache_mode == "contiguous":
            for bi in range(b):
                start = int(indices[bi])
                out[bi, start:start + s] = qv[bi]
        else:
            flat = out.view(-1, nkv, d)
            for t, slot in enumerate(indices.reshape(-1).tolist()):
                if slot >= 0:
                    flat[slot] = qv[t // s, t % s]
        return out

    return q, k, v, quant_into(k_cache, k, scale_k, offset_k), quant_into(v_cache, v, scale_v, offset_v)


def moe_token_permute_with_routing_map(tokens, routing_map, probs=None, num_out_tokens=None, drop_and_pad=False):
    """(permuted_tokens, permuted_probs or None, sorted_indices int32). Dropless: the routed (token, expert) pairs
    expert by expert (tokens ascending), cut to num_out_tokens rounded down to a multiple of T; sorted_indices is the
    stable argsort of their token ids. drop_and_pad: per expert the first capacity = num_out_tokens // E tokens routed
    to it, topped up with unrouted tokens; sorted_indices are those token ids. Differentiable in tokens and probs."""
    t, e = routing_map.shape
    num_out = t if num_out_tokens is None else num_out_tokens
    if drop_and_pad:
        cap = num_out // e
        picks = routing_map.to(torch.int8).T.sort(dim=-1, descending=True, stable=True)[1][:, :cap]
        ids = picks.reshape(-1)
        permuted_probs = None
        if probs is not None:
            permuted_probs = probs.T.reshape(-1)[(torch.arange(e).unsqueeze(1) * t + picks).reshape(-1)]
        return tokens[ids], permuted_probs, ids.to(torch.int32)
    rows = num_out // t * t
    mask = routing_map.bool().T
    ids = torch.arange(t).unsqueeze(0).expand(e, t)[mask][:rows]
    permuted_probs = probs.T[mask][:rows] if probs is not None else None
    return tokens[ids], permuted_probs, torch.sort(ids, stable=True)[1].to(torch.int32)


def moe_token_unpermute_with_routing_map(permuted_tokens, sorted_indices, restore_shape, probs=None, routing_map=None,
                                         drop_and_pad=False):
    """[T, H]: every permuted row added back to its token, weighted by its (token, expert) prob. drop_and_pad: row r
    belongs to token sorted_indices[r] and expert r // capacity; dropless: sorted_indices[j] is the row at position j
    of the token-ordered rows (token j // topk, prob = the j-th routed pair in token-major order)."""
    t, h = restore_shape
    rows = permuted_tokens.shape[0]
    x = permuted_tokens.float()
    out = torch.zeros(t, h, dtype=torch.float32)
    if drop_and_pad:
        tok = sorted_indices.long()
        weight = torch.ones(rows)
        if probs is not None:
            expert = torch.arange(rows) // (rows // probs.shape[1])
            weight = probs.float()[tok, expert]
        return out.index_add(0, tok, x * weight.unsqueeze(1))
    topk = rows // t
    picked = x[sorted_indices.long()].reshape(t, topk, h)
    if probs is not None:
        picked = picked * probs.float()[routing_map.bool()].reshape(t, topk, 1)
    return picked.sum(1)
