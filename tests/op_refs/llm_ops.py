"""CPU references of the LLM long-tail custom ops (matmul variants, MoE gating v2, attention helpers, linear
attention), written in plain torch from their documented definitions. To be merged into tests/custom_op_refs.py.

Reduced-precision inputs are computed in float32 and rounded once at the end, except where the op is documented
(or its upstream golden is written) as a chain of rounded stages: those stages round the same way here.
"""

import torch
import torch.nn.functional as F


# --------------------------------------------------------------------------------------------- matmul variants

def _packed_scale_values(packed):
    """The float32 scales in bits 0-31 of an int64 (npu_trans_quant_param) scale."""
    return (packed & 0xFFFFFFFF).to(torch.int32).view(torch.float32)


def transpose_batchmatmul(x1, x2, scale=None, perm_x1=(0, 1, 2), perm_x2=(0, 1, 2), batch_split_factor=1):
    """y = (x1^perm_x1 @ x2^perm_x2)^[1, 0, 2] as (M, B, N); with scale (B * N values, float32 or int64 packed),
    int8 (M, 1, B * N) = saturate(round(y * scale)); with batch_split_factor f, (f, M, B * N / f)."""
    y = torch.bmm(x1.permute(*perm_x1).float(), x2.permute(*perm_x2).float()).permute(1, 0, 2)
    m, b, n = y.shape
    if scale is not None:
        s = _packed_scale_values(scale) if scale.dtype == torch.int64 else scale.float()
        return (y.reshape(m, b * n) * s.reshape(-1)).round().clamp(-128, 127).to(torch.int8).reshape(m, 1, b * n)
    if batch_split_factor > 1:
        y = y.reshape(m, batch_split_factor, b * n // batch_split_factor).transpose(0, 1)
    return y.to(x1.dtype).contiguous()


def batch_gather_matmul(y, x, weight_b, indices, weight_a=None, layer_idx=0, scale=1e-3, y_offset=0,
                        y_slice_size=-1):
    """LoRA BGMV: row t of y, columns [y_offset, y_offset + size), gains scale * B_i (A_i x_t) with
    i = indices[t] (A_i = weight_a[i, layer_idx] of (R, H1), B_i = weight_b[i, layer_idx] of (H2, R)); without
    weight_a, B_i x_t. Rows whose index is outside [0, adapters) are left alone. Each stage (A x, B h, the
    scaling, the sum) is rounded to y's dtype, as a chain of float16 products / elementwise ops would be."""
    size = y.shape[1] if y_slice_size == -1 else y_slice_size
    out = y.clone()
    dt = y.dtype
    for t in range(y.shape[0]):
        i = int(indices[t])
        if i < 0 or i >= weight_b.shape[0]:
            continue
        h = x[t].float()
        if weight_a is not None:
            h = (weight_a[i, layer_idx].float() @ h).to(dt).float()
        z = (weight_b[i, layer_idx].float() @ h).to(dt)
        z = (z.float() * scale).to(dt)
        window = out[t, y_offset:y_offset + size]
        out[t, y_offset:y_offset + size] = (window.float() + z.float()).to(dt)
    return out


def fused_matmul(x1, x2, bias=None, x3=None, fused_op_type=""):
    """y = OP(x1 @ x2 + bias, x3): add / mul with x3, gelu_erf / gelu_tanh, '' for none; '16cast32' keeps the
    float32 product. Computed in float32, rounded once to x1's dtype."""
    y = torch.matmul(x1.float(), x2.float())
    if bias is not None:
        y = y + bias.float()
    if fused_op_type == "add":
        y = y + x3.float()
    elif fused_op_type == "mul":
        y = y * x3.float()
    elif fused_op_type == "gelu_erf":
        y = F.gelu(y)
    elif fused_op_type == "gelu_tanh":
        y = F.gelu(y, approximate="tanh")
    return y if fused_op_type == "16cast32" else y.to(x1.dtype)


# ------------------------------------------------------------------------------------------- MoE gating top-k

def moe_gating_top_k_softmax_v2(x, k, finished=None, renorm=0, output_softmax=False):
    """renorm 0: softmax over experts (float32), then the k largest (stable: lower expert first on ties);
    renorm 1: the k largest logits, then softmax over them. Finished rows get expert index E (the expert count).
    Returns (y in x's dtype, expert_idx int32, softmax float32 of x's shape or an empty (0,) tensor)."""
    experts = x.shape[-1]
    rows = x.reshape(-1, experts)
    probs = torch.softmax(rows.float(), dim=-1)
    if renorm == 0:
        order = torch.sort(probs, dim=-1, descending=True, stable=True).indices[:, :k]
        values = probs.gather(-1, order)
    else:
        order = torch.sort(rows, dim=-1, descending=True, stable=True).indices[:, :k]
        values = torch.softmax(rows.gather(-1, order).float(), dim=-1)
    if finished is not None:
        order = order.masked_fill(finished.reshape(-1, 1), experts)
    shape = x.shape[:-1] + (k,)
    softmax = probs.reshape(x.shape) if (renorm == 0 and output_softmax) else torch.empty(0)
    return values.to(x.dtype).reshape(shape), order.to(torch.int32).reshape(shape), softmax


# ------------------------------------------------------------------------------------------- attention helpers

def _token_major(stats, bounds, heads):
    """(T, N) per-token values of a TND softmax statistic stored sequence by sequence as (N, S_b)."""
    flat = stats.reshape(-1)
    parts = [flat[s * heads:e * heads].reshape(heads, e - s).t() for s, e in zip(bounds[:-1], bounds[1:])]
    return torch.cat(parts, 0)


def _seq_bounds(actual_seq_qlen):
    """[0, e1, ..., T] from cumulative sequence ends given with or without the leading 0."""
    ends = [int(v) for v in actual_seq_qlen]
    return ends if ends and ends[0] == 0 else [0] + ends


def ring_attention_update(prev_out, prev_max, prev_sum, cur_out, cur_max, cur_sum, actual_seq_qlen=None,
                          input_layout="SBH", input_softmax_layout=""):
    """Merges two partial attention results by their softmax max / sum (8 equal lanes each):
    max = max(m1, m2), sum = s1 e^(m1 - max) + s2 e^(m2 - max), out = o1 s1 e^(m1 - max) / sum + o2 (...) / sum.
    SBH: out (S, B, N * D), stats (B, N, S, 8). TND: out (T, N, D), stats (T, N, 8) token by token with
    input_softmax_layout='TND', else stored per sequence (actual_seq_qlen) as (N, S_b, 8) blocks."""
    m1, m2, s1, s2 = prev_max.float(), cur_max.float(), prev_sum.float(), cur_sum.float()
    new_max = torch.maximum(m1, m2)
    w1, w2 = s1 * torch.exp(m1 - new_max), s2 * torch.exp(m2 - new_max)
    new_sum = w1 + w2
    f1, f2 = (w1 / new_sum)[..., 0], (w2 / new_sum)[..., 0]
    o1, o2 = prev_out.float(), cur_out.float()
    if input_layout == "SBH":
        s, b, h = o1.shape
        n = f1.shape[1]
        f1, f2 = f1.permute(2, 0, 1).unsqueeze(-1), f2.permute(2, 0, 1).unsqueeze(-1)
        out = (o1.reshape(s, b, n, h // n) * f1 + o2.reshape(s, b, n, h // n) * f2).reshape(s, b, h)
    else:
        t, n, _ = o1.shape
        if input_softmax_layout != "TND":
            bounds = _seq_bounds(actual_seq_qlen)
            f1, f2 = _token_major(f1, bounds, n), _token_major(f2, bounds, n)
        out = o1 * f1.unsqueeze(-1) + o2 * f2.unsqueeze(-1)
    return out.to(prev_out.dtype), new_max, new_sum


def attention_update(lse, local_out):
    """Merges SP partial results: lse_m = max + log(sum_i exp(lse_i - max)), O = sum_i O_i exp(lse_i - lse_m)."""
    lses = torch.stack([t.float() for t in lse])
    outs = torch.stack([t.float() for t in local_out])
    top = lses.max(0).values
    lse_m = top + torch.log(torch.exp(lses - top).sum(0) + 1e-20)
    out = (outs * torch.exp(lses - lse_m).unsqueeze(-1)).sum(0)
    return out.to(local_out[0].dtype), lse_m


def advance_step_flashattn(input_tokens, sampled_token_ids, input_positions, seq_lens, slot_mapping, block_tables,
                           num_seqs, num_queries, block_size):
    """vLLM's advance_step_flashattn on copies: each query's token becomes its sampled token, its position the old
    length, its length grows by one, its slot is block_tables[q, pos // block_size] * block_size + pos % block_size;
    padded sequences [num_queries, num_seqs) get token 0, position 0 and slot -1."""
    tokens, positions, lens, slots = (t.clone() for t in (input_tokens, input_positions, seq_lens, slot_mapping))
    for q in range(num_queries):
        pos = int(seq_lens[q])
        tokens[q] = sampled_token_ids[q, 0]
        positions[q] = pos
        lens[q] = pos + 1
        slots[q] = int(block_tables[q, pos // block_size]) * block_size + pos % block_size
    tokens[num_queries:num_seqs] = 0
    positions[num_queries:num_seqs] = 0
    slots[num_queries:num_seqs] = -1
    return tokens, positions, lens, slots


def advance_step_spec(input_tokens, sampled_token_ids, input_positions, seq_lens, slot_mapping, block_tables,
                      num_seqs, block_size, spec_token, accepted_num):
    """The speculative form: every slot of a request (1 + spec_num of them) moves 1 + accepted tokens forward, its
    length is its position + 1; a request's first token becomes its last accepted sampled token (the one before
    the first -1), the others its speculative tokens; slots follow the positions through the block table."""
    per_req = 1 + spec_token.shape[1]
    tokens, positions, lens, slots = (t.clone() for t in (input_tokens, input_positions, seq_lens, slot_mapping))
    positions += accepted_num.repeat_interleave(per_req) + 1
    lens.copy_(positions + 1)
    for r in range(num_seqs):
        row = sampled_token_ids[r].tolist()
        valid = row.index(-1) if -1 in row else len(row)
        tokens[r * per_req] = row[valid - 1]  # valid == 0 reads the last column, as Python indexing does
        tokens[r * per_req + 1:(r + 1) * per_req] = spec_token[r]
    for i in range(positions.numel()):
        pos = int(positions[i])
        slots[i] = int(block_tables[i // per_req, pos // block_size]) * block_size + pos % block_size
    return tokens, positions, lens, slots


def scatter_list(var, indices, updates, mask=None, axis=-2):
    """Copies of var where var[i] along `axis` (of updates, whose dim 0 is the list index) from start indices[i]
    (or indices[i][0], length indices[i][1]) takes updates[i]; mask[i] == 0 leaves var[i] alone."""
    out = [v.clone() for v in var]
    ax = axis % updates.dim()
    for i, v in enumerate(out):
        if mask is not None and int(mask[i]) == 0:
            continue
        if indices.dim() == 2:
            start, length = int(indices[i][0]), min(int(indices[i][1]), updates.shape[ax])
        else:
            start, length = int(indices[i]), updates.shape[ax]
        if length > 0:
            v.narrow(ax - 1, start, length).copy_(updates[i].narrow(ax - 1, 0, length))
    return out


# ------------------------------------------------------------------------------------------- linear attention

def recurrent_gated_delta_rule(query, key, value, state, beta=None, scale=None, actual_seq_lengths=None,
                               ssm_state_indices=None, num_accepted_tokens=None, g=None, gk=None):
    """Gated delta rule, token by token in float32 (state rows (Nv, Dv, Dk) kept in float32 until the end):
    S = S * e^g_t * e^gk_t (per key column); S += beta_t (v_t - S k_t) k_t^T; o_t = S (scale q_t).
    Value head h reads key head h // (Nv / Nk). Sequence b starts from state[idx[start_b + accepted_b - 1]] and
    token t writes its state to state[idx[t]]. Returns (o in value's dtype, new state in state's dtype)."""
    t_total, nv, dv = value.shape
    nk, dk = query.shape[1], query.shape[2]
    group = nv // nk
    q = query.float().repeat_interleave(group, 1) * (dk ** -0.5 if scale is None else scale)
    k = key.float().repeat_interleave(group, 1)
    v = value.float()
    b = torch.ones(t_total, nv) if beta is None else beta.float()
    alpha = torch.ones(t_total, nv) if g is None else g.float().exp()
    work = state.float().clone()
    lens = [1] * t_total if actual_seq_lengths is None else [int(n) for n in actual_seq_lengths]
    idx = list(range(t_total)) if ssm_state_indices is None else [int(i) for i in ssm_state_indices]
    out = torch.empty(t_total, nv, dv)
    start = 0
    for s, length in enumerate(lens):
        first = start + (int(num_accepted_tokens[s]) - 1 if num_accepted_tokens is not None else 0)
        st = work[idx[first]].clone()
        for t in range(start, start + length):
            st = st * alpha[t].view(nv, 1, 1)
            if gk is not None:
                st = st * gk[t].float().exp().unsqueeze(1)
            kt = k[t].unsqueeze(1)
            st = st + ((v[t] - (st * kt).sum(-1)) * b[t].unsqueeze(1)).unsqueeze(-1) * kt
            work[idx[t]] = st
            out[t] = (st * q[t].unsqueeze(1)).sum(-1)
        start += length
    return out.to(value.dtype), work.to(state.dtype)


def fused_causal_conv1d(x, weight, conv_states, query_start_loc=None, cache_indices=None, num_accepted_tokens=None,
                        pad_slot_id=-1, residual_connection=0, num_computed_tokens=None,
                        block_idx_first_scheduled_token=None, block_idx_last_scheduled_token=None,
                        initial_state_idx=None, block_size=128, conv_mode="default"):
    """Qwen3-Next / Pangu causal conv1d over packed sequences with a conv-state cache, as documented: returns
    (y, new conv_states). Padded sequences (read line == pad_slot_id) keep their state and output zeros."""
    states = conv_states.clone()
    dim = x.shape[-1]
    xf = x.reshape(-1, dim).float()
    if query_start_loc is None:
        step = x.shape[1]
        query_start_loc = torch.arange(0, (x.shape[0] + 1) * step, step)
    bounds = [int(v) for v in query_start_loc]
    width, cap = weight.shape[0], states.shape[1]
    w = weight.float()
    apc = block_idx_last_scheduled_token is not None
    y = torch.zeros_like(xf)
    for b in range(len(bounds) - 1):
        start, end = bounds[b], bounds[b + 1]
        length = end - start
        seq = xf[start:end]
        if apc:
            read_line = int(cache_indices[b, int(initial_state_idx[b])])
            write_line = int(cache_indices[b, int(block_idx_last_scheduled_token[b])])
        elif cache_indices is not None:
            read_line = write_line = int(cache_indices[b])
        else:
            read_line = write_line = b
        if read_line == pad_slot_id:
            continue
        if num_computed_tokens is not None and int(num_computed_tokens[b]) == 0:
            offset, cached = 0, torch.zeros(width - 1, dim)
        else:
            offset = int(num_accepted_tokens[b]) - 1 if num_accepted_tokens is not None else cap - (width - 1)
            cached = states[read_line, :offset + width - 1].float()
        padded = torch.cat([cached, seq])
        kept = min(cap, padded.shape[0])
        states[write_line, cap - kept:] = padded[padded.shape[0] - kept:].to(states.dtype)
        window = padded[offset:]
        if apc:
            first, last = int(block_idx_first_scheduled_token[b]), int(block_idx_last_scheduled_token[b])
            done = int(num_computed_tokens[b]) % block_size
            tail = (length - (block_size - done)) % block_size
            last_full = length - tail - (block_size if tail == 0 else 0)
            blocks = last - first
            for chunk in range(blocks):
                edge = last_full - (blocks - chunk - 1) * block_size
                line = int(cache_indices[b, first + chunk])
                states[line, cap - (width - 1):] = window[edge:edge + width - 1].to(states.dtype)
        out = sum(w[j] * window[j:j + length] for j in range(width))
        if conv_mode == "pangu":
            reset = min(max(width - 1 - int(num_computed_tokens[b]), 0), length)
            out[:reset] = 0
        if residual_connection:
            out = out + seq
        y[start:end] = out
    return y.to(x.dtype).reshape(x.shape), states


def masked_causal_conv1d(x, weight, mask=None):
    """Depthwise causal conv along S of x (S, B, H) with weight (W, H): out[s] = sum_k w[k] x[s - (W - 1 - k)]
    (zeros before the start); positions with mask[b, s] False are zero. Differentiable; float32 inside."""
    s_len, width = x.shape[0], weight.shape[0]
    xf, wf = x.float(), weight.float()
    out = torch.zeros_like(xf)
    for k in range(width):
        shift = width - 1 - k
        if shift < s_len:
            out = out + F.pad(xf[:s_len - shift], (0, 0, 0, 0, shift, 0)) * wf[k]
    if mask is not None:
        out = out.masked_fill(~mask.t().unsqueeze(-1), 0.0)
    return out.to(x.dtype)
