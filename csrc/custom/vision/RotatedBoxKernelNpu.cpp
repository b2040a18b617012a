// RotatedBoxKernelNpu.cpp - rotated boxes of aerial / text detection: npu_rotated_box_encode / _decode (corner
// boxes [x0, y0, x1, y1, angle in degrees] as [B, 5, N] against 5 regression deltas) and npu_rotated_iou /
// npu_rotated_overlaps (boxes [B, N, 5] as xywht, or xyxyt with trans=True), on their aclnn device ops.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

void checkFloating(const char* op, const at::Tensor& t, const char* name) {
  TORCH_CHECK_TYPE(at::isFloatingType(t.scalar_type()), op, ": ", name, " must be floating point, got ",
                   t.scalar_type());
}

// boxes and their partner (gt_bboxes / deltas) [B, 5, N] of one dtype; weight 5 values.
at::Tensor codedBoxesOutput(const char* op, const at::Tensor& boxes, const at::Tensor& other, const char* other_name,
                            const at::Tensor& weight) {
  checkFloating(op, boxes, "self");
  TORCH_CHECK_VALUE(boxes.dim() == 3 && boxes.size(1) == 5, op, ": self must be [B, 5, N] boxes, got ",
                    boxes.sizes());
  TORCH_CHECK_VALUE(other.sizes().equals(boxes.sizes()), op, ": ", other_name, " must have self's shape ",
                    boxes.sizes(), ", got ", other.sizes());
  TORCH_CHECK_TYPE(other.scalar_type() == boxes.scalar_type(), op, ": ", other_name, " must have self's dtype ",
                   boxes.scalar_type(), ", got ", other.scalar_type());
  TORCH_CHECK_VALUE(weight.numel() == 5, op, ": weight must hold 5 values (x, y, w, h, angle), got ",
                    weight.sizes());
  checkFloating(op, weight, "weight");
  return at::empty(boxes.sizes(), boxes.options());
}

// self [B, N, 5] against query_boxes [B, K, 5].
void checkBoxPairs(const char* op, const at::Tensor& self, const at::Tensor& query_boxes) {
  checkFloating(op, self, "self");
  TORCH_CHECK_VALUE(self.dim() == 3 && query_boxes.dim() == 3 && self.size(2) == 5 && query_boxes.size(2) == 5, op,
                    ": self and query_boxes must be [B, N, 5] and [B, K, 5] boxes, got ", self.sizes(), " and ",
                    query_boxes.sizes());
  TORCH_CHECK_VALUE(self.size(0) == query_boxes.size(0), op, ": self and query_boxes must have one batch size, got ",
                    self.size(0), " and ", query_boxes.size(0));
  TORCH_CHECK_TYPE(query_boxes.scalar_type() == self.scalar_type(), op, ": query_boxes must have self's dtype ",
                   self.scalar_type(), ", got ", query_boxes.scalar_type());
}

// [B, N, K]; one-to-one (is_cross=False) pairs box n with query box n: [B, N].
at::Tensor rotatedIouOutput(const at::Tensor& self, const at::Tensor& query_boxes, int64_t mode, bool is_cross) {
  const char* op = "npu_rotated_iou";
  checkBoxPairs(op, self, query_boxes);
  TORCH_CHECK_VALUE(mode == 0 || mode == 1, op, ": mode must be 0 (IoU) or 1 (IoF), got ", mode);
  if (!is_cross) {
    TORCH_CHECK_VALUE(self.size(1) == query_boxes.size(1), op, ": is_cross=False pairs the boxes one to one, so ",
                      "self and query_boxes need as many boxes, got ", self.size(1), " and ", query_boxes.size(1));
    return at::empty({self.size(0), self.size(1)}, self.options());
  }
  return at::empty({self.size(0), self.size(1), query_boxes.size(1)}, self.options());
}

at::Tensor rotatedOverlapsOutput(const at::Tensor& self, const at::Tensor& query_boxes) {
  checkBoxPairs("npu_rotated_overlaps", self, query_boxes);
  return at::empty({self.size(0), self.size(1), query_boxes.size(1)}, self.options());
}

// The device ops read boxes as [B, 5, N] (one coordinate per row); a transposed view, no copy.
at::Tensor coordinateRows(const at::Tensor& boxes) { return boxes.transpose(1, 2); }

}  // namespace

at::Tensor npu_rotated_box_encode(const at::Tensor& self, const at::Tensor& gt_bboxes, const at::Tensor& weight) {
  at::Tensor out = codedBoxesOutput("npu_rotated_box_encode", self, gt_bboxes, "gt_bboxes", weight);
  EXEC_NPU_CMD(aclnnRotatedBoxEncode, self, gt_bboxes, weight, out);
  return out;
}

at::Tensor npu_rotated_box_encode_meta(const at::Tensor& self, const at::Tensor& gt_bboxes,
                                       const at::Tensor& weight) {
  return codedBoxesOutput("npu_rotated_box_encode", self, gt_bboxes, "gt_bboxes", weight);
}

at::Tensor npu_rotated_box_decode(const at::Tensor& self, const at::Tensor& deltas, const at::Tensor& weight) {
  at::Tensor out = codedBoxesOutput("npu_rotated_box_decode", self, deltas, "deltas", weight);
  EXEC_NPU_CMD(aclnnRotatedBoxDecode, self, deltas, weight, out);
  return out;
}

at::Tensor npu_rotated_box_decode_meta(const at::Tensor& self, const at::Tensor& deltas, const at::Tensor& weight) {
  return codedBoxesOutput("npu_rotated_box_decode", self, deltas, "deltas", weight);
}

at::Tensor npu_rotated_iou(const at::Tensor& self, const at::Tensor& query_boxes, bool trans, int64_t mode,
                           bool is_cross, double v_threshold, double e_threshold) {
  at::Tensor out = rotatedIouOutput(self, query_boxes, mode, is_cross);
  EXEC_NPU_CMD(aclnnRotatedIou, coordinateRows(self), coordinateRows(query_boxes), trans, mode, is_cross,
               v_threshold, e_threshold, out);
  return out;
}

at::Tensor npu_rotated_iou_meta(const at::Tensor& self, const at::Tensor& query_boxes, bool trans, int64_t mode,
                                bool is_cross, double v_threshold, double e_threshold) {
  return rotatedIouOutput(self, query_boxes, mode, is_cross);
}

at::Tensor npu_rotated_overlaps(const at::Tensor& self, const at::Tensor& query_boxes, bool trans) {
  at::Tensor out = rotatedOverlapsOutput(self, query_boxes);
  EXEC_NPU_CMD(aclnnRotatedOverlaps, coordinateRows(self), coordinateRows(query_boxes), trans, out);
  return out;
}

at::Tensor npu_rotated_overlaps_meta(const at::Tensor& self, const at::Tensor& query_boxes, bool trans) {
  return rotatedOverlapsOutput(self, query_boxes);
}

}  // namespace at_npu::native
