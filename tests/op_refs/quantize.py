"""CPU references of torch_npu's quantization ops (npu_dynamic_quant, npu_quantize, npu_anti_quant, ...), written in
plain torch from their documented formulas. Arithmetic is float32 in the order the device kernels use (a reciprocal
where they multiply by one, a division where they divide), so results compare exactly or within one step of the
integer grid. Rounding is half to even (the NPU's CAST_RINT) unless a round mode says otherwise.

To be merged into tests/custom_op_refs.py (imported there as `ref`); names do not clash with what it has.
"""

import torch

F32 = torch.float32
INT4_MIN, INT4_MAX = -8, 7
INT8_MIN, INT8_MAX = -128, 127


# --- int4 carriers -------------------------------------------------------------------------------------------

def int4_pack32(values):
    """int4 values (integers in [-8, 7], last dim a multiple of 8) packed eight to an int32, lowest nibble first."""
    v = values.to(torch.int64) & 0xF
    v = v.reshape(*v.shape[:-1], v.shape[-1] // 8, 8)
    word = (v << (4 * torch.arange(8))).sum(-1)
    return torch.where(word >= 2 ** 31, word - 2 ** 32, word).to(torch.int32)


def int4_unpack32(packed):
    """The int8 values of int4 data carried eight to an int32 (lowest nibble first)."""
    nibbles = torch.stack([(packed.to(torch.int64) >> (4 * j)) & 0xF for j in range(8)], dim=-1).flatten(-2)
    return torch.where(nibbles >= 8, nibbles - 16, nibbles).to(torch.int8)


def int4_pack8(values):
    """int4 values packed two to an int8 (the even element in the low nibble)."""
    v = values.to(torch.int64) & 0xF
    v = v.reshape(*v.shape[:-1], v.shape[-1] // 2, 2)
    byte = v[..., 0] | (v[..., 1] << 4)
    return torch.where(byte >= 128, byte - 256, byte).to(torch.int8)


def int4_unpack8(packed):
    nibbles = torch.stack([(packed.to(torch.int64) >> (4 * j)) & 0xF for j in range(2)], dim=-1).flatten(-2)
    return torch.where(nibbles >= 8, nibbles - 16, nibbles).to(torch.int8)


# --- shared pieces ------------------------------------------------------------------------------------------

def _f32(t):
    return t.to(F32)


def _over(numerator, t):
    """numerator / t elementwise in float32 (a true division, not a reciprocal times numerator)."""
    return torch.full_like(t, numerator) / t


def _saturate(v, lo, hi):
    """NaN becomes 0 (as the NPU casts it), everything else is clamped to [lo, hi] (in double: int32's bounds are
    exact there)."""
    return torch.nan_to_num(v.to(torch.float64), nan=0.0).clamp(lo, hi)


def round_mode(v, mode="rint"):
    if mode == "rint":
        return torch.round(v)  # half to even
    if mode == "round":
        return torch.sign(v) * torch.floor(v.abs() + 0.5)  # half away from zero
    return {"floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc}[mode](v)


def _store(q, int4, carrier=32):
    """Rounded values as the op returns them: int8, or int4 packed into int32 (or int8 pairs)."""
    if int4:
        q = _saturate(q, INT4_MIN, INT4_MAX)
        return int4_pack32(q) if carrier == 32 else int4_pack8(q)
    return _saturate(q, INT8_MIN, INT8_MAX).to(torch.int8)


def row_groups(rows, ends, counts=False):
    """The group of each row for cumulative group ends (or group sizes with counts=True): the number of ends at or
    below the row; rows past the last end get len(ends)."""
    ends = ends.to(torch.int64)
    if counts:
        ends = torch.cumsum(ends, 0)
    return torch.searchsorted(ends, torch.arange(rows), right=True)


def _rows(t):
    return t.reshape(-1, t.shape[-1])


# --- npu_dynamic_quant / npu_dynamic_quant_asymmetric -----------------------------------------------------------

def dynamic_quant(x, smooth_scales=None, group_index=None, dst_type=torch.int8, quant_mode="pertoken",
                  symmetric=True):
    """(y, scale) or, asymmetric, (y, scale, offset). Symmetric: scale = amax / DMAX, y = rint(x * (DMAX / amax));
    asymmetric: scale = max((max - min) / (2 DMAX + 1), 1e-12), offset = DMAX - max / scale,
    y = rint(x * (1 / scale) + offset). DMAX is 127 (int8) or 7 (int4, torch.quint4x2 packed into int32)."""
    int4 = dst_type == torch.quint4x2
    dmax = 7.0 if int4 else 127.0
    xs = _f32(x)
    if quant_mode == "perchannel":
        if smooth_scales is not None:
            xs = xs * _f32(smooth_scales).unsqueeze(-1)
    elif smooth_scales is not None:
        if group_index is None:
            xs = xs * _f32(smooth_scales)
        else:
            table = torch.cat([_f32(smooth_scales), torch.ones(1, x.shape[-1])])
            xs = (_rows(xs) * table[row_groups(_rows(xs).shape[0], group_index)]).reshape(x.shape)

    def reduce(t, fn):
        if quant_mode == "pertensor":
            return fn(t.reshape(-1), 0, keepdim=True)
        return fn(t, -1 if quant_mode == "pertoken" else -2, keepdim=True)

    def squeeze(t):
        if quant_mode == "pertensor":
            return t.reshape(1)
        return t.squeeze(-1 if quant_mode == "pertoken" else -2)

    amax = lambda t, d, keepdim: t.amax(d, keepdim=keepdim)  # noqa: E731
    amin = lambda t, d, keepdim: t.amin(d, keepdim=keepdim)  # noqa: E731
    if symmetric:
        top = reduce(xs.abs(), amax)
        scale = top * (torch.ones((), dtype=F32) / dmax)
        q = torch.round(xs * _over(dmax, top))
        return _store(q, int4), squeeze(scale)
    hi, lo = reduce(xs, amax), reduce(xs, amin)
    scale = ((hi - lo) / (2 * dmax + 1)).clamp_min(1e-12)
    offset = dmax - hi / scale
    q = torch.round(xs * (1.0 / scale) + offset)
    return _store(q, int4), squeeze(scale), squeeze(offset)


# --- npu_quantize / npu_group_quant / npu_anti_quant ------------------------------------------------------------

def _along(param, x, axis):
    """A 1-d per-channel parameter shaped to broadcast along x's `axis` (or a same-rank tensor as it is)."""
    if param.dim() == x.dim() and x.dim() > 1:
        return param
    shape = [1] * x.dim()
    shape[axis] = param.numel()
    return param.reshape(shape)


def quantize(x, scales, zero_points, dtype, axis=1, div_mode=True):
    """div_mode: rint(x / scales + zero_points) saturated to the output type (int8, uint8 or int32).
    Otherwise rint(x * scales + zero_points) to int8, or int4 packed into int32 (dtype torch.quint4x2); axis -2
    is per row, any other axis the last one."""
    xf = _f32(x)
    if div_mode:
        ax = axis % x.dim()
        v = xf / _along(_f32(scales), x, ax)
        if zero_points is not None:
            v = v + _along(_f32(zero_points), x, ax)
        q = torch.round(v)
        out = {torch.qint8: torch.int8, torch.int8: torch.int8, torch.quint8: torch.uint8, torch.uint8: torch.uint8,
               torch.qint32: torch.int32, torch.int32: torch.int32}[dtype]
        info = torch.iinfo(out)
        return _saturate(q, info.min, info.max).to(out)
    ax = -2 if axis == -2 else -1
    v = xf * _along(_f32(scales), x, ax % x.dim())
    if zero_points is not None:
        v = v + _along(_f32(zero_points), x, ax % x.dim())
    return _store(torch.round(v), dtype == torch.quint4x2)


def group_quant(x, scale, group_index, offset=None, dst_dtype=torch.int8):
    """Rows [group_index[g-1], group_index[g]) use scale[g]: rint(x * scale[g] + offset)."""
    xf = _f32(x)
    v = xf * _f32(scale)[row_groups(x.shape[0], group_index)]
    if offset is not None:
        v = v + _f32(offset).reshape(())
    return _store(torch.round(v), dst_dtype == torch.quint4x2)


def anti_quant(x, scale, offset=None, dst_dtype=torch.float16):
    """(x + offset) * scale in float32, x int8 or int4 packed into int32. scale / offset hold one value, one per
    column, or (1-d, not matching the columns) one per row."""
    v = _f32(int4_unpack32(x) if x.dtype == torch.int32 else x)

    def param(p):
        p = _f32(p)
        return p.reshape(-1, 1) if p.dim() <= 1 and p.numel() not in (1, v.shape[-1]) else p

    if offset is not None:
        v = v + param(offset)
    return (v * param(scale)).to(dst_dtype)


# --- npu_swiglu_quant / npu_dequant_swiglu_quant ----------------------------------------------------------------

def _swish(v, alpha=1.0):
    """v * sigmoid(alpha v), as v / (1 + exp(-alpha v))."""
    return v / (1 + torch.exp(-alpha * v))


def swiglu_quant(x, smooth_scales=None, offsets=None, group_index=None, activate_left=False, quant_mode=0,
                 group_list_type=0, dst_type=torch.int8):
    """swish of one half (the left with activate_left) times the other, times its row group's smooth_scales
    ([G, N] per column or [G] per group; rows past the groups are not smoothed); static (quant_mode 0):
    rint(v + offsets) with scale 0; dynamic: scale = DMAX / amax (returned as such), y = rint(v * scale).
    int4 (torch.quint4x2) is packed two to an int8."""
    a, b = _f32(x).chunk(2, dim=-1)
    v = _rows(_swish(a) * b if activate_left else a * _swish(b))
    int4 = dst_type == torch.quint4x2
    dmax = 7.0 if int4 else 127.0
    if group_index is None:
        count, groups = 1, torch.zeros(v.shape[0], dtype=torch.int64)
    else:
        count = group_index.numel()
        groups = row_groups(v.shape[0], group_index, counts=group_list_type == 1)
    inside = (groups < count).unsqueeze(-1)
    idx = groups.clamp_max(count - 1)

    def per_row(t, outside):
        return torch.where(inside, _f32(t).reshape(count, -1)[idx], torch.full((), outside))

    if smooth_scales is not None:
        v = v * per_row(smooth_scales, 1.0)
    if quant_mode == 0:
        if offsets is not None:
            v = v + per_row(offsets, 0.0)
        scale = torch.zeros(v.shape[0])
        q = torch.round(v)
    else:
        scale = _over(dmax, v.abs().amax(-1))
        q = torch.round(v * scale.unsqueeze(-1))
    y = _store(q, int4, carrier=8)
    return y.reshape(*x.shape[:-1], y.shape[-1]), scale.reshape(x.shape[:-1])


def _quant_param(p, idx, count):
    """A static / dynamic quantisation parameter for rows of group idx: one value, [G] one per group,
    [G, H] per group and column, or [H] per column."""
    p = _f32(p)
    if p.numel() == 1:
        return p.reshape(1, 1)
    if p.dim() == 2:
        return p[idx]
    if count > 1 and p.numel() == count:
        return p[idx].unsqueeze(-1)
    return p.reshape(1, -1)


def dequant_swiglu_quant(x, weight_scale=None, activation_scale=None, bias=None, quant_scale=None, quant_offset=None,
                         group_index=None, activate_left=False, quant_mode=0, round_mode_="rint", swiglu_mode=0,
                         clamp_limit=7.0, glu_alpha=1.702, glu_bias=1.0, activate_dim=-1, target_max=127.0,
                         convert=None):
    """Dequantise (int32 x [+ int32 bias], times weight_scale and activation_scale, [+ float bias]), swiglu along
    activate_dim (mode 0: swish(one half) * the other; 1: even / odd columns, clamped, swish with glu_alpha, times
    linear + glu_bias; 2: like 1 on the halves), then static quantisation rint(v / quant_scale + quant_offset) with
    scale 0, or dynamic: v * quant_scale, scale = amax / 127, y = rint(v * (127 / amax)). group_index counts the
    rows of each group (weight_scale / bias / quant params [G, ...]); rows past its sum come out 0. With `convert`
    (a float8 target), 127 is target_max and y = convert(v clamped to +-target_max), unrounded."""
    dim = activate_dim % x.dim()
    rows = _rows(x)
    n = rows.shape[0]
    sizes = torch.tensor([n]) if group_index is None else group_index.to(torch.int64).reshape(-1)
    count = sizes.numel()
    groups = row_groups(n, sizes, counts=True)
    inside = groups < count
    idx = groups.clamp_max(count - 1)

    def per_col(t):
        t = _f32(t)
        return t.reshape(1, -1) if t.dim() == 1 else t[idx]

    if x.dtype == torch.int32:
        v = rows.to(torch.int64)
        if bias is not None and bias.dtype == torch.int32:
            b = bias.to(torch.int64)
            v = v + (b.reshape(1, -1) if b.dim() == 1 else b[idx])
        v = v.to(F32)
        if weight_scale is not None:
            v = v * per_col(weight_scale)
        if activation_scale is not None:
            v = v * _f32(activation_scale).reshape(-1, 1)
        if bias is not None and bias.dtype != torch.int32:
            v = v + per_col(bias)
    else:
        v = _f32(rows)
    v = v.reshape(x.shape)
    if swiglu_mode == 1:
        glu, lin = v.unflatten(dim, (-1, 2)).unbind(dim + 1)  # even, odd
    else:
        left, right = v.chunk(2, dim=dim)
        glu, lin = (left, right) if activate_left else (right, left)
    if swiglu_mode == 0:
        out = _swish(glu) * lin
    else:
        out = _swish(glu.clamp(max=clamp_limit), glu_alpha) * (lin.clamp(-clamp_limit, clamp_limit) + glu_bias)
    shape = out.shape
    out = _rows(out)
    if quant_mode == 0:
        if quant_scale is not None:
            out = out / _quant_param(quant_scale, idx, count)
        if quant_offset is not None:
            out = out + _quant_param(quant_offset, idx, count)
        scale = torch.zeros(out.shape[0])
        q = out
    else:
        if quant_scale is not None:
            out = out * _quant_param(quant_scale, idx, count)
        top = out.abs().amax(-1)
        scale = top * (torch.ones((), dtype=F32) / target_max)
        q = out * _over(target_max, top).unsqueeze(-1)
    if convert is None:
        y = _saturate(round_mode(q, round_mode_), INT8_MIN, INT8_MAX).to(torch.int8)
    else:
        y = convert(q.clamp(-target_max, target_max))
    if group_index is not None:
        y = torch.where(inside.unsqueeze(-1), y, torch.zeros_like(y))
        scale = torch.where(inside, scale, torch.zeros_like(scale))
    return y.reshape(shape), scale.reshape(shape[:-1])


# --- rms norm + quantisation ------------------------------------------------------------------------------------

def _rms(xf, gamma, eps):
    """x / sqrt(mean(x^2) + eps) * gamma in float32, the reciprocal taken once per row."""
    rstd = 1.0 / torch.sqrt((xf * xf).mean(-1, keepdim=True) + eps)
    return xf * rstd * _f32(gamma).reshape(-1)


def rms_norm_quant(x, gamma, beta, scale, offset, epsilon=1e-6, dst_dtype=torch.int8):
    """rint(((x / rms(x)) * gamma + beta) / scale + offset), the value passing through float16 before rounding as
    in the device kernel; int8, or int4 packed into int32 (torch.quint4x2)."""
    v = _rms(_f32(x), gamma, epsilon) + _f32(beta).reshape(-1)
    inv = torch.ones((), dtype=F32) / _f32(scale).reshape(())
    v = (v * inv + _f32(offset).reshape(())).to(torch.float16).to(F32)
    return _store(torch.round(v), dst_dtype == torch.quint4x2)


def add_rms_norm_quant(x1, x2, gamma, scales1, zero_points1=None, beta=None, scales2=None, zero_points2=None,
                       epsilon=1e-6, div_mode=True):
    """x = x1 + x2 (rounded to x1's dtype, and normalised so), y = x / rms(x) * gamma + beta,
    y1 = rint(y / scales1 + zero_points1) (or y * scales1 with div_mode False), y2 likewise (zeros without
    scales2)."""
    x = (_f32(x1) + _f32(x2)).to(x1.dtype)
    y = _rms(_f32(x), gamma, epsilon)
    if beta is not None:
        y = y + _f32(beta).reshape(-1)

    def quant(scales, zero_points):
        s = _f32(scales).reshape(-1)
        v = y / s if div_mode else y * s
        if zero_points is not None:
            v = v + _f32(zero_points).reshape(-1)
        return _store(torch.round(v), False)

    y1 = quant(scales1, zero_points1)
    y2 = quant(scales2, zero_points2) if scales2 is not None else torch.zeros_like(y1)
    return y1, y2, x


def add_rms_norm_dynamic_quant(x1, x2, gamma, smooth_scale1=None, smooth_scale2=None, beta=None, epsilon=1e-6,
                               output_mask=None, y_dtype=torch.int8):
    """x = x1 + x2 (kept in float32 for the norm), y = x / rms(x) * gamma + beta, then per row and branch:
    v = y * smooth, m = 127 / amax(v) (7 for int4), y_i = rint(v * m), scale_i = 1 / m. Returns
    (y1, y2, x, scale1, scale2); a branch that is off gives 0-d zeros."""
    xf = _f32(x1) + _f32(x2)
    y = _rms(xf, gamma, epsilon)
    if beta is not None:
        y = y + _f32(beta).reshape(-1)
    if output_mask is None:
        mask = (True, smooth_scale1 is not None and smooth_scale2 is not None)
    else:
        mask = tuple(output_mask)
    int4 = y_dtype == torch.quint4x2
    dmax = 7.0 if int4 else 127.0

    def branch(on, smooth):
        if not on:
            return torch.zeros((), dtype=torch.int32 if int4 else torch.int8), torch.zeros(())
        v = y * _f32(smooth).reshape(-1) if smooth is not None else y
        m = _over(dmax, v.abs().amax(-1, keepdim=True))
        return _store(torch.round(v * m), int4), (1.0 / m).squeeze(-1)

    y1, s1 = branch(mask[0], smooth_scale1)
    y2, s2 = branch(mask[1], smooth_scale2)
    return y1, y2, xf.to(x1.dtype), s1, s2


# --- npu_quant_scatter ------------------------------------------------------------------------------------------

def quant_scatter(self, indices, updates, quant_scales, quant_zero_points=None, axis=-2):
    """updates quantised per last-dim channel, rint(updates / quant_scales + quant_zero_points) as int8, then
    written into a copy of self: with 1-d indices, batch row i gets them at offset indices[i] along `axis`; with
    (n, 2) indices, batch row indices[i, 0] at offset indices[i, 1]."""
    v = _f32(updates) / _f32(quant_scales).reshape(-1)
    if quant_zero_points is not None:
        v = v + _f32(quant_zero_points).reshape(-1)
    q = _saturate(torch.round(v), INT8_MIN, INT8_MAX).to(torch.int8)
    out = self.clone()
    ax = axis % self.dim()
    for i in range(updates.shape[0]):
        row, start = (int(indices[i, 0]), int(indices[i, 1])) if indices.dim() == 2 else (i, int(indices[i]))
        out[row].narrow(ax - 1, start, updates.shape[ax]).copy_(q[i])
    return out


# --- npu_dynamic_block_quant ------------------------------------------------------------------------------------

def dynamic_block_quant(x, min_scale=0.0, row_block_size=1, col_block_size=128):
    """Blocks of row_block_size x col_block_size over the last two dims: m = 127 / amax (raised to min_scale when
    given), y = rint(x * m) as int8, scale = amax / 127 (lowered to 1 / min_scale)."""
    xf = _f32(x)
    lead = xf.shape[:-2]
    rows, cols = xf.shape[-2:]
    rb, cb = -(-rows // row_block_size), -(-cols // col_block_size)
    pad = torch.zeros(*lead, rb * row_block_size, cb * col_block_size)
    pad[..., :rows, :cols] = xf.abs()
    blocks = pad.reshape(*lead, rb, row_block_size, cb, col_block_size)
    top = blocks.amax(dim=(-3, -1))
    scale = top * (torch.ones((), dtype=F32) / 127.0)
    mult = (torch.ones((), dtype=F32) / top) * 127.0
    if min_scale > 0:
        scale = scale.clamp(max=float(torch.tensor(1.0, dtype=F32) / min_scale))
        mult = mult.clamp(min=min_scale)
    full = mult.repeat_interleave(row_block_size, -2).repeat_interleave(col_block_size, -1)[..., :rows, :cols]
    q = torch.round(xf * full)
    return _saturate(q, INT8_MIN, INT8_MAX).to(torch.int8), scale
