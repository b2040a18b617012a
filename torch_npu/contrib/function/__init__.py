"""torch_npu.contrib.function: device-friendly rewrites of functions common in public models (seed 003's
affinity library), each equal to its plain-PyTorch original."""

from torch_npu.contrib.function.detection import fast_rcnn_inference_single_image
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
]
