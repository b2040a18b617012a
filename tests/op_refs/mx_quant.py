"""CPU references of torch_npu's MX (microscaling) quantisers and of npu_swiglu_group_quant, in numpy / torch from
their documented formulas. Element formats come from ml_dtypes (float8_e4m3fn, float8_e5m2, float4_e2m1fn) and
en_dtypes (float4_e1m2, hifloat8): round to nearest even is the library's own cast; the other round modes pick from
the library's value grid. Imported by the tests as `from op_refs import mx_quant as ref`."""

import math

import en_dtypes
import ml_dtypes
import numpy as np
import torch

import torch_npu

# name: (numpy type, element bits, emax, torch_npu code)
FORMATS = {
    "float8_e4m3fn": (ml_dtypes.float8_e4m3fn, 8, 8, torch_npu.float8_e4m3fn),
    "float8_e5m2": (ml_dtypes.float8_e5m2, 8, 15, torch_npu.float8_e5m2),
    "float4_e2m1": (ml_dtypes.float4_e2m1fn, 4, 2, torch_npu.float4_e2m1fn_x2),
    "float4_e1m2": (en_dtypes.float4_e1m2, 4, 0, torch_npu.float4_e1m2fn_x2),
}


def _codes_of(values, np_type, bits):
    """The element codes (uint8, low `bits` bits) of values already in np_type."""
    raw = values.astype(np_type)
    if bits == 8:
        return raw.view(np.uint8)
    # 4-bit types occupy a byte each in numpy; their code is the low nibble.
    return raw.view(np.uint8) & 0xF


def grid(name):
    """(magnitudes ascending, their codes) of the finite non-negative values of a format."""
    np_type, bits, _, _ = FORMATS[name]
    codes = np.arange(2 ** (bits - 1), dtype=np.uint8)
    if bits == 8:
        values = codes.view(np_type).astype(np.float32)
    else:
        values = np.array([float(np.array(c, dtype=np.uint8).view(np_type)) for c in codes], dtype=np.float32)
    keep = np.isfinite(values)
    return values[keep], codes[keep]


def max_value(name):
    return float(grid(name)[0].max())


def encode(values, name, mode="rint"):
    """Element codes of float32 values: saturating at the format's largest value; 'rint' is the library's cast
    (nearest, ties to even), 'round' takes ties away from zero, 'floor' rounds toward minus infinity."""
    np_type, bits, _, _ = FORMATS[name]
    v = np.asarray(values, dtype=np.float32)
    top = max_value(name)
    clipped = np.clip(v, -top, top)
    if mode == "rint":
        codes = _codes_of(clipped, np_type, bits)
    else:
        mags, mag_codes = grid(name)
        a = np.abs(clipped)
        lo = np.clip(np.searchsorted(mags, a, side="right") - 1, 0, len(mags) - 1)
        hi = np.minimum(lo + 1, len(mags) - 1)
        below, above = a - mags[lo], mags[hi] - a
        if mode == "round":
            pick = np.where(below < above, lo, hi)
        else:  # floor
            pick = np.where(clipped >= 0, lo, np.where(below == 0, lo, hi))
        pick = np.where(below == 0, lo, pick)
        codes = mag_codes[pick].astype(np.uint8)
        sign = np.uint8(1 << (bits - 1))
        codes = np.where(np.signbit(clipped), codes | sign, codes).astype(np.uint8)
    return codes


def decode(codes, name):
    np_type, bits, _, _ = FORMATS[name]
    c = np.asarray(codes, dtype=np.uint8)
    if bits == 8:
        return c.view(np_type).astype(np.float32)
    table = np.array([float(np.array(i, dtype=np.uint8).view(np_type)) for i in range(16)], dtype=np.float32)
    return table[c & 0xF]


def scale_exponent(amax, name, scale_alg=0, dst_type_max=0.0):
    """The block scale's power of two for a block maximum (None for NaN / infinity), clamped to [-127, 127]."""
    if not math.isfinite(amax):
        return None
    emax = FORMATS[name][2]
    if amax == 0:
        return -127
    if scale_alg == 1:
        top = dst_type_max if dst_type_max > 0 else max_value(name)
        raw = float(np.float32(amax) / np.float32(top))
        mantissa, k = math.frexp(raw)
        e = k - 1 if mantissa == 0.5 else k
    else:
        mantissa, k = math.frexp(amax)
        e = (k - 1) - emax
        if scale_alg == 2 and mantissa * 2 > (1.75 if dst_type_max == 7.0 else 1.5):
            e += 1
    return max(-127, min(127, e))


def quantise_block(block, name, mode, scale_alg=0, dst_type_max=0.0):
    """(element codes, e8m0 code) of one block of float32 values."""
    amax = float(np.max(np.abs(block))) if block.size else 0.0
    e = scale_exponent(amax, name, scale_alg, dst_type_max)
    if e is None:
        return encode(np.full_like(block, np.nan), name, mode), 255
    scale = np.float32(2.0 ** e)
    scaled = block * (np.float32(1) / scale) if scale_alg == 1 else block / scale
    return encode(scaled, name, mode), e + 127


def dynamic_mx_quant(x, name, axis=-1, mode="rint", block=32, scale_alg=0, dst_type_max=0.0):
    """Element codes in x's layout and e8m0 codes [.., pairs along axis, .., 2] (paired blocks, zero pad)."""
    xf = x.float().numpy()
    axis = axis % xf.ndim
    moved = np.moveaxis(xf, axis, -1)
    n = moved.shape[-1]
    blocks = -(-n // block)
    pairs = (blocks + 1) // 2
    codes = np.zeros(moved.shape, dtype=np.uint8)
    scales = np.zeros(moved.shape[:-1] + (pairs * 2,), dtype=np.uint8)
    for idx in np.ndindex(*moved.shape[:-1]):
        for b in range(blocks):
            sl = slice(b * block, min(n, b * block + block))
            c, s = quantise_block(moved[idx][sl], name, mode, scale_alg, dst_type_max)
            codes[idx][sl] = c
            scales[idx][b] = s
    codes = np.moveaxis(codes, -1, axis)
    scales = scales.reshape(moved.shape[:-1] + (pairs, 2))
    scales = np.moveaxis(scales, -2, axis)
    return torch.from_numpy(np.ascontiguousarray(codes)), torch.from_numpy(np.ascontiguousarray(scales))


def element_codes(y, name):
    """The element codes an op's y holds: a float8 tensor's bytes, or float4 pairs unpacked (low nibble first)."""
    y = y.cpu()
    if FORMATS[name][1] == 8:
        return y.view(torch.uint8)
    b = y.view(torch.uint8).to(torch.int64)
    return torch.stack([b & 0xF, b >> 4], dim=-1).reshape(*b.shape[:-1], b.shape[-1] * 2).to(torch.uint8)


def anti_mx_quant(codes, scales, name, axis=-1, block=32):
    """float32 values of element codes times their block's 2^(scale - 127)."""
    vals = decode(codes.numpy(), name)
    axis = axis % vals.ndim
    moved = np.moveaxis(vals, axis, -1)
    sc = np.moveaxis(scales.numpy(), axis, -2)
    sc = sc.reshape(sc.shape[:-2] + (-1,))
    idx = np.arange(moved.shape[-1]) // block
    factor = np.exp2(sc[..., idx].astype(np.float64) - 127).astype(np.float32)
    return torch.from_numpy(np.ascontiguousarray(np.moveaxis(moved * factor, -1, axis)))


# --- npu_swiglu_group_quant ---------------------------------------------------------------------------------------

def swiglu(x, weight=None, clamp_limit=-1.0):
    """y = silu(x0) * x1 (* weight per row) over x = [x0, x1] in float32, x0 <= limit and |x1| <= limit when
    clamp_limit > 0; rows [R, H]."""
    r = x.float().reshape(-1, x.shape[-1])
    h = r.shape[-1] // 2
    x0, x1 = r[:, :h], r[:, h:]
    if clamp_limit > 0:
        x0 = torch.clamp(x0, max=clamp_limit)
        x1 = torch.clamp(x1, -clamp_limit, clamp_limit)
    y = torch.nn.functional.silu(x0) * x1
    if weight is not None:
        y = y * weight.float().reshape(-1, 1)
    return y


def hifloat8_codes(values):
    return torch.from_numpy(values.float().numpy().astype(en_dtypes.hifloat8).view(np.uint8).copy())


def swiglu_group_quant(x, weight=None, group_counts=None, clamp_limit=-1.0, dst_type_max=15.0):
    """(hifloat8 codes [.., H], scales [G], y in x's dtype): per group of rows scale = max(amax, 1e-8) /
    dst_type_max, codes of y / scale; rows after the groups hold code 0."""
    y = swiglu(x, weight, clamp_limit)
    rows = y.shape[0]
    counts = [rows] if group_counts is None else [int(c) for c in group_counts]
    codes = torch.zeros(y.shape, dtype=torch.uint8)
    scales = torch.zeros(len(counts))
    start = 0
    for g, n in enumerate(counts):
        end = min(rows, start + n)
        part = y[start:end]
        top = part.abs().max() if part.numel() else torch.tensor(0.0)
        s = torch.clamp(top, min=1e-8) / dst_type_max
        scales[g] = s
        codes[start:end] = hifloat8_codes(part / s)
        start = end
    out_shape = x.shape[:-1] + (x.shape[-1] // 2,)
    return codes.reshape(out_shape), scales, y.to(x.dtype).reshape(out_shape)
