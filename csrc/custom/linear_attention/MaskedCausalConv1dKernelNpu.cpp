// MaskedCausalConv1dKernelNpu.cpp - npu_masked_causal_conv1d: a depthwise causal conv1d along S of (S, B, H) with
// (W, H) taps, outputs zeroed where mask[b, s] is False (aclnnMaskedCausalConv1d), and its backward
// npu_masked_causal_conv1d_backward (aclnnMaskedCausalConv1dBackward), bound as its autograd formula.
#include <ATen/ops/empty.h>

#include <tuple>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

void checkMaskedCausalConv1d(const char* op, const at::Tensor& input, const at::Tensor& weight,
                             const std::optional<at::Tensor>& mask) {
  TORCH_CHECK_VALUE(input.dim() == 3, op, ": input must be 3-D (S, B, H), got ", input.sizes());
  TORCH_CHECK_VALUE(weight.dim() == 2 && weight.size(1) == input.size(2) && weight.size(0) >= 1, op,
                    ": weight must be (W, H) with H = ", input.size(2), ", got ", weight.sizes());
  TORCH_CHECK_TYPE((input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16 ||
                    input.scalar_type() == at::kFloat) &&
                       weight.scalar_type() == input.scalar_type(),
                   op, ": input and weight must share one dtype of float16, bfloat16 or float32, got ",
                   input.scalar_type(), " and ", weight.scalar_type());
  if (mask.has_value() && mask->defined()) {
    TORCH_CHECK_TYPE(mask->scalar_type() == at::kBool, op, ": mask must be bool (True = keep), got ",
                     mask->scalar_type());
    TORCH_CHECK_VALUE(mask->dim() == 2 && mask->size(0) == input.size(1) && mask->size(1) == input.size(0), op,
                      ": mask must be (B, S) = (", input.size(1), ", ", input.size(0), "), got ", mask->sizes());
  }
}

}  // namespace

at::Tensor npu_masked_causal_conv1d(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& mask) {
  checkMaskedCausalConv1d("npu_masked_causal_conv1d", input, weight, mask);
  at::Tensor out = at::empty(input.sizes(), input.options());
  EXEC_NPU_CMD(aclnnMaskedCausalConv1d, input, weight, mask, out);
  return out;
}

at::Tensor npu_masked_causal_conv1d_meta(const at::Tensor& input, const at::Tensor& weight,
                                         const std::optional<at::Tensor>& mask) {
  checkMaskedCausalConv1d("npu_masked_causal_conv1d", input, weight, mask);
  return at::empty(input.sizes(), input.options());
}

std::tuple<at::Tensor, at::Tensor> npu_masked_causal_conv1d_backward(const at::Tensor& grad_output,
                                                                     const at::Tensor& input, const at::Tensor& weight,
                                                                     const std::optional<at::Tensor>& mask) {
  const char* op = "npu_masked_causal_conv1d_backward";
  checkMaskedCausalConv1d(op, input, weight, mask);
  TORCH_CHECK_VALUE(grad_output.sizes() == input.sizes() && grad_output.scalar_type() == input.scalar_type(), op,
                    ": grad_output must match input ", input.sizes(), " (", input.scalar_type(), "), got ",
                    grad_output.sizes(), " (", grad_output.scalar_type(), ")");
  at::Tensor grad_input = at::empty(grad_output.sizes(), grad_output.options());
  at::Tensor grad_weight = at::empty(weight.sizes(), grad_output.options());
  EXEC_NPU_CMD(aclnnMaskedCausalConv1dBackward, grad_output, input, weight, mask, grad_input, grad_weight);
  return {grad_input, grad_weight};
}

std::tuple<at::Tensor, at::Tensor> npu_masked_causal_conv1d_backward_meta(const at::Tensor& grad_output,
                                                                          const at::Tensor& input,
                                                                          const at::Tensor& weight,
                                                                          const std::optional<at::Tensor>& mask) {
  checkMaskedCausalConv1d("npu_masked_causal_conv1d_backward", input, weight, mask);
  return {at::empty(grad_output.sizes(), grad_output.options()), at::empty(weight.sizes(), grad_output.options())};
}

}  // namespace at_npu::native
