"""detectron2's Fast R-CNN inference step for one image, with the NMS done as one IoU matrix on the device and
a single host transfer of the suppression decisions (instead of one sync per box)."""

from __future__ import annotations

import torch

from torch_npu.contrib.function.iou import pairwise_iou

__all__ = ["fast_rcnn_inference_single_image", "batched_nms"]


def _nms_keep(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Indices of the boxes greedy NMS keeps, by decreasing score."""
    order = scores.argsort(descending=True)
    over = pairwise_iou(boxes[order], boxes[order]) > iou_threshold
    over = over.cpu()  # the greedy pass is sequential: one transfer, then host work on a small bool matrix
    n = over.shape[0]
    suppressed = torch.zeros(n, dtype=torch.bool)
    keep = []
    for i in range(n):
        if suppressed[i]:
            continue
        keep.append(i)
        suppressed |= over[i]
    return order[torch.tensor(keep, dtype=torch.long, device=order.device)]


def batched_nms(boxes, scores, idxs, iou_threshold):
    """NMS within each class (`idxs`): boxes of different classes never suppress each other."""
    if boxes.numel() == 0:
        return torch.empty(0, dtype=torch.long, device=boxes.device)
    # Shift each class into its own region of the plane.
    offsets = idxs.to(boxes.dtype) * (boxes.max() - boxes.min() + 1)
    return _nms_keep(boxes + offsets[:, None], scores, iou_threshold)


def fast_rcnn_inference_single_image(boxes, scores, image_shape, score_thresh, nms_thresh, topk_per_image):
    """Detections of one image from per-class box regressions and class scores (detectron2's semantics).

    Args:
        boxes: (R, K * 4) class-specific or (R, 4) class-agnostic boxes, xyxy.
        scores: (R, K + 1) class probabilities; the last column is the background.
        image_shape: (height, width) the boxes are clipped to.
        score_thresh: detections scoring at most this are dropped.
        nms_thresh: IoU threshold of the per-class NMS.
        topk_per_image: keep at most this many detections (all of them when negative).

    Returns:
        (boxes (k, 4), scores (k,), classes (k,), indices (k,)): the detections by decreasing score, and for each
        the row of `boxes` / `scores` it came from.
    """
    if boxes.dim() != 2 or boxes.size(1) % 4 != 0:
        raise ValueError(f"boxes must have shape (R, K * 4), got {tuple(boxes.shape)}")
    if scores.dim() != 2 or scores.size(0) != boxes.size(0):
        raise ValueError(f"scores must have shape (R, K + 1) with R = {boxes.size(0)}, got {tuple(scores.shape)}")
    rows = torch.arange(boxes.size(0), device=boxes.device)
    valid = torch.isfinite(boxes).all(dim=1) & torch.isfinite(scores).all(dim=1)
    if not bool(valid.all()):
        boxes, scores, rows = boxes[valid], scores[valid], rows[valid]
    scores = scores[:, :-1]
    num_reg_classes = boxes.shape[1] // 4
    h, w = image_shape
    boxes = boxes.reshape(-1, 4)
    boxes = torch.stack((boxes[:, 0].clamp(0, w), boxes[:, 1].clamp(0, h),
                         boxes[:, 2].clamp(0, w), boxes[:, 3].clamp(0, h)), 1).view(-1, num_reg_classes, 4)

    keep_mask = scores > score_thresh
    picked = keep_mask.nonzero()  # (row, class) pairs
    boxes = boxes[picked[:, 0], 0] if num_reg_classes == 1 else boxes[keep_mask]
    scores = scores[keep_mask]
    keep = batched_nms(boxes, scores, picked[:, 1], nms_thresh)
    if topk_per_image >= 0:
        keep = keep[:topk_per_image]
    return boxes[keep], scores[keep], picked[keep, 1], rows[picked[keep, 0]]
