// NmsRotatedKernelNpu.cpp - npu_nms_rotated: greedy non-maximum suppression of rotated boxes (on aclnnRotatedNMS).
// As in torch_npu the kept indices come back as a tensor of exactly their number, so the launch waits for the
// device op to read that count; the Meta kernel gives the maximal shape.
#include <ATen/ops/empty.h>

#include <algorithm>
#include <tuple>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool isBoxType(at::ScalarType type) {
  return type == at::kFloat || type == at::kHalf || type == at::kBFloat16;
}

// The most indices the op can keep: every box, or max_output_size of them (-1: no limit).
int64_t nmsCapacity(const at::Tensor& dets, const at::Tensor& scores, int64_t max_output_size, int64_t mode) {
  const char* op = "npu_nms_rotated";
  TORCH_CHECK_TYPE(isBoxType(dets.scalar_type()) && isBoxType(scores.scalar_type()), op,
                   ": dets and scores must be float32, float16 or bfloat16, got ", dets.scalar_type(), " and ",
                   scores.scalar_type());
  TORCH_CHECK_VALUE(dets.dim() == 2 && dets.size(1) == 5, op, ": dets must be (num_boxes, 5), got ", dets.sizes());
  TORCH_CHECK_VALUE(scores.dim() == 1 && scores.size(0) == dets.size(0), op, ": scores must be (num_boxes) = (",
                    dets.size(0), "), got ", scores.sizes());
  TORCH_CHECK_VALUE(mode == 0 || mode == 1, op, ": mode must be 0 (x_ctr, y_ctr, w, h, angle) or 1 ",
                    "(x1, y1, x2, y2, angle), got ", mode);
  TORCH_CHECK_VALUE(max_output_size >= -1, op, ": max_output_size must be -1 (no limit) or >= 0, got ",
                    max_output_size);
  return max_output_size < 0 ? dets.size(0) : std::min(max_output_size, dets.size(0));
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_nms_rotated(const at::Tensor& self, const at::Tensor& scores,
                                                   double iou_threshold, double scores_threshold,
                                                   int64_t max_output_size, int64_t mode) {
  const int64_t capacity = nmsCapacity(self, scores, max_output_size, mode);
  at::Tensor selected = at::empty({capacity}, self.options().dtype(at::kInt));
  at::Tensor count = at::empty({1}, self.options().dtype(at::kInt));
  EXEC_NPU_CMD(aclnnRotatedNMS, self, scores, iou_threshold, scores_threshold, max_output_size, mode, selected, count);
  const int64_t kept = count.item<int64_t>();
  return {selected.narrow(0, 0, kept).clone(), count};
}

std::tuple<at::Tensor, at::Tensor> npu_nms_rotated_meta(const at::Tensor& self, const at::Tensor& scores,
                                                        double iou_threshold, double scores_threshold,
                                                        int64_t max_output_size, int64_t mode) {
  const int64_t capacity = nmsCapacity(self, scores, max_output_size, mode);
  return {at::empty({capacity}, self.options().dtype(at::kInt)), at::empty({1}, self.options().dtype(at::kInt))};
}

}  // namespace at_npu::native
