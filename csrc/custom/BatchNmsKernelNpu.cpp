// BatchNmsKernelNpu.cpp - npu_batch_nms: per-class greedy non-maximum suppression over a batch, then the
// best max_total_size detections of every image (TensorFlow's combined_non_max_suppression). Greedy
// suppression is sequential and data dependent: it runs on the host over the device data.
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <algorithm>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/CustomOpUtils.h"

namespace at_npu::native {
namespace {

struct Detection {
  float score;
  int64_t cls;
  const float* box;
};

float iou(const float* p, const float* q) {
  const float w = std::max(0.f, std::min(p[2], q[2]) - std::max(p[0], q[0]));
  const float h = std::max(0.f, std::min(p[3], q[3]) - std::max(p[1], q[1]));
  const float inter = w * h;
  const float uni = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter;
  return uni > 0 ? inter / uni : 0.f;
}

void checkBatchNms(const at::Tensor& self, const at::Tensor& scores, int64_t max_size_per_class,
                   int64_t max_total_size) {
  TORCH_CHECK_VALUE(self.dim() == 4 && self.size(3) == 4, "npu_batch_nms: boxes must be [batch, num_boxes, q, 4] ",
                    "(q = 1 or the number of classes), got ", self.sizes());
  TORCH_CHECK_VALUE(scores.dim() == 3 && scores.size(0) == self.size(0) && scores.size(1) == self.size(1),
                    "npu_batch_nms: scores must be [batch, num_boxes, num_classes] matching boxes ", self.sizes(),
                    ", got ", scores.sizes());
  TORCH_CHECK_VALUE(self.size(2) == 1 || self.size(2) == scores.size(2), "npu_batch_nms: boxes' q dimension (",
                    self.size(2), ") must be 1 or the number of classes (", scores.size(2), ")");
  TORCH_CHECK_VALUE(max_size_per_class > 0 && max_total_size > 0,
                    "npu_batch_nms: max_size_per_class and max_total_size must be positive");
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_batch_nms(
    const at::Tensor& self, const at::Tensor& scores, double score_threshold, double iou_threshold,
    int64_t max_size_per_class, int64_t max_total_size, bool change_coordinate_frame, bool transpose_box) {
  checkBatchNms(self, scores, max_size_per_class, max_total_size);
  TORCH_CHECK_VALUE(!transpose_box, "npu_batch_nms: transpose_box=True is not supported; pass boxes as "
                    "[batch, num_boxes, q, 4]");
  const int64_t batch = self.size(0), n = self.size(1), q = self.size(2), classes = scores.size(2);
  at::Tensor boxes = self.to(at::kCPU, at::kFloat).contiguous(), sc = scores.to(at::kCPU, at::kFloat).contiguous();
  const float* b = boxes.data_ptr<float>();
  const float* s = sc.data_ptr<float>();
  auto cpu_float = at::TensorOptions().dtype(at::kFloat);
  at::Tensor out_boxes = at::zeros({batch, max_total_size, 4}, cpu_float);
  at::Tensor out_scores = at::zeros({batch, max_total_size}, cpu_float);
  at::Tensor out_classes = at::zeros({batch, max_total_size}, cpu_float);
  at::Tensor out_num = at::zeros({batch}, at::TensorOptions().dtype(at::kInt));
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<Detection> all;
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<Detection> cand;
      for (int64_t j = 0; j < n; ++j) {
        const float score = s[(i * n + j) * classes + c];
        if (score > score_threshold) cand.push_back({score, c, b + ((i * n + j) * q + (q == 1 ? 0 : c)) * 4});
      }
      std::stable_sort(cand.begin(), cand.end(), [](const auto& x, const auto& y) { return x.score > y.score; });
      std::vector<Detection> kept;
      for (const auto& d : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_size_per_class) break;
        bool keep = true;
        for (const auto& k : kept) keep = keep && iou(d.box, k.box) <= iou_threshold;
        if (keep) kept.push_back(d);
      }
      all.insert(all.end(), kept.begin(), kept.end());
    }
    std::stable_sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.score > y.score; });
    const int64_t count = std::min<int64_t>(all.size(), max_total_size);
    for (int64_t k = 0; k < count; ++k) {
      for (int64_t e = 0; e < 4; ++e) {
        float v = all[k].box[e];
        if (change_coordinate_frame) v = std::clamp(v, 0.f, 1.f);  // normalised coordinates clip to the window
        out_boxes[i][k][e] = v;
      }
      out_scores[i][k] = all[k].score;
      out_classes[i][k] = static_cast<float>(all[k].cls);
    }
    out_num[i] = static_cast<int>(count);
  }
  const auto dtype = self.scalar_type();
  return {out_boxes.to(self.device(), dtype), out_scores.to(self.device(), dtype),
          out_classes.to(self.device(), dtype), out_num.to(self.device())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_batch_nms_meta(
    const at::Tensor& self, const at::Tensor& scores, double score_threshold, double iou_threshold,
    int64_t max_size_per_class, int64_t max_total_size, bool change_coordinate_frame, bool transpose_box) {
  checkBatchNms(self, scores, max_size_per_class, max_total_size);
  const int64_t batch = self.size(0);
  return {at::empty({batch, max_total_size, 4}, self.options()), at::empty({batch, max_total_size}, self.options()),
          at::empty({batch, max_total_size}, self.options()), at::empty({batch}, self.options().dtype(at::kInt))};
}

}  // namespace at_npu::native
