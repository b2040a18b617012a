// LinearSoftmaxKernelNpu.cpp - npu_linear and npu_scaled_masked_softmax with their backward kernels;
// npu_softmax_cross_entropy_with_logits.
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/triu.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/CustomOpUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

at::Tensor npu_linear(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  TORCH_CHECK_VALUE(input.dim() == 2 && weight.dim() == 2 && input.size(1) == weight.size(1),
                    "npu_linear: expects input (M, K) and weight (N, K), got ", input.sizes(), " and ",
                    weight.sizes());
  at::Tensor out = at::matmul(input, weight.t());
  if (bias.has_value() && bias->defined()) out = out + *bias;
  return out;
}

std::tuple<at::Tensor, at::Tensor> npu_linear_backward(const at::Tensor& grad, const at::Tensor& input,
                                                       const at::Tensor& weight) {
  return {at::matmul(grad, weight), at::matmul(grad.t(), input)};
}

namespace {
void checkSoftmaxMask(const at::Tensor& x, const at::Tensor& mask, bool fixed_triu_mask) {
  TORCH_CHECK_VALUE(x.dim() >= 2, "npu_scaled_masked_softmax: x must be at least 2-D, got ", x.sizes());
  TORCH_CHECK_VALUE(fixed_triu_mask || mask.scalar_type() == at::kBool || mask.scalar_type() == at::kByte,
                    "npu_scaled_masked_softmax: mask must be bool (True = masked out), got ", mask.scalar_type());
}
}  // namespace

// softmax(x * scale, masked) on aclnnScaledMaskedSoftmax; the mask broadcasts to x (or, with
// fixed_triu_mask, is the strict upper triangle).
at::Tensor npu_scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, const at::Scalar& scale,
                                     bool fixed_triu_mask) {
  checkSoftmaxMask(x, mask, fixed_triu_mask);
  at::Tensor out = at::empty(x.sizes(), x.options());
  const double s = scale.toDouble();
  EXEC_NPU_CMD(aclnnScaledMaskedSoftmax, x, mask, s, fixed_triu_mask, out);
  return out;
}

at::Tensor npu_scaled_masked_softmax_meta(const at::Tensor& x, const at::Tensor& mask, const at::Scalar& scale,
                                          bool fixed_triu_mask) {
  checkSoftmaxMask(x, mask, fixed_triu_mask);
  return at::empty(x.sizes(), x.options());
}

at::Tensor npu_scaled_masked_softmax_backward(const at::Tensor& y_grad, const at::Tensor& y, const at::Tensor& mask,
                                              const at::Scalar& scale, bool fixed_triu_mask) {
  at::Tensor out = at::empty(y.sizes(), y_grad.options());
  const double s = scale.toDouble();
  EXEC_NPU_CMD(aclnnScaledMaskedSoftmaxBackward, y_grad, y, mask, s, fixed_triu_mask, out);
  return out;
}

at::Tensor npu_scaled_masked_softmax_backward_meta(const at::Tensor& y_grad, const at::Tensor& y,
                                                   const at::Tensor& mask, const at::Scalar& scale,
                                                   bool fixed_triu_mask) {
  return at::empty(y.sizes(), y_grad.options());
}

// Per-row loss -sum(labels * log_softmax(features)) over the last dim (labels are probabilities).
at::Tensor npu_softmax_cross_entropy_with_logits(const at::Tensor& self, const at::Tensor& labels) {
  TORCH_CHECK_VALUE(self.sizes() == labels.sizes(), "npu_softmax_cross_entropy_with_logits: features ",
                    self.sizes(), " and labels ", labels.sizes(), " must have the same shape");
  return -at::sum(labels * at::log_softmax(self, -1), {-1});
}

}  // namespace at_npu::native
