"""Which anchors of one feature level are responsible for a ground-truth box (mmdetection's
AnchorGenerator.single_level_responsible_flags), on npu_anchor_response_flags."""

import torch

import torch_npu

__all__ = ["npu_single_level_responsible_flags", "box_dtype_check"]


def box_dtype_check(box):
    """`box` as float32 unless it is float32 or float16 already."""
    return box if box.dtype in (torch.float32, torch.float16) else box.float()


def npu_single_level_responsible_flags(featmap_size, gt_bboxes, stride, num_base_anchors):
    """uint8 flags (H * W * num_base_anchors,): 1 for the anchors of the grid cells that contain a
    ground-truth box's centre, on a feature map of `featmap_size` (H, W) with `stride` (sH, sW)."""
    if gt_bboxes.dim() != 2 or gt_bboxes.size(-1) != 4:
        raise ValueError(f"npu_single_level_responsible_flags: gt_bboxes must be (N, 4), got {tuple(gt_bboxes.shape)}")
    return torch_npu.npu_anchor_response_flags(box_dtype_check(gt_bboxes), list(featmap_size), list(stride),
                                               num_base_anchors)
