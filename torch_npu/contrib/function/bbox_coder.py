"""Box regression encoders / decoders of detection heads (mmdetection's DeltaXYWHBBoxCoder and
YOLOBBoxCoder) on torch_npu's box ops."""

import torch

import torch_npu

__all__ = ["npu_bbox_coder_encode_yolo", "npu_bbox_coder_decode_xywh2xyxy", "npu_bbox_coder_encode_xyxy2xywh"]


def _as_box_dtype(box):
    # The box ops take float32 or float16; other dtypes compute in float32.
    return box if box.dtype in (torch.float32, torch.float16) else box.float()


def _check_pair(name, bboxes, other, other_name):
    if bboxes.dim() != 2 or other.dim() != 2 or bboxes.size(-1) != 4 or other.size(-1) != 4:
        raise ValueError(f"{name}: bboxes and {other_name} must both be (N, 4), got {tuple(bboxes.shape)} "
                         f"and {tuple(other.shape)}")
    if bboxes.size(0) != other.size(0):
        raise ValueError(f"{name}: bboxes and {other_name} need the same number of boxes, got {bboxes.size(0)} "
                         f"and {other.size(0)}")


def npu_bbox_coder_encode_yolo(bboxes, gt_bboxes, stride):
    """Deltas that turn anchors `bboxes` (N, 4) into `gt_bboxes` (N, 4), YOLO style, for grid cells of
    `stride` (N,) (int32; other integer dtypes are converted); npu_yolo_boxes_encode."""
    _check_pair("npu_bbox_coder_encode_yolo", bboxes, gt_bboxes, "gt_bboxes")
    if stride.dim() != 1 or stride.size(0) != bboxes.size(0):
        raise ValueError(f"npu_bbox_coder_encode_yolo: stride must be ({bboxes.size(0)},), got {tuple(stride.shape)}")
    stride = stride if stride.dtype == torch.int32 else stride.int()
    return torch_npu.npu_yolo_boxes_encode(_as_box_dtype(bboxes), _as_box_dtype(gt_bboxes), stride,
                                           performance_mode=False)


def npu_bbox_coder_encode_xyxy2xywh(bboxes, gt_bboxes, means=None, stds=None, is_normalized=False,
                                    normalized_scale=10000.0):
    """Deltas (dx, dy, dw, dh), normalised by `means` / `stds`, that turn `bboxes` (x1, y1, x2, y2) into
    `gt_bboxes`; npu_bounding_box_encode. Coordinates already normalised to [0, 1] (`is_normalized`)
    are scaled by `normalized_scale` first."""
    means = [0.0, 0.0, 0.0, 0.0] if means is None else list(means)
    stds = [1.0, 1.0, 1.0, 1.0] if stds is None else list(stds)
    _check_pair("npu_bbox_coder_encode_xyxy2xywh", bboxes, gt_bboxes, "gt_bboxes")
    bboxes, gt_bboxes = _as_box_dtype(bboxes), _as_box_dtype(gt_bboxes)
    if is_normalized:
        bboxes, gt_bboxes = bboxes * normalized_scale, gt_bboxes * normalized_scale
    return torch_npu.npu_bounding_box_encode(bboxes, gt_bboxes, *means, *stds)


def npu_bbox_coder_decode_xywh2xyxy(bboxes, pred_bboxes, means=None, stds=None, max_shape=None,
                                    wh_ratio_clip=16 / 1000):
    """Boxes (x1, y1, x2, y2) from anchors `bboxes` and predicted deltas `pred_bboxes`, clipped to
    `max_shape` (H, W; default unbounded) with width / height ratios clipped by `wh_ratio_clip`;
    npu_bounding_box_decode."""
    means = [0.0, 0.0, 0.0, 0.0] if means is None else list(means)
    stds = [1.0, 1.0, 1.0, 1.0] if stds is None else list(stds)
    max_shape = [9999, 9999] if max_shape is None else list(max_shape)
    _check_pair("npu_bbox_coder_decode_xywh2xyxy", bboxes, pred_bboxes, "pred_bboxes")
    return torch_npu.npu_bounding_box_decode(_as_box_dtype(bboxes), _as_box_dtype(pred_bboxes), *means, *stds,
                                             max_shape, wh_ratio_clip)
