"""Box overlap functions of torch_npu's affinity library: IoU / PtIoU, GIoU, DIoU, CIoU and detectron2's
pairwise_iou, written with ops that stay on the device (no data-dependent shapes, no host syncs).

Boxes are (x1, y1, x2, y2) unless a function takes `trans=True` / xywh (centre x, centre y, width, height).
"""

from __future__ import annotations

import math

import torch

__all__ = ["npu_iou", "npu_ptiou", "npu_giou", "npu_diou", "npu_ciou", "pairwise_iou"]


def _check_boxes(name: str, t, layout: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(t).__name__}")
    shape_ok = t.dim() == 2 and (t.size(1) == 4 if layout == "n4" else t.size(0) == 4)
    if not shape_ok:
        want = "(N, 4)" if layout == "n4" else "(4, N)"
        raise ValueError(f"{name} must have shape {want}, got {tuple(t.shape)}")


def _float(t: torch.Tensor) -> torch.Tensor:
    return t if t.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64) else t.float()


def _xywh_to_xyxy(b: torch.Tensor) -> torch.Tensor:
    """(.., 4) centre/size boxes to corners."""
    cx, cy, w, h = b.unbind(-1)
    return torch.stack((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), -1)


def _pair(a: torch.Tensor, b: torch.Tensor, cross: bool):
    """Broadcast (N, 4) a against (M, 4) b: [M, N] pairs when `cross`, else row by row."""
    return (a.unsqueeze(0), b.unsqueeze(1)) if cross else (a, b)


def _intersection(a, b):
    wh = (torch.minimum(a[..., 2:], b[..., 2:]) - torch.maximum(a[..., :2], b[..., :2])).clamp(min=0)
    return wh[..., 0] * wh[..., 1]


def _area(b):
    return (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])


def npu_iou(boxes1, boxes2, mode="ptiou", is_normalized=False, normalized_scale=100.):
    """IoU of every pair of boxes1 (N, 4) and boxes2 (M, 4), xyxy: a [N, M] tensor.

    iou = (overlap + 0.001) / (union + 0.001); ptiou = overlap / (union + 0.001). The 0.001 guards empty
    boxes, so normalised coordinates are scaled by `normalized_scale` first (`is_normalized=True`).
    """
    if mode not in ("iou", "ptiou"):
        raise ValueError(f"npu_iou: mode must be 'iou' or 'ptiou', got {mode!r}")
    _check_boxes("boxes1", boxes1, "n4")
    _check_boxes("boxes2", boxes2, "n4")
    a, b = _float(boxes1), _float(boxes2)
    if is_normalized:
        a, b = a * normalized_scale, b * normalized_scale
    a, b = a.unsqueeze(1), b.unsqueeze(0)  # [N, M]
    inter = _intersection(a, b)
    union = _area(a) + _area(b) - inter
    if mode == "iou":
        return (inter + 0.001) / (union + 0.001)
    return inter / (union + 0.001)


npu_ptiou = npu_iou


def npu_giou(boxes1, boxes2, is_permuted=True):
    """Generalised IoU of matching boxes, xywh: giou = iou - (enclose - union) / enclose.

    With `is_permuted=True` (the default) the boxes are (n, 4) and the result is [n, 1]; with False they are
    (4, n) (the layout of torch_npu.npu_giou) and the result is [1, n]. Differentiable.
    """
    layout = "n4" if is_permuted else "4n"
    _check_boxes("boxes1", boxes1, layout)
    _check_boxes("boxes2", boxes2, layout)
    if boxes1.shape != boxes2.shape:
        raise ValueError(f"npu_giou: boxes1 and boxes2 must have the same shape, got {tuple(boxes1.shape)} "
                         f"and {tuple(boxes2.shape)}")
    a = _xywh_to_xyxy(_float(boxes1 if is_permuted else boxes1.t()))
    b = _xywh_to_xyxy(_float(boxes2 if is_permuted else boxes2.t()))
    inter = _intersection(a, b)
    union = _area(a) + _area(b) - inter
    enclose = _area(torch.cat((torch.minimum(a[:, :2], b[:, :2]), torch.maximum(a[:, 2:], b[:, 2:])), 1))
    giou = inter / union - (enclose - union) / enclose
    return giou.unsqueeze(1) if is_permuted else giou.unsqueeze(0)


def _distance_terms(boxes1, boxes2, trans, is_cross, mode):
    _check_boxes("boxes1", boxes1, "4n")
    _check_boxes("boxes2", boxes2, "4n")
    if mode not in (0, 1):
        raise ValueError(f"mode must be 0 (IoU) or 1 (IoF), got {mode!r}")
    if not is_cross and boxes1.shape != boxes2.shape:
        raise ValueError(f"with is_cross=False boxes1 and boxes2 must have the same shape, got "
                         f"{tuple(boxes1.shape)} and {tuple(boxes2.shape)}")
    a, b = _float(boxes1).t(), _float(boxes2).t()
    if trans:
        a, b = _xywh_to_xyxy(a), _xywh_to_xyxy(b)
    a, b = _pair(a, b, is_cross)
    inter = _intersection(a, b)
    denom = _area(a) + _area(b) - inter if mode == 0 else _area(b).expand_as(inter)
    iou = inter / denom
    centre = ((a[..., :2] + a[..., 2:]) - (b[..., :2] + b[..., 2:])) / 2
    rho2 = (centre ** 2).sum(-1)
    enclose_wh = torch.maximum(a[..., 2:], b[..., 2:]) - torch.minimum(a[..., :2], b[..., :2])
    c2 = (enclose_wh ** 2).sum(-1)
    return a, b, iou, rho2 / c2


def npu_diou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """Distance IoU: diou = iou - rho^2 / c^2 (rho: distance of the centres, c: diagonal of the enclosing box).

    boxes1, boxes2: (4, n), xywh when `trans` else xyxy. Result [1, n]; with `is_cross` boxes2 may be (4, m)
    and the result is [m, n] (row i: boxes2[i] against every box of boxes1). mode 0: IoU, 1: IoF. Differentiable.
    """
    _, _, iou, dist = _distance_terms(boxes1, boxes2, trans, is_cross, mode)
    diou = iou - dist
    return diou if is_cross else diou.unsqueeze(0)


def npu_ciou(boxes1, boxes2, trans=True, is_cross=False, mode=0):
    """Complete IoU: ciou = iou - rho^2 / c^2 - alpha * v, v = 4 / pi^2 (atan(w2 / h2) - atan(w1 / h1))^2,
    alpha = v / (1 - iou + v) (held constant in the backward, as the CIoU paper does). The CIoU loss is
    1 - ciou. Shapes and arguments as npu_diou.
    """
    a, b, iou, dist = _distance_terms(boxes1, boxes2, trans, is_cross, mode)
    wa, ha = a[..., 2] - a[..., 0], a[..., 3] - a[..., 1]
    wb, hb = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
    v = (4 / math.pi ** 2) * (torch.atan(wb / hb) - torch.atan(wa / ha)) ** 2
    with torch.no_grad():
        alpha = v / (1 - iou + v)
    ciou = iou - dist - alpha * v
    return ciou if is_cross else ciou.unsqueeze(0)


def pairwise_iou(boxes1, boxes2):
    """detectron2's pairwise_iou: IoU of every pair of boxes1 (N, 4) and boxes2 (M, 4), xyxy, as [N, M];
    pairs that do not overlap (including empty boxes) give 0."""
    _check_boxes("boxes1", boxes1, "n4")
    _check_boxes("boxes2", boxes2, "n4")
    a, b = _float(boxes1).unsqueeze(1), _float(boxes2).unsqueeze(0)
    inter = _intersection(a, b)
    union = _area(a) + _area(b) - inter
    return torch.where(inter > 0, inter / union.clamp(min=torch.finfo(union.dtype).tiny),
                       torch.zeros((), dtype=inter.dtype, device=inter.device))
