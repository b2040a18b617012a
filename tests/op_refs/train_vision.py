"""CPU references for the training-fusion and vision ops (staged for tests/custom_op_refs.py).

Each function is written from the op's documented definition in plain torch. Optimizer references update
nothing in place: they return the new (var, m, v). Float16 / bfloat16 inputs are computed in float32 and
rounded once, as the device ops do.
"""

import math

import torch


# ---- optimizers --------------------------------------------------------------------------------------------


def _as_float32(*tensors):
    return [t.float() for t in tensors]


def apply_adam(var, m, v, grad, beta1_power, beta2_power, lr, beta1, beta2, epsilon, use_nesterov=False):
    """TensorFlow's ApplyAdam: bias correction folded into the step size."""
    var32, m32, v32, g32 = _as_float32(var, m, v, grad)
    m_new = m32 + (1 - beta1) * (g32 - m32)
    v_new = v32 + (1 - beta2) * (g32 * g32 - v32)
    step = lr * math.sqrt(1 - beta2_power) / (1 - beta1_power) if beta1_power != 1 else float("nan")
    direction = beta1 * m_new + (1 - beta1) * g32 if use_nesterov else m_new
    var_new = var32 - step * direction / (v_new.sqrt() + epsilon)
    return var_new.to(var.dtype), m_new.to(m.dtype), v_new.to(v.dtype)


def apply_adam_w(var, m, v, grad, beta1_power, beta2_power, lr, weight_decay, beta1, beta2, epsilon,
                 max_grad_norm=None, amsgrad=False, maximize=False):
    """AdamW with decoupled weight decay; beta*_power are the powers of the previous step (t - 1)."""
    var32, m32, v32, g32 = _as_float32(var, m, v, grad)
    if maximize:
        g32 = -g32
    m_new = beta1 * m32 + (1 - beta1) * g32
    v_new = beta2 * v32 + (1 - beta2) * g32 * g32
    b1t, b2t = beta1_power * beta1, beta2_power * beta2
    second = torch.maximum(max_grad_norm.float(), v_new) if amsgrad else v_new
    denom = (second / (1 - b2t)).sqrt() + epsilon
    var_new = var32 * (1 - lr * weight_decay) - lr * (m_new / (1 - b1t)) / denom
    return var_new.to(var.dtype), m_new.to(m.dtype), v_new.to(v.dtype)


def bert_apply_adam(var, m, v, grad, lr, beta1, beta2, epsilon, max_grad_norm, global_grad_norm, weight_decay,
                    step_size=None, adam_mode=0):
    """BERT's Adam (adam_mode 0: clipping by the global norm, weight decay inside lr) and mBART's (1: a separate
    step size, no clipping)."""
    var32, m32, v32, g32 = _as_float32(var, m, v, grad)
    if adam_mode == 0 and max_grad_norm > 0 and global_grad_norm > 1:
        g32 = g32 / global_grad_norm
    m_new = beta1 * m32 + (1 - beta1) * g32
    v_new = beta2 * v32 + (1 - beta2) * g32 * g32
    update = m_new / (v_new.sqrt() + epsilon)
    decay = weight_decay * var32 if weight_decay > 0 else torch.zeros_like(var32)
    if adam_mode == 0:
        var_new = var32 - lr * (update + decay)
    else:
        size = lr if step_size is None else step_size
        var_new = var32 - size * update - lr * decay
    return var_new.to(var.dtype), m_new.to(m.dtype), v_new.to(v.dtype)


# ---- SyncBatchNorm statistics ------------------------------------------------------------------------------


def batch_norm_reduce(x):
    dims = [0] + list(range(2, x.dim()))
    x32 = x.float()
    return x32.sum(dims), (x32 * x32).sum(dims)


def batch_norm_gather_stats_update(sums, square_sums, counts, running_mean, running_var, momentum, eps):
    """Global mean / invstd from every device's (sum, square sum, count); running stats move towards the biased
    variance. Returns (mean, invstd, running_mean, running_var)."""
    total = counts.float().trunc().sum()
    s, sq = sums.float().reshape(-1, sums.shape[-1]).sum(0), square_sums.float().reshape(-1, sums.shape[-1]).sum(0)
    mean = s / total
    var = sq / total - mean * mean
    invstd = 1 / torch.sqrt(var + eps)
    rm = rv = None
    if running_mean is not None:
        rm = (momentum * mean + (1 - momentum) * running_mean.float()).to(running_mean.dtype)
        rv = (momentum * var + (1 - momentum) * running_var.float()).to(running_var.dtype)
    return mean.to(sums.dtype), invstd.to(sums.dtype), rm, rv


# ---- vision ------------------------------------------------------------------------------------------------


def ps_roi_pooling(x, rois, spatial_scale, group_size, output_dim):
    """R-FCN position-sensitive average pooling. x (B, output_dim * g * g, H, W); rois (B, 5, R) columns
    [batch_id, x1, y1, x2, y2]; result (B * R, output_dim, g, g), roi b * R + r. Corners round half up to whole
    pixels, the end pixel is inclusive and a roi is at least 0.1 wide; bin (ph, pw) of output channel d averages
    input channel (d * g + ph) * g + pw over rows [floor(ph * bin_h + y0), ceil((ph + 1) * bin_h + y0)) (columns
    alike) clipped to the map; empty bins and rois naming no batch entry give 0. Positions in float32."""
    batch, _, height, width = x.shape
    g = group_size
    r = rois.float().permute(0, 2, 1).reshape(-1, 5)
    corner = torch.floor(r[:, 1:] + 0.5)
    start_w, start_h = corner[:, 0] * spatial_scale, corner[:, 1] * spatial_scale
    end_w, end_h = (corner[:, 2] + 1) * spatial_scale, (corner[:, 3] + 1) * spatial_scale
    bin_w = (end_w - start_w).clamp(min=0.1) / g
    bin_h = (end_h - start_h).clamp(min=0.1) / g
    steps = torch.arange(g, dtype=torch.float32)
    out = torch.zeros(r.shape[0], output_dim, g, g)
    xf = x.float()
    for i in range(r.shape[0]):
        n = int(torch.floor(r[i, 0]))
        if not 0 <= n < batch:
            continue
        h0 = torch.floor(steps * bin_h[i] + start_h[i]).clamp(0, height).long().tolist()
        h1 = torch.ceil((steps + 1) * bin_h[i] + start_h[i]).clamp(0, height).long().tolist()
        w0 = torch.floor(steps * bin_w[i] + start_w[i]).clamp(0, width).long().tolist()
        w1 = torch.ceil((steps + 1) * bin_w[i] + start_w[i]).clamp(0, width).long().tolist()
        for ph in range(g):
            for pw in range(g):
                if h1[ph] <= h0[ph] or w1[pw] <= w0[pw]:
                    continue
                channels = [(d * g + ph) * g + pw for d in range(output_dim)]
                out[i, :, ph, pw] = xf[n, channels, h0[ph]:h1[ph], w0[pw]:w1[pw]].mean(dim=(1, 2))
    return out.to(x.dtype)


def _rbox_corners(box, mode):
    """The 4 corners (counter-clockwise when w * h > 0) and the signed area of (cx, cy, w, h, degrees) or, mode 1,
    (x1, y1, x2, y2, degrees) whose angle turns the other way."""
    if mode == 0:
        cx, cy, w, h, angle = box
    else:
        x1, y1, x2, y2, a = box
        cx, cy, w, h, angle = (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1, -a
    theta = math.radians(angle)
    c, s = math.cos(theta), math.sin(theta)
    half = [(-w / 2, -h / 2), (w / 2, -h / 2), (w / 2, h / 2), (-w / 2, h / 2)]
    return [(cx + dx * c - dy * s, cy + dx * s + dy * c) for dx, dy in half], w * h


def _rbox_polygon_area(points):
    return 0.5 * abs(sum(p[0] * q[1] - q[0] * p[1] for p, q in zip(points, points[1:] + points[:1])))


def _rbox_clip(subject, clipper):
    """Sutherland-Hodgman: the part of convex polygon `subject` inside convex `clipper` (counter-clockwise)."""
    def inside(p, a, b):
        return (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]) >= 0

    def cross_point(p, q, a, b):
        d1 = (q[0] - p[0], q[1] - p[1])
        d2 = (b[0] - a[0], b[1] - a[1])
        den = d1[0] * d2[1] - d1[1] * d2[0]
        t = ((a[0] - p[0]) * d2[1] - (a[1] - p[1]) * d2[0]) / den
        return (p[0] + t * d1[0], p[1] + t * d1[1])

    out = subject
    for a, b in zip(clipper, clipper[1:] + clipper[:1]):
        if not out:
            break
        pts, out = out, []
        for p, q in zip(pts, pts[1:] + pts[:1]):
            if inside(q, a, b):
                if not inside(p, a, b):
                    out.append(cross_point(p, q, a, b))
                out.append(q)
            elif inside(p, a, b):
                out.append(cross_point(p, q, a, b))
    return out


def rotated_box_iou(a, b, mode=0):
    """IoU of two rotated boxes; a box of area <= 1e-14 (w * h, so negative when one size is) overlaps nothing."""
    pa, area_a = _rbox_corners(a, mode)
    pb, area_b = _rbox_corners(b, mode)
    if area_a <= 1e-14 or area_b <= 1e-14:
        return 0.0
    inter = _rbox_polygon_area(_rbox_clip(pa, pb))
    return inter / (abs(area_a) + abs(area_b) - inter)


def nms_rotated(boxes, scores, iou_threshold, scores_threshold=0.0, max_output_size=-1, mode=0):
    """Greedy NMS by descending score (ties: lower index first); only boxes scoring above scores_threshold take
    part; a box survives while its IoU with every kept one is <= iou_threshold."""
    b = boxes.double().tolist()
    s = scores.double().tolist()
    order = sorted(range(len(s)), key=lambda i: -s[i])
    kept = []
    for i in order:
        if not s[i] > scores_threshold:
            continue
        if max_output_size >= 0 and len(kept) >= max_output_size:
            break
        if all(rotated_box_iou(b[i], b[k], mode) <= iou_threshold for k in kept):
            kept.append(i)
    return kept


def normalize_batch(x, seq_len, normalize_type=0, eps=1e-5):
    """Per utterance (and per feature for type 0): (x - mean) / (std + eps) over the first seq_len frames, unbiased
    std. x (N, C, T)."""
    out = torch.empty_like(x, dtype=torch.float32)
    xf = x.float()
    for i in range(x.shape[0]):
        frames = xf[i, :, :int(seq_len[i])]
        if normalize_type == 0:
            mean, std = frames.mean(dim=1, keepdim=True), frames.std(dim=1, keepdim=True)
        else:
            mean, std = frames.mean(), frames.std()
        out[i] = (xf[i] - mean) / (std + eps)
    return out.to(x.dtype)


def masked_softmax_with_rel_pos_bias(x, atten_mask, relative_pos_bias, scale_value=1.0):
    """softmax(scale * x + mask + bias) over the last dim for Swin's window attention; x (B, W, N, S1, S2) or
    (B * W, N, S1, S2), mask (W, S1, S2) / (W, 1, S1, S2) / (1, W, 1, S1, S2), bias (N, S1, S2) and its
    1-padded 4-D / 5-D forms."""
    s1, s2 = x.shape[-2:]
    heads = relative_pos_bias.shape[-3]
    windows = atten_mask.numel() // (s1 * s2) if atten_mask is not None else 1
    x5 = x.float().reshape(-1, windows, heads, s1, s2)
    y = scale_value * x5 + relative_pos_bias.float().reshape(1, 1, heads, s1, s2)
    if atten_mask is not None:
        y = y + atten_mask.float().reshape(1, windows, 1, s1, s2)
    return torch.softmax(y, dim=-1).reshape(x.shape).to(x.dtype)


def _deform_bilinear(img, y, x):
    """img (C, H, W) sampled at float positions y, x (same shape P): corners outside the image count as 0.
    Result (C, *P); differentiable in img, y and x (corner weights are linear in y and x, so a position on the grid
    gets the one-sided derivative towards the next corner, as deformable-convolution kernels define it)."""
    _, height, width = img.shape
    y0, x0 = torch.floor(y).detach(), torch.floor(x).detach()
    out = 0
    for dy in (0, 1):
        for dx in (0, 1):
            yi, xi = y0 + dy, x0 + dx
            wy = y - y0 if dy else y0 + 1 - y
            wx = x - x0 if dx else x0 + 1 - x
            valid = (yi >= 0) & (yi < height) & (xi >= 0) & (xi < width)
            yc, xc = yi.clamp(0, height - 1).long(), xi.clamp(0, width - 1).long()
            vals = img[:, yc, xc]
            out = out + vals * (wy * wx * valid)
    return out


def deformable_offsets(x, offset, kernel_size, stride, padding, dilation, deformable_groups=1, modulated=True):
    """The sampled input of a deformable convolution, (N, C, Ho * KH, Wo * KW): element (c, oh * KH + kh,
    ow * KW + kw) is x[c] at (oh * sh - pad_top + kh * dh + dy, ow * sw - pad_left + kw * dw + dx), bilinear,
    times the mask when modulated. offset (N, dg * K * (3 | 2), Ho, Wo): all x offsets (group-major, k = kh * KW +
    kw), then all y offsets, then the masks."""
    n, c, _, _ = x.shape
    kh_, kw_ = kernel_size
    k = kh_ * kw_
    ho, wo = offset.shape[2:]
    sh, sw = stride[2], stride[3]
    dh, dw = dilation[2], dilation[3]
    top, left = padding[0], padding[2]
    dg = deformable_groups
    cpg = c // dg
    tap_y = (torch.arange(kh_) * dh).repeat_interleave(kw_).view(k, 1, 1)  # tap k = kh * KW + kw
    tap_x = (torch.arange(kw_) * dw).repeat(kh_).view(k, 1, 1)
    base_y = (torch.arange(ho) * sh - top).view(1, ho, 1) + tap_y
    base_x = (torch.arange(wo) * sw - left).view(1, 1, wo) + tap_x
    rows = []
    for b in range(n):
        groups = []
        for g in range(dg):
            off_x = offset[b, g * k:(g + 1) * k]
            off_y = offset[b, dg * k + g * k:dg * k + (g + 1) * k]
            ys, xs = base_y + off_y, base_x + off_x  # (K, Ho, Wo)
            vals = _deform_bilinear(x[b, g * cpg:(g + 1) * cpg], ys, xs)  # (cpg, K, Ho, Wo)
            if modulated:
                vals = vals * offset[b, 2 * dg * k + g * k:2 * dg * k + (g + 1) * k]
            groups.append(vals)
        v = torch.cat(groups, 0).reshape(c, kh_, kw_, ho, wo).permute(0, 3, 1, 4, 2)
        rows.append(v.reshape(c, ho * kh_, wo * kw_))
    return torch.stack(rows)


def deformable_conv2d(x, weight, offset, bias, kernel_size, stride, padding, dilation=(1, 1, 1, 1), groups=1,
                      deformable_groups=1, modulated=True):
    """Returns (out, sampled input); float32 throughout, as the op converts every input to float32."""
    x, weight, offset = x.float(), weight.float(), offset.float()
    sampled = deformable_offsets(x, offset, kernel_size, stride, padding, dilation, deformable_groups, modulated)
    out = torch.nn.functional.conv2d(sampled, weight, None if bias is None else bias.float(), stride=tuple(kernel_size),
                                     groups=groups)
    return out, sampled
