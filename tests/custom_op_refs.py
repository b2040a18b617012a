"""CPU reference implementations of torch_npu's custom ops, written from their definitions in plain torch.

The npu kernels are checked against these (forward), and against autograd through these (backward).
"""

import math

import torch


def rms_norm(x, gamma, eps=1e-6):
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=tuple(range(x.dim() - gamma.dim(), x.dim())), keepdim=True) + eps)
    return (xf * rstd * gamma.float()).to(x.dtype), rstd


def rotate(x, mode):
    if mode == "half":
        a, b = x.chunk(2, dim=-1)
        return torch.cat((-b, a), dim=-1)
    even, odd = x[..., ::2], x[..., 1::2]
    return torch.stack((-odd, even), dim=-1).flatten(-2)


def rotary_mul(x, r1, r2, mode="half"):
    return x * r1 + rotate(x, mode) * r2


def swiglu(x, dim=-1):
    a, b = x.chunk(2, dim=dim)
    return torch.nn.functional.silu(a) * b


def fast_gelu(x):
    return x / (1 + torch.exp(-1.702 * x))


def confusion_transpose(x, perm, shape, transpose_first):
    return x.permute(perm).reshape(shape) if transpose_first else x.reshape(shape).permute(perm)


def one_hot(x, axis=-1, depth=1, on=1, off=0):
    out = torch.nn.functional.one_hot(x.long(), depth).float()
    out = out * (on - off) + off
    return out.movedim(-1, axis if axis >= 0 else x.dim() + 1 + axis)


def bbox_encode(p, g, means, stds):
    pw, ph = p[:, 2] - p[:, 0] + 1, p[:, 3] - p[:, 1] + 1
    px, py = (p[:, 0] + p[:, 2]) / 2, (p[:, 1] + p[:, 3]) / 2
    gw, gh = g[:, 2] - g[:, 0] + 1, g[:, 3] - g[:, 1] + 1
    gx, gy = (g[:, 0] + g[:, 2]) / 2, (g[:, 1] + g[:, 3]) / 2
    d = torch.stack([(gx - px) / pw, (gy - py) / ph, torch.log(gw / pw), torch.log(gh / ph)], 1)
    return (d - torch.tensor(means)) / torch.tensor(stds)


def bbox_decode(rois, deltas, means, stds, max_shape, clip):
    d = deltas * torch.tensor(stds) + torch.tensor(means)
    r = abs(math.log(clip))
    dw, dh = d[:, 2].clamp(-r, r), d[:, 3].clamp(-r, r)
    px, py = (rois[:, 0] + rois[:, 2]) / 2, (rois[:, 1] + rois[:, 3]) / 2
    pw, ph = rois[:, 2] - rois[:, 0] + 1, rois[:, 3] - rois[:, 1] + 1
    gw, gh = pw * dw.exp(), ph * dh.exp()
    gx, gy = px + pw * d[:, 0], py + ph * d[:, 1]
    h, w = max_shape
    return torch.stack([(gx - gw / 2 + 0.5).clamp(0, w - 1), (gy - gh / 2 + 0.5).clamp(0, h - 1),
                        (gx + gw / 2 - 0.5).clamp(0, w - 1), (gy + gh / 2 - 0.5).clamp(0, h - 1)], 1)


def _area(b):
    return (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])


def iou(bboxes, gtboxes, mode=0):
    """[len(gtboxes), len(bboxes)] IoU (mode 0) or intersection over the ground-truth area (mode 1)."""
    out = torch.zeros(len(gtboxes), len(bboxes))
    for i, g in enumerate(gtboxes):
        for j, b in enumerate(bboxes):
            w = max(0.0, min(g[2], b[2]) - max(g[0], b[0]))
            h = max(0.0, min(g[3], b[3]) - max(g[1], b[1]))
            inter = w * h
            area_g = (g[2] - g[0] + 0.01) * (g[3] - g[1] + 0.01)  # the device kernel's eps of 0.01
            area_b = (b[2] - b[0] + 0.01) * (b[3] - b[1] + 0.01)
            denom = area_g + area_b - inter if mode == 0 else area_g
            out[i, j] = inter / denom
    return out


def giou(a, b, trans=False, is_cross=False):
    """Boxes as (4, N) columns; (N, 1) box by box or (N, M) with is_cross."""
    a, b = a.t(), b.t()
    if trans:
        a = torch.cat([a[:, :2] - a[:, 2:] / 2, a[:, :2] + a[:, 2:] / 2], 1)
        b = torch.cat([b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2], 1)
    if is_cross:
        a, b = a.unsqueeze(0), b.unsqueeze(1)
    lt, rb = torch.maximum(a[..., :2], b[..., :2]), torch.minimum(a[..., 2:], b[..., 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    union = _area(a) + _area(b) - inter
    elt, erb = torch.minimum(a[..., :2], b[..., :2]), torch.maximum(a[..., 2:], b[..., 2:])
    enclose = (erb - elt).prod(-1)
    g = inter / (union + 1e-9) - (enclose - union) / (enclose + 1e-9)
    return g.t() if is_cross else g.unsqueeze(1)


def nms(boxes, scores, max_out, iou_thr, score_thr):
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    kept = []
    for i in order:
        if len(kept) >= max_out or not float(scores[i]) > score_thr:
            break
        if all(float(iou(boxes[i:i + 1], boxes[k:k + 1])[0, 0]) <= iou_thr for k in kept):
            kept.append(i)
    return kept


def _bilinear(img, y, x):
    """torchvision's RoIAlign sampling of one (C, H, W) image at (y, x)."""
    c, h, w = img.shape
    if y < -1 or y > h or x < -1 or x > w:
        return torch.zeros(c)
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = min(int(y), h - 1), min(int(x), w - 1)
    y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
    if y0 >= h - 1:
        y = float(y0)
    if x0 >= w - 1:
        x = float(x0)
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * img[:, y0, x0] + (1 - ly) * lx * img[:, y0, x1]
            + ly * (1 - lx) * img[:, y1, x0] + ly * lx * img[:, y1, x1])


def roi_align(feat, rois, scale, ph, pw, samples, end_mode):
    out = torch.zeros(len(rois), feat.shape[1], ph, pw)
    for k, (b, x0, y0, x1, y1) in enumerate(rois.tolist()):
        extra = 1.0 if end_mode == 1 else 0.0
        x0, y0, x1, y1 = x0 * scale, y0 * scale, (x1 + extra) * scale, (y1 + extra) * scale
        bw, bh = max(x1 - x0, 1.0) / pw, max(y1 - y0, 1.0) / ph
        for i in range(ph):
            for j in range(pw):
                acc = torch.zeros(feat.shape[1])
                for si in range(samples):
                    for sj in range(samples):
                        acc += _bilinear(feat[int(b)], y0 + bh * (i + (si + 0.5) / samples),
                                         x0 + bw * (j + (sj + 0.5) / samples))
                out[k, :, i, j] = acc / samples ** 2
    return out


def scaled_masked_softmax(x, mask, scale=1.0, fixed_triu=False):
    if fixed_triu:
        s = x.shape[-1]
        mask = torch.ones(x.shape[-2], s, dtype=torch.bool).triu(1)
    return torch.softmax((x.float() * scale).masked_fill(mask, -10000.0), -1).to(x.dtype)


def attention_bnsd(q, k, v, scale, mask=None, pse=None, drop=None, keep_prob=1.0):
    """Reference attention on (B, N, S, D); `mask` True = masked out; `drop` a 0/1 keep mask."""
    n, n_kv = q.shape[1], k.shape[1]
    if n_kv != n:
        k, v = k.repeat_interleave(n // n_kv, 1), v.repeat_interleave(n // n_kv, 1)
    s = q.float() @ k.float().transpose(-2, -1) * scale
    if pse is not None:
        s = s + pse.float()
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    p = torch.softmax(s, -1)
    if drop is not None:
        p = p * drop / keep_prob
    return (p @ v.float()).to(q.dtype)


def trans_quant_param(scale, offset=None, round_mode=0):
    """int64: scale's float32 bits truncated (or rounded, round_mode=1) to FP19 in bits 0-31, bit 46 set,
    and the offset rounded and clamped to [-256, 255] as 9 bits at 37-45."""
    if offset is not None and scale.dim() == 1 and offset.dim() == 1:
        n = max(scale.numel(), offset.numel())
        scale, offset = scale.expand(n), offset.expand(n)
    bits = scale.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    if round_mode == 1:
        bits = bits + 0x0FFF + ((bits >> 13) & 1)
    out = (bits & 0xFFFFE000) | (1 << 46)
    if offset is not None:
        q = offset.expand(scale.shape).round().clamp(-256, 255).to(torch.int64)
        out = (out & 0x4000FFFFFFFF) | ((q & 0x1FF) << 37)
    return out


def unpack_quant_scale(packed):
    """The float32 scale and the offset an int64 (trans_quant_param) value holds."""
    scale = (packed & 0xFFFFFFFF).to(torch.int32).view(torch.float32)
    off = (packed >> 37) & 0x1FF
    return scale, torch.where(off >= 256, off - 512, off).float()


def quant_matmul(x1, x2, scale, offset=None, pertoken_scale=None, bias=None, output_dtype=torch.int8):
    acc = torch.matmul(x1.to(torch.int64), x2.to(torch.int64))
    if bias is not None and bias.dtype == torch.int32:
        acc = acc + bias.to(torch.int64)
    if output_dtype == torch.int32:
        return acc.to(torch.int32)
    packed_offset = None
    if scale.dtype == torch.int64:
        scale, packed_offset = unpack_quant_scale(scale)
    v = acc.double() * scale.reshape(-1).double()
    if pertoken_scale is not None:
        v = v * pertoken_scale.double().unsqueeze(-1)
    if bias is not None and bias.dtype != torch.int32:
        v = v + bias.double()
    if output_dtype == torch.int8:
        shift = offset if offset is not None else packed_offset
        if shift is not None:
            v = v + shift.reshape(-1).double()
        return v.round().clamp(-128, 127).to(torch.int8)
    return v.float().to(output_dtype)


def unpack_int4(packed):
    """int4 values carried 8 per int32 along the last dimension, lowest nibble first."""
    nibbles = torch.stack([(packed >> (4 * j)) & 0xF for j in range(8)], dim=-1).flatten(-2)
    return torch.where(nibbles >= 8, nibbles - 16, nibbles).to(torch.int8)


def weight_quant_batchmatmul(x, weight, antiquant_scale, antiquant_offset=None, quant_scale=None, quant_offset=None,
                             bias=None, antiquant_group_size=0):
    w = unpack_int4(weight) if weight.dtype == torch.int32 else weight
    k, n = w.shape
    scale, offset = antiquant_scale, antiquant_offset
    if scale.dtype == torch.int64:
        scale = unpack_quant_scale(scale)[0]
    scale = scale.to(x.dtype)
    offset = offset.to(x.dtype) if offset is not None else None
    if antiquant_group_size:
        rows = torch.arange(k) // antiquant_group_size
        scale = scale[rows]
        offset = offset[rows] if offset is not None else None
    else:
        scale = scale.reshape(-1)
        offset = offset.reshape(-1) if offset is not None else None
    wq = w.to(x.dtype)
    deq = (wq + offset if offset is not None else wq) * scale
    y = x.float() @ deq.float()
    if bias is not None:
        y = y + bias.float()
    if quant_scale is None:
        return y.to(x.dtype)
    shift = quant_offset
    qs = quant_scale
    if qs.dtype == torch.int64:
        qs, packed_shift = unpack_quant_scale(qs)
        shift = packed_shift if shift is None else shift
    y = y * qs.reshape(-1)
    if shift is not None:
        y = y + shift.reshape(-1)
    return y.round().clamp(-128, 127).to(torch.int8)
