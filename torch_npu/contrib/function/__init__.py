"""torch_npu.contrib.function: device-friendly rewrites of functions common in public models (seed 003's
affinity library), each equal to its plain-PyTorch original."""

from torch_npu.contrib.function.anchor_generator import npu_single_level_responsible_flags
from torch_npu.contrib.function.bbox_coder import (
    npu_bbox_coder_decode_xywh2xyxy,
    npu_bbox_coder_encode_xyxy2xywh,
    npu_bbox_coder_encode_yolo,
)
from torch_npu.contrib.function.detection import fast_rcnn_inference_single_image
from torch_npu.contrib.function.fuse_add_softmax_dropout import fuse_add_softmax_dropout
from torch_npu.contrib.function.index_op import npu_fast_condition_index_put
from torch_npu.contrib.function.nms import npu_batched_multiclass_nms, npu_multiclass_nms
from torch_npu.contrib.function.dropout import dropout_with_byte_mask
from torch_npu.contrib.function.iou import npu_ciou, npu_diou, npu_giou, npu_iou, npu_ptiou, pairwise_iou
from torch_npu.contrib.function.matmul_transpose import matmul_transpose
from torch_npu.contrib.function.roll import roll

__all__ = [
    "npu_iou",
    "npu_ptiou",
    "npu_giou",
    "npu_diou",
    "npu_ciou",
    "pairwise_iou",
    "fast_rcnn_inference_single_image",
    "roll",
    "matmul_transpose",
    "dropout_with_byte_mask",
    "npu_single_level_responsible_flags",
    "npu_bbox_coder_encode_yolo",
    "npu_bbox_coder_encode_xyxy2xywh",
    "npu_bbox_coder_decode_xywh2xyxy",
    "fuse_add_softmax_dropout",
    "npu_fast_condition_index_put",
    "npu_multiclass_nms",
    "npu_batched_multiclass_nms",
]
