"""CPU references of the serving scatters, norm fusions, activations, cross-entropy and rotated-box ops
(to merge into tests/custom_op_refs.py). Written from the documented definitions with plain torch; float16 /
bfloat16 inputs are computed in float32 where the device rounds once."""

import math

import torch


# --- serving scatters -------------------------------------------------------------------------------------

def scatter_nd_update(var, indices, updates):
    """var with var[tuple(row)] = value for every index tuple (last dimension of indices) and its updates."""
    out = var.clone()
    depth = indices.shape[-1]
    rows = indices.reshape(-1, depth).tolist()
    values = updates.reshape(len(rows), *var.shape[depth:])
    for row, value in zip(rows, values):
        out[tuple(row)] = value
    return out


def scatter_update(data, indices, updates, axis):
    """Row i of updates written into batch i (or indices[i][0]) of data from offset indices[i] (or
    indices[i][1]) on along `axis`."""
    out = data.clone()
    axis = axis % data.dim()
    rows = indices.reshape(updates.shape[0], -1).tolist()
    for i, row in enumerate(rows):
        batch, offset = (row[0], row[1]) if indices.dim() == 2 else (i, row[0])
        where = [batch] + [slice(None)] * (data.dim() - 1)
        where[axis] = slice(offset, offset + updates.shape[axis])
        out[tuple(where)] = updates[i]
    return out


# --- norm fusions -----------------------------------------------------------------------------------------

def _norm_dims(x, gamma):
    return tuple(range(x.dim() - gamma.dim(), x.dim()))


def add_rms_norm_cast(x1, x2, gamma, eps=1e-6):
    """(y float32, y in x1's dtype, rstd, x1 + x2): RMSNorm of the residual sum as stored in x1's dtype."""
    x = (x1.float() + x2.float()).to(x1.dtype)
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(_norm_dims(x, gamma), keepdim=True) + eps)
    y = xf * rstd * gamma.float()
    return y, y.to(x1.dtype), rstd, x


def add_layer_norm(x1, x2, gamma, beta, eps=1e-5):
    """(y, mean, rstd, x = x1 + x2); x and y are float32 when x1 and x2 differ in dtype; mean / rstd are the
    leading dimensions then 1. Differentiable (autograd through it is the reference gradient)."""
    out_dtype = x1.dtype if x1.dtype == x2.dtype else torch.float32
    x = (x1.float() + x2.float()).to(out_dtype)
    xf = x.float()
    dims = _norm_dims(x, gamma)
    mean = xf.mean(dims, keepdim=True)
    rstd = torch.rsqrt((xf - mean).pow(2).mean(dims, keepdim=True) + eps)
    y = (xf - mean) * rstd * gamma.float() + beta.float()
    stat_shape = x.shape[:x.dim() - gamma.dim()] + (1,)
    return y.to(out_dtype), mean.reshape(stat_shape), rstd.reshape(stat_shape), x


def deep_norm(x, gx, beta, gamma, alpha=0.3, eps=1e-6):
    """(mean, rstd, y): LayerNorm of alpha * x + gx; mean / rstd keep the normalised dimensions as 1."""
    s = alpha * x.float() + gx.float()
    dims = _norm_dims(x, gamma)
    mean = s.mean(dims, keepdim=True)
    rstd = torch.rsqrt((s - mean).pow(2).mean(dims, keepdim=True) + eps)
    y = (s - mean) * rstd * gamma.float() + beta.float()
    return mean, rstd, y.to(x.dtype)


def _group_stats(x, groups, eps):
    grouped = x.float().reshape(x.shape[0], groups, -1)
    mean = grouped.mean(-1)
    rstd = torch.rsqrt(grouped.var(-1, unbiased=False) + eps)
    return mean, rstd


def group_norm_silu(x, weight, bias, groups, eps=1e-5):
    """(silu(GroupNorm(x)), mean [N, G], rstd [N, G]) in float32."""
    y = torch.nn.functional.group_norm(x.float(), groups, None if weight is None else weight.float(),
                                       None if bias is None else bias.float(), eps)
    return (y * torch.sigmoid(y), *_group_stats(x, groups, eps))


def group_norm_swish(x, groups, weight, bias, eps=1e-5, swish_scale=1.0):
    """(y * sigmoid(swish_scale * y) for y = GroupNorm(x), mean, rstd); differentiable."""
    y = torch.nn.functional.group_norm(x.float(), groups, weight.float(), bias.float(), eps)
    return (y * torch.sigmoid(swish_scale * y), *_group_stats(x.detach(), groups, eps))


# --- activations ------------------------------------------------------------------------------------------

def gelu_mul(x, approximate="none"):
    """gelu(first half of the last dimension) * second half, in float32."""
    a, b = x.float().chunk(2, dim=-1)
    return torch.nn.functional.gelu(a, approximate=approximate) * b


def clipped_swiglu(x, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0, interleaved=True):
    """x folded to [prod(shape[:dim]), rest]; the first sum(group_index) rows split into A / B (even / odd columns,
    or halves), y = A' * sigmoid(alpha * A') * (B' + bias) with A' = min(A, limit), B' = clamp(B, +-limit); the
    other rows are 0. Returned in float32 with x's shape, dimension `dim` halved."""
    dim = dim % x.dim()
    rows = x.float().reshape(math.prod(x.shape[:dim]), -1)
    used = rows.shape[0] if group_index is None else max(0, min(int(group_index.sum()), rows.shape[0]))
    if interleaved:
        a, b = rows[:used, 0::2], rows[:used, 1::2]
    else:
        a, b = rows[:used].chunk(2, dim=1)
    a, b = a.clamp(max=limit), b.clamp(-limit, limit)
    out = torch.zeros(rows.shape[0], rows.shape[1] // 2)
    out[:used] = a * torch.sigmoid(alpha * a) * (b + bias)
    shape = list(x.shape)
    shape[dim] //= 2
    return out.reshape(shape)


# --- cross-entropy ----------------------------------------------------------------------------------------

def cross_entropy_loss(x, target, weight=None, reduction="mean", ignore_index=-100, label_smoothing=0.0,
                       lse_square_scale_for_zloss=0.0, return_zloss=False):
    """(loss, log_prob, zloss, lse_for_zloss) in float32, differentiable in x. loss is PyTorch's cross_entropy
    (class weights, ignore_index, label smoothing); zloss = scale * lse^2 per counted row, summed or averaged over
    the counted rows; zloss / lse_for_zloss are empty unless asked for."""
    xf = x.float()
    classes = x.shape[1]
    lse = torch.logsumexp(xf, 1)
    log_prob = xf - lse[:, None]
    w = torch.ones(classes) if weight is None else weight.float()
    counted = (target != ignore_index).float()
    cls = torch.where(target != ignore_index, target, 0).long()
    target_w = w[cls] * counted
    nll = -log_prob.gather(1, cls[:, None]).squeeze(1) * target_w
    smooth = -(log_prob * w).sum(1) * counted
    rows = (1 - label_smoothing) * nll + label_smoothing / classes * smooth

    def reduce(per_row, denominator):
        if reduction == "none":
            return per_row
        return (per_row.sum() if reduction == "sum" else per_row.sum() / denominator).reshape(1)

    loss = reduce(rows, target_w.sum())
    zloss = reduce(lse_square_scale_for_zloss * lse ** 2 * counted, counted.sum()) if return_zloss \
        else torch.zeros(0)
    lse_out = lse if lse_square_scale_for_zloss != 0.0 else torch.zeros(0)
    return loss, log_prob, zloss, lse_out


# --- rotated boxes ----------------------------------------------------------------------------------------

def _centred(boxes):
    """Corner boxes [B, 5, N] (x0, y0, x1, y1, degrees) -> centres and sides (sides at least 1)."""
    b = boxes.float()
    w = (b[:, 2] - b[:, 0]).clamp(min=1.0)
    h = (b[:, 3] - b[:, 1]).clamp(min=1.0)
    return b[:, 0] + w / 2, b[:, 1] + h / 2, w, h, b[:, 4]


def rotated_box_encode(anchor, gt, weight):
    acx, acy, aw, ah, aa = _centred(anchor)
    gcx, gcy, gw, gh, ga = _centred(gt)
    rad = math.pi / 180
    deltas = [(gcx - acx) / aw, (gcy - acy) / ah, torch.log(gw / aw), torch.log(gh / ah),
              torch.tan(ga * rad) - torch.tan(aa * rad)]
    return torch.stack([d * float(w) for d, w in zip(deltas, weight.float())], 1)


def rotated_box_decode(anchor, deltas, weight):
    acx, acy, aw, ah, aa = _centred(anchor)
    d = [deltas[:, k].float() / float(weight.float()[k]) for k in range(5)]
    cx, cy = acx + d[0] * aw, acy + d[1] * ah
    w, h = torch.exp(d[2]) * aw, torch.exp(d[3]) * ah
    angle = torch.rad2deg(torch.atan(torch.tan(torch.deg2rad(aa)) + d[4]))
    return torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, angle], 1)


def _box_corners(box, trans):
    """Corners of (cx, cy, w, h, degrees) or (x1, y1, x2, y2, degrees), turned counter-clockwise."""
    if trans:
        x1, y1, x2, y2, deg = box
        cx, cy, w, h = (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1
    else:
        cx, cy, w, h, deg = box
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return [(cx + dx * c - dy * s, cy + dx * s + dy * c)
            for dx, dy in ((-w / 2, -h / 2), (w / 2, -h / 2), (w / 2, h / 2), (-w / 2, h / 2))], w, h


def _inside(point, polygon):
    """Point in (or on) a counter-clockwise convex polygon."""
    px, py = point
    return all((bx - ax) * (py - ay) - (by - ay) * (px - ax) >= -1e-9
               for (ax, ay), (bx, by) in zip(polygon, polygon[1:] + polygon[:1]))


def _crossings(p, q):
    points = []
    for (ax, ay), (bx, by) in zip(p, p[1:] + p[:1]):
        for (cx, cy), (dx, dy) in zip(q, q[1:] + q[:1]):
            den = (bx - ax) * (dy - cy) - (by - ay) * (dx - cx)
            if abs(den) < 1e-12:
                continue
            t = ((cx - ax) * (dy - cy) - (cy - ay) * (dx - cx)) / den
            u = ((cx - ax) * (by - ay) - (cy - ay) * (bx - ax)) / den
            if 0 <= t <= 1 and 0 <= u <= 1:
                points.append((ax + t * (bx - ax), ay + t * (by - ay)))
    return points


def rotated_overlap_area(box1, box2, trans=False):
    """Intersection area of two rotated boxes: the hull of the corners inside the other box and the edge
    crossings, ordered around their centroid (0 for degenerate boxes)."""
    p, w1, h1 = _box_corners([float(v) for v in box1], trans)
    q, w2, h2 = _box_corners([float(v) for v in box2], trans)
    if min(w1, h1, w2, h2) <= 0:
        return 0.0
    points = [v for v in p if _inside(v, q)] + [v for v in q if _inside(v, p)] + _crossings(p, q)
    if len(points) < 3:
        return 0.0
    mx, my = sum(x for x, _ in points) / len(points), sum(y for _, y in points) / len(points)
    points.sort(key=lambda v: math.atan2(v[1] - my, v[0] - mx))
    return abs(sum(a[0] * b[1] - b[0] * a[1] for a, b in zip(points, points[1:] + points[:1]))) / 2


def rotated_overlaps(boxes, query_boxes, trans=False):
    """boxes [B, N, 5], query_boxes [B, K, 5] -> intersection areas [B, N, K] (float64)."""
    out = torch.zeros(boxes.shape[0], boxes.shape[1], query_boxes.shape[1], dtype=torch.float64)
    for b in range(boxes.shape[0]):
        for n in range(boxes.shape[1]):
            for k in range(query_boxes.shape[1]):
                out[b, n, k] = rotated_overlap_area(boxes[b, n].double(), query_boxes[b, k].double(), trans)
    return out


def rotated_iou(boxes, query_boxes, trans=False, mode=0, is_cross=True):
    """IoU (mode 0) or IoF (mode 1, over the first box's area) [B, N, K]; is_cross=False: box n with query n, [B, N]."""
    inter = rotated_overlaps(boxes, query_boxes, trans)
    b1, b2 = boxes.double(), query_boxes.double()
    if trans:
        area1 = (b1[..., 2] - b1[..., 0]) * (b1[..., 3] - b1[..., 1])
        area2 = (b2[..., 2] - b2[..., 0]) * (b2[..., 3] - b2[..., 1])
    else:
        area1, area2 = b1[..., 2] * b1[..., 3], b2[..., 2] * b2[..., 3]
    base = area1[:, :, None] if mode == 1 else area1[:, :, None] + area2[:, None, :] - inter
    iou = torch.where((inter > 0) & (base > 0), inter / base, torch.zeros_like(inter))
    return iou if is_cross else iou.diagonal(dim1=1, dim2=2)
