// AnchorKernelNpu.cpp - anchor assignment for YOLO-style detectors: npu_anchor_response_flags,
// npu_yolo_boxes_encode, npu_grid_assign_positive (mmdetection's GridAssigner), composed of ATen ops.
#include <ATen/ops/amax.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/floor.h>
#include <ATen/ops/log.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <algorithm>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/CustomOpUtils.h"

namespace at_npu::native {
namespace {

void checkBoxes(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.dim() == 2 && t.size(1) == 4, op, ": ", name, " must have shape (N, 4), got ", t.sizes());
}

}  // namespace

at::Tensor npu_anchor_response_flags(const at::Tensor& self, at::IntArrayRef featmap_size, at::IntArrayRef stride,
                                     int64_t num_base_anchors) {
  checkBoxes("npu_anchor_response_flags", "self", self);
  TORCH_CHECK_VALUE(featmap_size.size() == 2 && stride.size() == 2,
                    "npu_anchor_response_flags: featmap_size and stride must be [h, w] pairs");
  TORCH_CHECK_VALUE(stride[0] > 0 && stride[1] > 0, "npu_anchor_response_flags: strides must be positive, got ",
                    stride);
  TORCH_CHECK_VALUE(num_base_anchors > 0, "npu_anchor_response_flags: num_base_anchors must be positive");
  const int64_t h = featmap_size[0], w = featmap_size[1], cells = h * w;
  // The grid cell holding each box centre is responsible for it; centres outside the map flag nothing.
  at::Tensor b = self.to(at::kFloat);
  at::Tensor gx = at::floor((b.select(1, 0) + b.select(1, 2)) * 0.5 / stride[0]).to(at::kLong);
  at::Tensor gy = at::floor((b.select(1, 1) + b.select(1, 3)) * 0.5 / stride[1]).to(at::kLong);
  at::Tensor inside = gx.ge(0).logical_and(gx.lt(w)).logical_and(gy.ge(0)).logical_and(gy.lt(h));
  at::Tensor cell = at::where(inside, gy * w + gx, cells);  // slot `cells` collects the outside ones
  at::Tensor flags = at::zeros({cells + 1}, self.options().dtype(at::kByte)).index_fill_(0, cell, 1);
  return flags.narrow(0, 0, cells).unsqueeze(1).expand({cells, num_base_anchors}).reshape({-1});
}

at::Tensor npu_yolo_boxes_encode(const at::Tensor& self, const at::Tensor& gt_bboxes, const at::Tensor& stride,
                                 bool performance_mode) {
  checkBoxes("npu_yolo_boxes_encode", "anchor_boxes", self);
  checkBoxes("npu_yolo_boxes_encode", "gt_bboxes", gt_bboxes);
  TORCH_CHECK_VALUE(gt_bboxes.size(0) == self.size(0) && stride.dim() == 1 && stride.size(0) == self.size(0),
                    "npu_yolo_boxes_encode: anchor_boxes, gt_bboxes and stride need the same number of boxes, got ",
                    self.size(0), ", ", gt_bboxes.size(0), " and ", stride.sizes());
  (void)performance_mode;  // both modes compute the same encoding here
  constexpr double kEps = 1e-6;
  at::Tensor a = self.to(at::kFloat), g = gt_bboxes.to(at::kFloat), s = stride.to(at::kFloat);
  auto centre = [](const at::Tensor& t, int64_t lo) { return (t.select(1, lo) + t.select(1, lo + 2)) * 0.5; };
  auto extent = [](const at::Tensor& t, int64_t lo) { return t.select(1, lo + 2) - t.select(1, lo); };
  at::Tensor dx = (centre(g, 0) - centre(a, 0)) / s + 0.5, dy = (centre(g, 1) - centre(a, 1)) / s + 0.5;
  at::Tensor dw = at::log(at::clamp_min(extent(g, 0) / extent(a, 0), kEps));
  at::Tensor dh = at::log(at::clamp_min(extent(g, 1) / extent(a, 1), kEps));
  return at::stack({dx, dy, dw, dh}, 1).to(self.scalar_type());
}

at::Tensor npu_grid_assign_positive(const at::Tensor& self, const at::Tensor& overlaps,
                                    const at::Tensor& box_responsible_flags, const at::Tensor& max_overlaps,
                                    const at::Tensor& argmax_overlaps, const at::Tensor& gt_max_overlaps,
                                    const at::Tensor& gt_argmax_overlaps, int64_t num_gts, double pos_iou_thr,
                                    double min_pos_iou, bool gt_max_assign_all) {
  TORCH_CHECK_VALUE(overlaps.dim() == 2 && overlaps.size(1) == self.size(0),
                    "npu_grid_assign_positive: overlaps must be [num_gts, num_bboxes=", self.size(0), "], got ",
                    overlaps.sizes());
  const int64_t gts = std::min(num_gts, overlaps.size(0));
  at::Tensor flags = box_responsible_flags.to(at::kBool);
  // Boxes overlapping some ground truth enough take it (1-based index) ...
  at::Tensor pos = max_overlaps.gt(pos_iou_thr).logical_and(flags);
  at::Tensor assigned = at::where(pos, (argmax_overlaps.to(at::kLong) + 1).to(self.scalar_type()), self);
  if (gts == 0) return assigned;
  // ... then each ground truth claims its best boxes; a later ground truth wins a box claimed twice.
  at::Tensor gt_max = gt_max_overlaps.narrow(0, 0, gts).to(at::kFloat);
  at::Tensor rank = at::arange(1, gts + 1, self.options().dtype(at::kLong)).unsqueeze(1);  // [gts, 1]
  at::Tensor claims;
  if (gt_max_assign_all) {
    claims = overlaps.narrow(0, 0, gts).to(at::kFloat).eq(gt_max.unsqueeze(1)).logical_and(flags.unsqueeze(0));
  } else {
    at::Tensor box = at::arange(self.size(0), rank.options()).unsqueeze(0);
    claims = box.eq(gt_argmax_overlaps.narrow(0, 0, gts).to(at::kLong).unsqueeze(1)).logical_and(flags.unsqueeze(0));
  }
  claims = claims.logical_and(gt_max.gt(min_pos_iou).unsqueeze(1));
  at::Tensor winner = at::amax(at::where(claims, rank, 0), {0});  // [num_bboxes], 0 = unclaimed
  return at::where(winner.gt(0), winner.to(self.scalar_type()), assigned);
}

}  // namespace at_npu::native
