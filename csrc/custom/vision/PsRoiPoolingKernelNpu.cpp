// PsRoiPoolingKernelNpu.cpp - npu_ps_roi_pooling: R-FCN's position-sensitive ROI average pooling (on
// aclnnPSROIPoolingV2), and its gradient npu_ps_roi_pooling_backward (on aclnnPSROIPoolingGradV2D), which the
// autograd formula calls with the feature map's (H, W).
#include <ATen/ops/empty.h>

#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool isPoolType(at::ScalarType type) {
  return type == at::kFloat || type == at::kHalf || type == at::kBFloat16;
}

// rois (batch, 5, rois_num) of [batch_id, x1, y1, x2, y2] columns; channels = output_dim * group_size^2.
void checkPsRoi(const char* op, const at::Tensor& rois, int64_t batch, int64_t channels, double spatial_scale,
                int64_t group_size, int64_t output_dim) {
  TORCH_CHECK_TYPE(isPoolType(rois.scalar_type()), op, ": rois must be float32, float16 or bfloat16, got ",
                   rois.scalar_type());
  TORCH_CHECK_VALUE(rois.dim() == 3 && rois.size(0) == batch && rois.size(1) == 5, op,
                    ": rois must be (batch, 5, rois_num) of [batch_id, x1, y1, x2, y2] with the feature map's batch ",
                    batch, ", got ", rois.sizes());
  TORCH_CHECK_VALUE(group_size > 0 && group_size < 128, op, ": group_size must be in (0, 128), got ", group_size);
  TORCH_CHECK_VALUE(output_dim > 0, op, ": output_dim must be positive, got ", output_dim);
  TORCH_CHECK_VALUE(channels == output_dim * group_size * group_size, op, ": the feature map has ", channels,
                    " channels; it needs output_dim * group_size^2 = ", output_dim * group_size * group_size);
  TORCH_CHECK_VALUE(spatial_scale > 0, op, ": spatial_scale must be positive, got ", spatial_scale);
}

std::vector<int64_t> pooledShape(const at::Tensor& self, const at::Tensor& rois, double spatial_scale,
                                 int64_t group_size, int64_t output_dim) {
  const char* op = "npu_ps_roi_pooling";
  TORCH_CHECK_TYPE(isPoolType(self.scalar_type()), op, ": x must be float32, float16 or bfloat16, got ",
                   self.scalar_type());
  TORCH_CHECK_VALUE(self.dim() == 4, op, ": x must be (batch, output_dim * group_size^2, H, W), got ", self.sizes());
  checkPsRoi(op, rois, self.size(0), self.size(1), spatial_scale, group_size, output_dim);
  return {rois.size(0) * rois.size(2), output_dim, group_size, group_size};
}

std::vector<int64_t> gradShape(const at::Tensor& output_grad, const at::Tensor& rois, double spatial_scale,
                               int64_t group_size, int64_t output_dim, at::IntArrayRef input_size) {
  const char* op = "npu_ps_roi_pooling_backward";
  TORCH_CHECK_VALUE(input_size.size() >= 2 && input_size[0] > 0 && input_size[1] > 0, op,
                    ": input_size must give the feature map's [H, W], got ", input_size);
  TORCH_CHECK_VALUE(rois.dim() == 3, op, ": rois must be (batch, 5, rois_num), got ", rois.sizes());
  const int64_t channels = output_dim * group_size * group_size;
  checkPsRoi(op, rois, rois.size(0), channels, spatial_scale, group_size, output_dim);
  TORCH_CHECK_VALUE(output_grad.dim() == 4 && output_grad.size(0) == rois.size(0) * rois.size(2) &&
                        output_grad.size(1) == output_dim && output_grad.size(2) == group_size &&
                        output_grad.size(3) == group_size,
                    op, ": output_grad must be (batch * rois_num, output_dim, group_size, group_size), got ",
                    output_grad.sizes());
  TORCH_CHECK_TYPE(isPoolType(output_grad.scalar_type()), op,
                   ": output_grad must be float32, float16 or bfloat16, got ", output_grad.scalar_type());
  return {rois.size(0), channels, input_size[0], input_size[1]};
}

}  // namespace

at::Tensor npu_ps_roi_pooling(const at::Tensor& self, const at::Tensor& rois, double spatial_scale, int64_t group_size,
                              int64_t output_dim) {
  at::Tensor out = at::empty(pooledShape(self, rois, spatial_scale, group_size, output_dim), self.options());
  EXEC_NPU_CMD(aclnnPSROIPoolingV2, self, rois, spatial_scale, output_dim, group_size, out);
  return out;
}

at::Tensor npu_ps_roi_pooling_meta(const at::Tensor& self, const at::Tensor& rois, double spatial_scale,
                                   int64_t group_size, int64_t output_dim) {
  return at::empty(pooledShape(self, rois, spatial_scale, group_size, output_dim), self.options());
}

at::Tensor npu_ps_roi_pooling_backward(const at::Tensor& output_grad, const at::Tensor& rois, double spatial_scale,
                                       int64_t group_size, int64_t output_dim, at::IntArrayRef input_size) {
  at::Tensor grad_input = at::empty(gradShape(output_grad, rois, spatial_scale, group_size, output_dim, input_size),
                                    output_grad.options());
  const std::vector<int64_t> map_size{input_size[0], input_size[1]};
  EXEC_NPU_CMD(aclnnPSROIPoolingGradV2D, output_grad, rois, spatial_scale, group_size, output_dim,
               at::IntArrayRef(map_size), grad_input);
  return grad_input;
}

at::Tensor npu_ps_roi_pooling_backward_meta(const at::Tensor& output_grad, const at::Tensor& rois,
                                            double spatial_scale, int64_t group_size, int64_t output_dim,
                                            at::IntArrayRef input_size) {
  return at::empty(gradShape(output_grad, rois, spatial_scale, group_size, output_dim, input_size),
                   output_grad.options());
}

}  // namespace at_npu::native
