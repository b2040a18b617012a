// BoxKernelNpu.cpp - detection ops: npu_bounding_box_encode / decode, npu_iou (npu_ptiou), npu_giou (+ backward),
// npu_nms_v4, npu_nms_with_mask. Box coordinates are (x1, y1, x2, y2) unless said otherwise.
#include <ATen/ops/clamp.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/log.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/CustomOpUtils.h"

namespace at_npu::native {
namespace {

void checkBoxes(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.dim() == 2 && t.size(1) == 4, op, ": ", name, " must have shape (N, 4), got ", t.sizes());
}

// Pairwise (rows of `a` against rows of `b`) or elementwise intersection, areas and enclosing areas.
struct Overlap {
  at::Tensor inter, area_a, area_b, enclose;
};

Overlap overlap(const at::Tensor& a, const at::Tensor& b, bool cross) {
  // cross: result [len(b), len(a)] (row i = b[i] against every a); else elementwise.
  at::Tensor A = cross ? a.unsqueeze(0) : a, B = cross ? b.unsqueeze(1) : b;
  auto col = [](const at::Tensor& t, int64_t i) { return t.select(-1, i); };
  at::Tensor w = (at::minimum(col(A, 2), col(B, 2)) - at::maximum(col(A, 0), col(B, 0))).clamp_min(0);
  at::Tensor h = (at::minimum(col(A, 3), col(B, 3)) - at::maximum(col(A, 1), col(B, 1))).clamp_min(0);
  at::Tensor ew = at::maximum(col(A, 2), col(B, 2)) - at::minimum(col(A, 0), col(B, 0));
  at::Tensor eh = at::maximum(col(A, 3), col(B, 3)) - at::minimum(col(A, 1), col(B, 1));
  return {w * h, (col(A, 2) - col(A, 0)) * (col(A, 3) - col(A, 1)),
          (col(B, 2) - col(B, 0)) * (col(B, 3) - col(B, 1)), ew * eh};
}

at::Tensor xywhToXyxy(const at::Tensor& t) {
  at::Tensor cx = t.select(1, 0), cy = t.select(1, 1), w = t.select(1, 2), h = t.select(1, 3);
  return at::stack({cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2}, 1);
}

// npu_giou takes boxes as torch_npu does, (4, N) columns; the result is (N, 1) box by box, or (N, M)
// with is_cross (row i: box i of self against every box of gtboxes).
at::Tensor giouForward(const at::Tensor& self, const at::Tensor& gtboxes, bool trans, bool is_cross) {
  at::Tensor a = (trans ? xywhToXyxy(self.t()) : self.t()).to(at::kFloat);
  at::Tensor b = (trans ? xywhToXyxy(gtboxes.t()) : gtboxes.t()).to(at::kFloat);
  Overlap o = overlap(a, b, is_cross);
  constexpr double kEps = 1e-9;
  at::Tensor uni = o.area_a + o.area_b - o.inter;
  at::Tensor iou = o.inter / (uni + kEps);
  at::Tensor giou = iou - (o.enclose - uni) / (o.enclose + kEps);
  return is_cross ? giou.t() : giou.unsqueeze(1);
}

void checkGiou(const at::Tensor& self, const at::Tensor& gtboxes, bool is_cross, int64_t mode) {
  TORCH_CHECK_VALUE(self.dim() == 2 && self.size(0) == 4 && gtboxes.dim() == 2 && gtboxes.size(0) == 4,
                    "npu_giou: boxes must have shape (4, N) (rows x1, y1, x2, y2), got ", self.sizes(), " and ",
                    gtboxes.sizes());
  TORCH_CHECK_VALUE(mode == 0, "npu_giou: only mode=0 (IoU) is supported, got ", mode);
  TORCH_CHECK_VALUE(is_cross || self.size(1) == gtboxes.size(1),
                    "npu_giou: with is_cross=False, self and gtboxes need the same number of boxes, got ",
                    self.size(1), " and ", gtboxes.size(1));
}

}  // namespace

at::Tensor npu_bounding_box_encode(const at::Tensor& anchor_box, const at::Tensor& ground_truth_box, double means0,
                                   double means1, double means2, double means3, double stds0, double stds1,
                                   double stds2, double stds3) {
  checkBoxes("npu_bounding_box_encode", "anchor_box", anchor_box);
  checkBoxes("npu_bounding_box_encode", "ground_truth_box", ground_truth_box);
  // Faster R-CNN deltas with the +1 pixel width convention.
  at::Tensor p = anchor_box.to(at::kFloat), g = ground_truth_box.to(at::kFloat);
  at::Tensor pw = p.select(1, 2) - p.select(1, 0) + 1, ph = p.select(1, 3) - p.select(1, 1) + 1;
  at::Tensor px = (p.select(1, 0) + p.select(1, 2)) * 0.5, py = (p.select(1, 1) + p.select(1, 3)) * 0.5;
  at::Tensor gw = g.select(1, 2) - g.select(1, 0) + 1, gh = g.select(1, 3) - g.select(1, 1) + 1;
  at::Tensor gx = (g.select(1, 0) + g.select(1, 2)) * 0.5, gy = (g.select(1, 1) + g.select(1, 3)) * 0.5;
  at::Tensor dx = ((gx - px) / pw - means0) / stds0, dy = ((gy - py) / ph - means1) / stds1;
  at::Tensor dw = (at::log(gw / pw) - means2) / stds2, dh = (at::log(gh / ph) - means3) / stds3;
  return at::stack({dx, dy, dw, dh}, 1).to(anchor_box.scalar_type());
}

at::Tensor npu_bounding_box_decode(const at::Tensor& rois, const at::Tensor& deltas, double means0, double means1,
                                   double means2, double means3, double stds0, double stds1, double stds2,
                                   double stds3, at::IntArrayRef max_shape, double wh_ratio_clip) {
  checkBoxes("npu_bounding_box_decode", "rois", rois);
  checkBoxes("npu_bounding_box_decode", "deltas", deltas);
  TORCH_CHECK_VALUE(max_shape.size() == 2, "npu_bounding_box_decode: max_shape must be [h, w], got ", max_shape);
  at::Tensor r = rois.to(at::kFloat), d = deltas.to(at::kFloat);
  const double max_ratio = std::abs(std::log(wh_ratio_clip));
  at::Tensor dx = d.select(1, 0) * stds0 + means0, dy = d.select(1, 1) * stds1 + means1;
  at::Tensor dw = (d.select(1, 2) * stds2 + means2).clamp(-max_ratio, max_ratio);
  at::Tensor dh = (d.select(1, 3) * stds3 + means3).clamp(-max_ratio, max_ratio);
  at::Tensor px = (r.select(1, 0) + r.select(1, 2)) * 0.5, py = (r.select(1, 1) + r.select(1, 3)) * 0.5;
  at::Tensor pw = r.select(1, 2) - r.select(1, 0) + 1, ph = r.select(1, 3) - r.select(1, 1) + 1;
  at::Tensor gw = pw * at::exp(dw), gh = ph * at::exp(dh);
  at::Tensor gx = px + pw * dx, gy = py + ph * dy;
  const double max_x = static_cast<double>(max_shape[1] - 1), max_y = static_cast<double>(max_shape[0] - 1);
  at::Tensor x1 = (gx - gw * 0.5 + 0.5).clamp(0, max_x), y1 = (gy - gh * 0.5 + 0.5).clamp(0, max_y);
  at::Tensor x2 = (gx + gw * 0.5 - 0.5).clamp(0, max_x), y2 = (gy + gh * 0.5 - 0.5).clamp(0, max_y);
  return at::stack({x1, y1, x2, y2}, 1).to(rois.scalar_type());
}

at::Tensor npu_iou(const at::Tensor& bboxes, const at::Tensor& gtboxes, int64_t mode) {
  checkBoxes("npu_iou", "bboxes", bboxes);
  checkBoxes("npu_iou", "gtboxes", gtboxes);
  TORCH_CHECK_VALUE(mode == 0 || mode == 1, "npu_iou: mode must be 0 (IoU) or 1 (IoF), got ", mode);
  // Result [len(gtboxes), len(bboxes)]; IoF divides by the ground-truth box's area. As the device's Iou
  // kernel (eps attribute 0.01), box areas count each side 0.01 longer, so degenerate boxes never
  // divide by zero and identical boxes give slightly less than 1.
  Overlap o = overlap(bboxes.to(at::kFloat), gtboxes.to(at::kFloat), /*cross=*/true);
  constexpr double kEps = 0.01;
  auto area = [&](const at::Tensor& t) {
    return ((t.select(-1, 2) - t.select(-1, 0) + kEps) * (t.select(-1, 3) - t.select(-1, 1) + kEps));
  };
  at::Tensor area_a = area(bboxes.to(at::kFloat)).unsqueeze(0), area_b = area(gtboxes.to(at::kFloat)).unsqueeze(1);
  at::Tensor denom = mode == 0 ? area_a + area_b - o.inter : area_b.expand_as(o.inter);
  return (o.inter / denom).to(bboxes.scalar_type());
}

// torch_npu's other name for npu_iou (the same device op).
at::Tensor npu_ptiou(const at::Tensor& bboxes, const at::Tensor& gtboxes, int64_t mode) {
  return npu_iou(bboxes, gtboxes, mode);
}

at::Tensor npu_giou(const at::Tensor& self, const at::Tensor& gtboxes, bool trans, bool is_cross, int64_t mode) {
  checkGiou(self, gtboxes, is_cross, mode);
  return giouForward(self, gtboxes, trans, is_cross).to(self.scalar_type());
}

std::tuple<at::Tensor, at::Tensor> npu_giou_backward(const at::Tensor& grad, const at::Tensor& bboxes,
                                                     const at::Tensor& gtboxes, bool trans, bool is_cross,
                                                     int64_t mode) {
  checkGiou(bboxes, gtboxes, is_cross, mode);
  auto grads = custom::compositeGrads(
      [&](const std::vector<at::Tensor>& in) {
        return std::vector<at::Tensor>{giouForward(in[0], in[1], trans, is_cross)};
      },
      {bboxes, gtboxes}, {grad.to(at::kFloat)});
  return {grads[0].to(bboxes.scalar_type()), grads[1].to(gtboxes.scalar_type())};
}

std::tuple<at::Tensor, at::Tensor> npu_nms_v4(const at::Tensor& self, const at::Tensor& scores,
                                              const at::Scalar& max_output_size, const at::Tensor& iou_threshold,
                                              const at::Tensor& scores_threshold, bool pad_to_max_output_size) {
  checkBoxes("npu_nms_v4", "boxes", self);
  const int64_t n = self.size(0), max_out = max_output_size.toLong();
  TORCH_CHECK_VALUE(scores.dim() == 1 && scores.size(0) == n, "npu_nms_v4: scores must have shape (", n,
                    "), got ", scores.sizes());
  TORCH_CHECK_VALUE(max_out >= 0, "npu_nms_v4: max_output_size must be >= 0, got ", max_out);
  // Greedy suppression is sequential and data dependent: it runs on the host over the device data.
  at::Tensor boxes = self.to(at::kCPU, at::kFloat).contiguous(), s = scores.to(at::kCPU, at::kFloat).contiguous();
  const float iou_max = iou_threshold.item<float>(), score_min = scores_threshold.item<float>();
  const float* b = boxes.data_ptr<float>();
  const float* sc = s.data_ptr<float>();
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return sc[x] > sc[y]; });
  auto iou = [&](int64_t i, int64_t j) {
    const float* p = b + 4 * i;
    const float* q = b + 4 * j;
    const float w = std::max(0.f, std::min(p[2], q[2]) - std::max(p[0], q[0]));
    const float h = std::max(0.f, std::min(p[3], q[3]) - std::max(p[1], q[1]));
    const float inter = w * h;
    const float uni = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter;
    return uni > 0 ? inter / uni : 0.f;
  };
  std::vector<int64_t> kept;
  for (int64_t i : order) {
    if (static_cast<int64_t>(kept.size()) >= max_out || !(sc[i] > score_min)) break;
    bool keep = true;
    for (int64_t k : kept) keep = keep && iou(i, k) <= iou_max;
    if (keep) kept.push_back(i);
  }
  // Shapes do not depend on the data (as on the device): max_output_size slots, the valid ones first.
  at::Tensor selected = at::zeros({max_out}, at::TensorOptions().dtype(at::kInt));
  for (size_t k = 0; k < kept.size(); ++k) selected[k] = static_cast<int>(kept[k]);
  at::Tensor valid = at::zeros({}, at::TensorOptions().dtype(at::kInt)).fill_(static_cast<int>(kept.size()));
  return {selected.to(self.device()), valid.to(self.device())};
}

std::tuple<at::Tensor, at::Tensor> npu_nms_v4_meta(const at::Tensor& self, const at::Tensor& scores,
                                                   const at::Scalar& max_output_size, const at::Tensor& iou_threshold,
                                                   const at::Tensor& scores_threshold, bool pad_to_max_output_size) {
  auto opts = self.options().dtype(at::kInt);
  return {at::empty({max_output_size.toLong()}, opts), at::empty({}, opts)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_nms_with_mask(const at::Tensor& input,
                                                                 const at::Scalar& iou_threshold) {
  TORCH_CHECK_VALUE(input.dim() == 2 && input.size(1) == 5,
                    "npu_nms_with_mask: input must have shape (N, 5) of (x1, y1, x2, y2, score), got ", input.sizes());
  const int64_t n = input.size(0);
  const float iou_max = iou_threshold.toFloat();
  // Boxes sorted by score (descending, stable), their original indices, and 1 for the boxes greedy
  // suppression keeps: a box goes when it overlaps a kept, higher-scoring box by more than the threshold.
  at::Tensor rows = input.to(at::kCPU, at::kFloat).contiguous();
  const float* r = rows.data_ptr<float>();
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return r[5 * x + 4] > r[5 * y + 4]; });
  auto iou = [&](int64_t i, int64_t j) {
    const float* p = r + 5 * i;
    const float* q = r + 5 * j;
    const float w = std::max(0.f, std::min(p[2], q[2]) - std::max(p[0], q[0]));
    const float h = std::max(0.f, std::min(p[3], q[3]) - std::max(p[1], q[1]));
    const float inter = w * h;
    const float uni = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter;
    return uni > 0 ? inter / uni : 0.f;
  };
  at::Tensor idx = at::empty({n}, at::TensorOptions().dtype(at::kInt));
  at::Tensor mask = at::zeros({n}, at::TensorOptions().dtype(at::kByte));
  int* idx_p = idx.data_ptr<int>();
  uint8_t* mask_p = mask.data_ptr<uint8_t>();
  std::vector<int64_t> kept;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = order[k];
    idx_p[k] = static_cast<int>(i);
    bool keep = true;
    for (int64_t j : kept) keep = keep && iou(i, j) <= iou_max;
    if (keep) kept.push_back(i);
    mask_p[k] = keep ? 1 : 0;
  }
  at::Tensor sorted = rows.index_select(0, idx.to(at::kLong)).to(input.scalar_type());
  return {sorted.to(input.device()), idx.to(input.device()), mask.to(input.device())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_nms_with_mask_meta(const at::Tensor& input,
                                                                      const at::Scalar& iou_threshold) {
  const int64_t n = input.size(0);
  return {at::empty_like(input), at::empty({n}, input.options().dtype(at::kInt)),
          at::empty({n}, input.options().dtype(at::kByte))};
}

}  // namespace at_npu::native
