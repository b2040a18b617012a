"""Multi-class NMS of detection heads (mmdetection's multiclass_nms) on npu_batch_nms: fixed-size outputs
instead of a data-dependent number of boxes."""

import torch

import torch_npu

__all__ = ["npu_multiclass_nms", "npu_batched_multiclass_nms"]


def _batched(multi_bboxes, multi_scores, score_thr, nms_thr, max_num, score_factors, name):
    batch, boxes, classes = multi_scores.size(0), multi_scores.size(1), multi_scores.size(2) - 1
    if classes < 1:
        raise ValueError(f"{name}: multi_scores needs the classes' scores and a last background column, got "
                         f"{multi_scores.size(2)} columns")
    scores = multi_scores[..., :-1]  # the last column is the background
    if score_factors is not None:
        scores = scores * score_factors[..., None]
    if multi_bboxes.numel() % (4 * boxes * batch) != 0:
        raise ValueError(f"{name}: multi_bboxes {tuple(multi_bboxes.shape)} does not hold 4 coordinates per box "
                         f"(and class) for {boxes} boxes")
    bboxes = multi_bboxes.reshape(batch, boxes, multi_bboxes.numel() // (4 * boxes * batch), 4)
    # npu_batch_nms computes in float16, as torch_npu's kernel does.
    return torch_npu.npu_batch_nms(bboxes.half(), scores.reshape(batch, boxes, classes).half(), score_thr, nms_thr,
                                   max_num, max_num)


def npu_multiclass_nms(multi_bboxes, multi_scores, score_thr=0.05, nms_thr=0.45, max_num=50, score_factors=None):
    """NMS per class of one image: `multi_bboxes` (N, 4) or (N, #classes * 4), `multi_scores` (N, #classes + 1)
    with the background last. Returns (dets (max_num, 5): x1, y1, x2, y2, score; labels (max_num,)); slots
    past the kept boxes are zero."""
    boxes, scores, classes, _ = _batched(multi_bboxes, multi_scores.unsqueeze(0), score_thr, nms_thr, max_num,
                                         None if score_factors is None else score_factors.unsqueeze(0),
                                         "npu_multiclass_nms")
    return torch.cat([boxes[0], scores[0][:, None]], -1), classes[0]


def npu_batched_multiclass_nms(multi_bboxes, multi_scores, score_thr=0.05, nms_thr=0.45, max_num=50,
                               score_factors=None):
    """npu_multiclass_nms for a batch: `multi_bboxes` (B, N, 4) or (B, N, #classes * 4), `multi_scores`
    (B, N, #classes + 1). Returns (dets (B, max_num, 5), labels (B, max_num))."""
    boxes, scores, classes, _ = _batched(multi_bboxes, multi_scores, score_thr, nms_thr, max_num, score_factors,
                                         "npu_batched_multiclass_nms")
    return torch.cat([boxes, scores[..., None]], -1), classes
