// RoiAlignKernelNpu.cpp - npu_roi_align: average of bilinear samples per output bin (Faster R-CNN's
// RoIAlign with unaligned box corners), vectorised over ROIs so it also runs on meta tensors; and its
// backward npu_roi_alignbk, the derivative of the same composition.
#include <ATen/ops/arange.h>
#include <ATen/ops/floor.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/CustomOpUtils.h"

namespace at_npu::native {
namespace {

struct Axis {
  at::Tensor low, high, l, h, valid;  // corner indices, corner weights, in-range mask
};

// Sample positions along one axis: start + bin * (p + (s + 0.5) / samples), shape (K, P, S).
Axis sampleAxis(const at::Tensor& start, const at::Tensor& length, int64_t pooled, int64_t samples, int64_t size) {
  auto opts = start.options();
  at::Tensor bin = (length / static_cast<double>(pooled)).view({-1, 1, 1});
  at::Tensor p = at::arange(pooled, opts).view({1, -1, 1});
  at::Tensor s = (at::arange(samples, opts) + 0.5).div(static_cast<double>(samples)).view({1, 1, -1});
  at::Tensor pos = start.view({-1, 1, 1}) + bin * (p + s);
  at::Tensor valid = (pos >= -1.0) & (pos <= static_cast<double>(size));
  pos = pos.clamp_min(0);
  at::Tensor low = at::floor(pos).clamp_max(size - 1);
  at::Tensor high = (low + 1).clamp_max(size - 1);
  // Past the last row/column the sample sits on it exactly.
  at::Tensor frac = at::where(low >= size - 1, at::zeros_like(pos), pos - low);
  return {low.to(at::kLong), high.to(at::kLong), frac, 1 - frac, valid};
}

}  // namespace

at::Tensor npu_roi_align(const at::Tensor& self, const at::Tensor& rois, double spatial_scale, int64_t pooled_height,
                         int64_t pooled_width, int64_t sample_num, int64_t roi_end_mode) {
  TORCH_CHECK_VALUE(self.dim() == 4, "npu_roi_align: features must be (N, C, H, W), got ", self.sizes());
  TORCH_CHECK_VALUE(rois.dim() == 2 && rois.size(1) == 5,
                    "npu_roi_align: rois must be (K, 5) rows of [batch_index, x0, y0, x1, y1], got ", rois.sizes());
  TORCH_CHECK_VALUE(pooled_height > 0 && pooled_width > 0, "npu_roi_align: pooled sizes must be positive");
  TORCH_CHECK_VALUE(sample_num > 0,
                    "npu_roi_align: sample_num must be >= 1 on this device (adaptive sampling, sample_num=0, "
                    "gives data-dependent work per ROI); got ", sample_num);
  TORCH_CHECK_VALUE(roi_end_mode == 0 || roi_end_mode == 1, "npu_roi_align: roi_end_mode must be 0 or 1");
  const int64_t n = self.size(0), c = self.size(1), h = self.size(2), w = self.size(3), k = rois.size(0);
  at::Tensor r = rois.to(at::kFloat);
  const double end_extra = roi_end_mode == 1 ? 1.0 : 0.0;  // legacy mode: inclusive end pixel
  at::Tensor x0 = r.select(1, 1) * spatial_scale, y0 = r.select(1, 2) * spatial_scale;
  at::Tensor x1 = (r.select(1, 3) + end_extra) * spatial_scale, y1 = (r.select(1, 4) + end_extra) * spatial_scale;
  at::Tensor roi_w = (x1 - x0).clamp_min(1.0), roi_h = (y1 - y0).clamp_min(1.0);
  Axis ya = sampleAxis(y0, roi_h, pooled_height, sample_num, h);
  Axis xa = sampleAxis(x0, roi_w, pooled_width, sample_num, w);
  // Grid (K, PH, SH, PW, SW): y varies along dims 1-2, x along dims 3-4.
  auto Y = [](const at::Tensor& t) { return t.unsqueeze(-1).unsqueeze(-1); };
  auto X = [](const at::Tensor& t) { return t.unsqueeze(1).unsqueeze(1); };
  at::Tensor batch = r.select(1, 0).to(at::kLong).clamp(0, n - 1).view({-1, 1, 1, 1, 1});
  at::Tensor table = self.permute({0, 2, 3, 1}).reshape({n * h * w, c});
  auto corner = [&](const at::Tensor& yi, const at::Tensor& xi) {
    at::Tensor idx = (batch * h + Y(yi)) * w + X(xi);
    return at::index_select(table, 0, idx.reshape({-1})).view({k, pooled_height, sample_num, pooled_width,
                                                                 sample_num, c});
  };
  auto weight = [&](const at::Tensor& wy, const at::Tensor& wx) {
    return (Y(wy) * X(wx) * (Y(ya.valid) & X(xa.valid))).unsqueeze(-1).to(self.scalar_type());
  };
  at::Tensor value = corner(ya.low, xa.low) * weight(ya.h, xa.h) + corner(ya.low, xa.high) * weight(ya.h, xa.l) +
                     corner(ya.high, xa.low) * weight(ya.l, xa.h) + corner(ya.high, xa.high) * weight(ya.l, xa.l);
  return value.mean({2, 4}).permute({0, 3, 1, 2}).contiguous();
}

at::Tensor npu_roi_alignbk(const at::Tensor& self, const at::Tensor& rois, at::IntArrayRef xdiff_shape,
                           int64_t pooled_width, int64_t pooled_height, double spatial_scale, int64_t sample_num,
                           std::optional<int64_t> roi_end_mode) {
  TORCH_CHECK_VALUE(xdiff_shape.size() == 4, "npu_roi_alignbk: xdiff_shape must be the features' (N, C, H, W), got ",
                    xdiff_shape);
  // The forward is linear in the features: its gradient does not depend on their values.
  at::Tensor features = at::zeros(xdiff_shape, self.options());
  const int64_t end_mode = roi_end_mode.value_or(1);
  auto grads = custom::compositeGrads(
      [&](const std::vector<at::Tensor>& in) {
        return std::vector<at::Tensor>{
            npu_roi_align(in[0], rois, spatial_scale, pooled_height, pooled_width, sample_num, end_mode)};
      },
      {features}, {self});
  return grads[0];
}

}  // namespace at_npu::native
