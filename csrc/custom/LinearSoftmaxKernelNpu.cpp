// LinearSoftmaxKernelNpu.cpp - npu_linear and npu_scaled_masked_softmax with their backward kernels;
// npu_softmax_cross_entropy_with_logits.
#include <ATen/ops/full.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/triu.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/CustomOpUtils.h"

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
// True where a score is masked out: the given mask, or the strict upper triangle (future positions).
at::Tensor effectiveMask(const at::Tensor& x, const at::Tensor& mask, bool fixed_triu_mask) {
  if (fixed_triu_mask) {
    const int64_t s1 = x.size(-2), s2 = x.size(-1);
    return at::triu(at::ones({s1, s2}, x.options().dtype(at::kBool)), 1);
  }
  TORCH_CHECK_VALUE(mask.scalar_type() == at::kBool || mask.scalar_type() == at::kByte,
                    "npu_scaled_masked_softmax: mask must be bool (True = masked out), got ", mask.scalar_type());
  return mask.to(at::kBool);
}
}  // namespace

at::Tensor npu_scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, const at::Scalar& scale,
                                     bool fixed_triu_mask) {
  at::Tensor masked = effectiveMask(x, mask, fixed_triu_mask);
  // A large finite fill keeps fully masked rows finite (uniform), like the device kernel.
  at::Tensor scores = (x.to(at::kFloat) * scale).masked_fill(masked, -10000.0);
  return at::softmax(scores, -1).to(x.scalar_type());
}

at::Tensor npu_scaled_masked_softmax_backward(const at::Tensor& y_grad, const at::Tensor& y, const at::Tensor& mask,
                                              const at::Scalar& scale, bool fixed_triu_mask) {
  at::Tensor g = y_grad.to(at::kFloat), p = y.to(at::kFloat);
  at::Tensor dx = (g - at::sum(g * p, {-1}, /*keepdim=*/true)) * p * scale;
  return dx.masked_fill(effectiveMask(y, mask, fixed_triu_mask), 0.0).to(y_grad.scalar_type());
}

// Per-row loss -sum(labels * log_softmax(features)) over the last dim (labels are probabilities).
at::Tensor npu_softmax_cross_entropy_with_logits(const at::Tensor& self, const at::Tensor& labels) {
  TORCH_CHECK_VALUE(self.sizes() == labels.sizes(), "npu_softmax_cross_entropy_with_logits: features ",
                    self.sizes(), " and labels ", labels.sizes(), " must have the same shape");
  return -at::sum(labels * at::log_softmax(self, -1), {-1});
}

}  // namespace at_npu::native
