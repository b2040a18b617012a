"""CPU references of more torch_npu quantization ops (npu_rms_norm_quant_v2, npu_kronecker_quant, npu_quant_max,
npu_grouped_dynamic_block_quant, npu_moe_init_routing_quant), in plain torch from their documented formulas.
Float32 arithmetic, rounding half to even (the NPU's CAST_RINT) unless a round mode says otherwise, integer results
saturated (NaN stored as 0). Imported by the tests as `from op_refs import quant_more as ref`."""

import torch

F32 = torch.float32


def _saturate(v, lo, hi):
    """NaN becomes 0, everything else is clamped to [lo, hi]."""
    return torch.nan_to_num(v.to(torch.float64), nan=0.0).clamp(lo, hi)


def round_by(v, mode="rint"):
    if mode == "rint":
        return torch.round(v)  # half to even
    if mode == "round":
        return torch.sign(v) * torch.floor(v.abs() + 0.5)  # half away from zero
    return {"floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc}[mode](v)


def int4_pack32(values):
    """Integers in [-8, 7] (last dim a multiple of 8) packed eight to an int32, lowest nibble first."""
    v = values.to(torch.int64) & 0xF
    v = v.reshape(*v.shape[:-1], v.shape[-1] // 8, 8)
    word = (v << (4 * torch.arange(8))).sum(-1)
    return torch.where(word >= 2 ** 31, word - 2 ** 32, word).to(torch.int32)


def int4_unpack32(packed):
    """The int8 values of int4 data carried eight to an int32."""
    nibbles = torch.stack([(packed.to(torch.int64) >> (4 * j)) & 0xF for j in range(8)], dim=-1).flatten(-2)
    return torch.where(nibbles >= 8, nibbles - 16, nibbles).to(torch.int8)


def _int8(q):
    return _saturate(q, -128, 127).to(torch.int8)


# --- npu_rms_norm_quant_v2 --------------------------------------------------------------------------------------

def rms_norm_quant_v2(x, gamma, scale, offset=None, beta=None, epsilon=1e-6, div_mode=True, int4=False):
    """rstd = 1 / sqrt(mean(x^2, last dim) + eps); v = x * rstd * gamma (+ beta); y = rint(v / scale (+ offset))
    (v * scale without div_mode); int8, or int4 packed eight to an int32. Returns (y, rstd [..., 1])."""
    xf = x.to(F32)
    h = x.shape[-1]
    rstd = torch.reciprocal(torch.sqrt((xf * xf).mean(-1, keepdim=True) + epsilon))
    v = xf * rstd * gamma.to(F32).reshape(h)
    if beta is not None:
        v = v + beta.to(F32).reshape(h)
    s = scale.to(F32).reshape(-1)
    v = v / s if div_mode else v * s
    if offset is not None:
        v = v + offset.to(F32).reshape(-1)
    q = torch.round(v)
    if int4:
        return int4_pack32(_saturate(q, -8, 7)), rstd
    return _int8(q), rstd


# --- npu_kronecker_quant ----------------------------------------------------------------------------------------

def kronecker_quant(x, p1, p2, clip_ratio=1.0):
    """t = p1 @ x[k] @ p2 per batch k (float32); ratio = 7 * clip_ratio; out = rint(float16(t * ratio / max|t|))
    saturated to int4 and packed eight to an int32; quant_scale[k] = max|t| / ratio."""
    t = p1.to(F32) @ (x.to(F32) @ p2.to(F32))
    top = t.abs().amax(dim=(1, 2), keepdim=True)
    ratio = torch.full_like(top, 7.0 * clip_ratio)
    v = (t * (ratio / top)).to(torch.float16).to(F32)
    return int4_pack32(_saturate(torch.round(v), -8, 7)), (top / ratio).reshape(-1)


# --- npu_quant_max ----------------------------------------------------------------------------------------------

def quant_max(x, scale, round_mode="rint", group_list=None, convert=None):
    """y = round(x * scale[g]) as int8 for the rows (dim 0) of group g (group_list: cumulative row ends); amax[g] =
    max |x| over the group in x's dtype (0 for an empty group). Without group_list (or with one group) one group.
    With `convert` (a float target), y = convert(x * scale[g]) instead: the target's conversion rounds."""
    xf = x.to(F32)
    ends = [x.shape[0]] if group_list is None else [int(e) for e in group_list.tolist()]
    y = torch.zeros_like(xf)
    amax = torch.zeros(len(ends), dtype=F32)
    start = 0
    for g, end in enumerate(ends):
        if end > start:
            part = xf[start:end]
            scaled = part * scale.to(F32)[g]
            y[start:end] = scaled if convert is not None else round_by(scaled, round_mode)
            amax[g] = part.abs().max()
        start = end
    return (_int8(y) if convert is None else convert(y)), amax.to(x.dtype)


# --- npu_grouped_dynamic_block_quant ----------------------------------------------------------------------------

def grouped_dynamic_block_quant(x, group_list, min_scale=0.0, row_block_size=1, col_block_size=128, target_max=127.0,
                                convert=None):
    """Blocks of row_block_size x col_block_size that restart at each row group (group_list: cumulative ends along
    M): m = T / amax (raised to min_scale when > 0), y = rint(x * m) as int8, scale = amax / T (lowered to
    1 / min_scale), T = target_max. With `convert` (a float target), y = convert(x * m clamped to +-T) and a zero
    block gives zeros. Group g's scale rows start at start_g // row_block_size + g; scale is
    [..., M // row_block_size + G, ceil(N / col_block_size)], 0 where no block maps."""
    xf = x.to(F32)
    lead = xf.shape[:-2]
    rows, cols = xf.shape[-2:]
    cb = -(-cols // col_block_size)
    ends = [int(e) for e in group_list.tolist()]
    scale = torch.zeros(*lead, rows // row_block_size + len(ends), cb)
    y = torch.zeros(xf.shape, dtype=torch.int8 if convert is None else F32)
    one = torch.ones((), dtype=F32)
    start = 0
    for g, end in enumerate(ends):
        n = end - start
        if n > 0:
            rb = -(-n // row_block_size)
            pad = torch.zeros(*lead, rb * row_block_size, cb * col_block_size)
            pad[..., :n, :cols] = xf[..., start:end, :].abs()
            top = pad.reshape(*lead, rb, row_block_size, cb, col_block_size).amax(dim=(-3, -1))
            s = top * (one / target_max)
            m = (one / top) * target_max
            if min_scale > 0:
                s = s.clamp(max=float(one / min_scale))
                m = m.clamp(min=min_scale)
            if convert is not None:
                m = torch.where(top > 0, m, torch.zeros_like(m))
            first = start // row_block_size + g
            scale[..., first:first + rb, :] = s
            full = m.repeat_interleave(row_block_size, -2).repeat_interleave(col_block_size, -1)[..., :n, :cols]
            v = xf[..., start:end, :] * full
            y[..., start:end, :] = _int8(torch.round(v)) if convert is None else v.clamp(-target_max, target_max)
        start = end
    return (y if convert is None else convert(y)), scale


# --- npu_moe_init_routing_quant ---------------------------------------------------------------------------------

def moe_init_routing_quant(x, expert_idx, scale=None, offset=None, active_num=1024, expert_capacity=0,
                           expert_num=256, drop_pad_mode=0, expert_tokens_num_mode=0,
                           expert_tokens_before_capacity_flag=False, quant_mode=1):
    """The [tokens, k] positions sorted stably by expert. Dropless: expanded row i = x[order[i] // k] for the first
    active_num positions (all when active_num <= 0), expanded_row_idx[order[i]] = i, per-expert counts (mode 2) or
    their cumsum (mode 1). Drop / pad: [expert_num, capacity, H], each expert's first `capacity` tokens at
    expert * capacity + rank, expanded_row_idx that slot or -1, counts before dropping with the flag. Static quant:
    rint(x * scale + offset) in float16; dynamic: row (times the smoothing scale of its expert), scale = max|row| /
    127, q = rint(row / scale)."""
    tokens, h = x.shape
    k = expert_idx.shape[1]
    flat = expert_idx.reshape(-1).to(torch.int64)
    nk = flat.numel()
    order = torch.sort(flat, stable=True).indices
    srt = flat[order]
    counts = torch.bincount(flat, minlength=expert_num)
    tokens_out = before_out = None
    if drop_pad_mode == 0:
        rows = min(active_num, nk) if active_num > 0 else nk
        slots = torch.arange(rows)
        sources = order[:rows]
        row_idx = torch.empty(nk, dtype=torch.int64)
        row_idx[order] = torch.arange(nk)
        if expert_tokens_num_mode == 1:
            tokens_out = counts.cumsum(0).to(torch.int32)
        elif expert_tokens_num_mode == 2:
            tokens_out = counts.to(torch.int32)
    else:
        rows = expert_num * expert_capacity
        first = counts.cumsum(0) - counts
        rank = torch.arange(nk) - first[srt]
        keep = rank < expert_capacity
        slots = (srt * expert_capacity + rank)[keep]
        sources = order[keep]
        row_idx = torch.full((nk,), -1, dtype=torch.int64)
        row_idx[sources] = slots
        if expert_tokens_before_capacity_flag:
            before_out = counts.to(torch.int32)
    src = x[sources // k]
    row_scale = None
    if quant_mode == 0:
        v = src.to(torch.float16) * scale.reshape(-1)[0].to(torch.float16)
        if offset is not None:
            v = v + offset.reshape(-1)[0].to(torch.float16)
        q = _int8(torch.round(v.to(F32)))
    else:
        v = src.to(F32)
        if scale is not None:
            smooth = scale.to(F32).reshape(-1, h)
            v = v * (smooth if smooth.shape[0] == 1 else smooth[flat[sources]])
        row_scale = v.abs().amax(-1) * (torch.ones((), dtype=F32) / 127.0)
        q = _int8(torch.round(v / row_scale.unsqueeze(-1)))
    expanded = torch.zeros(rows, h, dtype=torch.int8)
    expanded[slots] = q
    if drop_pad_mode == 1:
        expanded = expanded.reshape(expert_num, expert_capacity, h)
    expanded_scale = None
    if quant_mode == 1:
        expanded_scale = torch.zeros(rows, dtype=F32)
        expanded_scale[slots] = row_scale
    return expanded, row_idx.to(torch.int32), tokens_out, before_out, expanded_scale
