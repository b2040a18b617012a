// DiouKernelNpu.cpp - npu_diou (distance IoU: IoU minus the squared centre distance over the squared
// diagonal of the enclosing box) and npu_ciou (complete IoU: DIoU minus an aspect-ratio term), with
// their backward kernels, for boxes laid out as torch_npu takes them: (4, N) rows of x1, y1, x2, y2
// (or cx, cy, w, h with trans=True).
#include <ATen/ops/atan.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <array>
#include <cmath>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/CustomOpUtils.h"

namespace at_npu::native {
namespace {

using Corners = std::array<at::Tensor, 4>;  // x1, y1, x2, y2

Corners corners(const at::Tensor& t, bool trans) {
  at::Tensor b = t.to(at::kFloat);
  if (!trans) return {b[0], b[1], b[2], b[3]};
  return {b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2};
}

// Elementwise (box i of self against box i of gtboxes) -> (1, N); cross -> (N, M). `complete` adds
// CIoU's aspect-ratio penalty v * alpha, alpha taken as a constant for the gradient (as CIoU does).
at::Tensor distanceIou(const at::Tensor& self, const at::Tensor& gtboxes, bool trans, bool is_cross, bool complete) {
  constexpr double kEps = 1e-9;
  Corners a = corners(self, trans), b = corners(gtboxes, trans);
  if (is_cross) {
    for (auto& t : a) t = t.unsqueeze(1);
    for (auto& t : b) t = t.unsqueeze(0);
  }
  at::Tensor inter = (at::minimum(a[2], b[2]) - at::maximum(a[0], b[0])).clamp_min(0) *
                     (at::minimum(a[3], b[3]) - at::maximum(a[1], b[1])).clamp_min(0);
  at::Tensor w1 = a[2] - a[0], h1 = a[3] - a[1] + kEps, w2 = b[2] - b[0], h2 = b[3] - b[1] + kEps;
  at::Tensor iou = inter / (w1 * h1 + w2 * h2 - inter + kEps);
  at::Tensor cw = at::maximum(a[2], b[2]) - at::minimum(a[0], b[0]);
  at::Tensor ch = at::maximum(a[3], b[3]) - at::minimum(a[1], b[1]);
  at::Tensor dx = b[0] + b[2] - a[0] - a[2], dy = b[1] + b[3] - a[1] - a[3];
  at::Tensor out = iou - (dx * dx + dy * dy) / 4 / (cw * cw + ch * ch + kEps);
  if (complete) {
    at::Tensor d = at::atan(w2 / h2) - at::atan(w1 / h1);
    at::Tensor v = (4 / (M_PI * M_PI)) * d * d;
    at::Tensor alpha = (v / ((1 + kEps) - iou + v)).detach();
    out = out - v * alpha;
  }
  return is_cross ? out : out.unsqueeze(0);
}

void checkDiou(const char* op, const at::Tensor& self, const at::Tensor& gtboxes, bool is_cross, int64_t mode) {
  TORCH_CHECK_VALUE(self.dim() == 2 && self.size(0) == 4 && gtboxes.dim() == 2 && gtboxes.size(0) == 4, op,
                    ": boxes must have shape (4, N), got ", self.sizes(), " and ", gtboxes.sizes());
  TORCH_CHECK_VALUE(mode == 0, op, ": only mode=0 (IoU) is supported, got ", mode);
  TORCH_CHECK_VALUE(is_cross || self.size(1) == gtboxes.size(1), op,
                    ": with is_cross=False, self and gtboxes need the same number of boxes, got ", self.size(1),
                    " and ", gtboxes.size(1));
}

std::tuple<at::Tensor, at::Tensor> distanceIouGrads(const at::Tensor& grad, const at::Tensor& self,
                                                    const at::Tensor& gtboxes, bool trans, bool is_cross,
                                                    bool complete) {
  auto grads = custom::compositeGrads(
      [&](const std::vector<at::Tensor>& in) {
        return std::vector<at::Tensor>{distanceIou(in[0], in[1], trans, is_cross, complete)};
      },
      {self, gtboxes}, {grad.to(at::kFloat)});
  return {grads[0].to(self.scalar_type()), grads[1].to(gtboxes.scalar_type())};
}

}  // namespace

at::Tensor npu_diou(const at::Tensor& self, const at::Tensor& gtboxes, bool trans, bool is_cross, int64_t mode) {
  checkDiou("npu_diou", self, gtboxes, is_cross, mode);
  return distanceIou(self, gtboxes, trans, is_cross, /*complete=*/false).to(self.scalar_type());
}

std::tuple<at::Tensor, at::Tensor> npu_diou_backward(const at::Tensor& grad, const at::Tensor& self,
                                                     const at::Tensor& gtboxes, bool trans, bool is_cross,
                                                     int64_t mode) {
  checkDiou("npu_diou_backward", self, gtboxes, is_cross, mode);
  return distanceIouGrads(grad, self, gtboxes, trans, is_cross, /*complete=*/false);
}

// atan_sub_flag only selects how the device kernel evaluates the arctangent difference.
at::Tensor npu_ciou(const at::Tensor& self, const at::Tensor& gtboxes, bool trans, bool is_cross, int64_t mode,
                    bool atan_sub_flag) {
  checkDiou("npu_ciou", self, gtboxes, is_cross, mode);
  return distanceIou(self, gtboxes, trans, is_cross, /*complete=*/true).to(self.scalar_type());
}

std::tuple<at::Tensor, at::Tensor> npu_ciou_backward(const at::Tensor& grad, const at::Tensor& bboxes,
                                                     const at::Tensor& gtboxes,
                                                     const std::optional<at::Tensor>& atan_sub, bool trans,
                                                     bool is_cross, int64_t mode) {
  checkDiou("npu_ciou_backward", bboxes, gtboxes, is_cross, mode);
  return distanceIouGrads(grad, bboxes, gtboxes, trans, is_cross, /*complete=*/true);
}

}  // namespace at_npu::native
