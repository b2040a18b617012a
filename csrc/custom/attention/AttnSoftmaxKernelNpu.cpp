// AttnSoftmaxKernelNpu.cpp - npu_attn_softmax_ (an in-place softmax over the last dimension of attention scores, on
// the aclnnSoftmax device op) and npu_attn_softmax_backward_ (in place, self = softmax_backward(grad_output @
// values^T, self), which upstream's test of npu_attn_softmax_ also calls). No autograd: both are in-place kernels.
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/matmul.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

void checkAttnScores(const char* op, const at::Tensor& self) {
  TORCH_CHECK_VALUE(self.dim() >= 1, op, ": self must have at least one dimension");
  TORCH_CHECK_TYPE(self.scalar_type() == at::kFloat || self.scalar_type() == at::kHalf ||
                       self.scalar_type() == at::kBFloat16,
                   op, ": self must be float32, float16 or bfloat16, got ", self.scalar_type());
}

void checkAttnSoftmaxBackward(const at::Tensor& self, const at::Tensor& grad_output, const at::Tensor& values) {
  const char* op = "npu_attn_softmax_backward_";
  checkAttnScores(op, self);
  TORCH_CHECK_VALUE(self.dim() >= 2 && grad_output.dim() == self.dim() && values.dim() == self.dim() &&
                        grad_output.size(-2) == self.size(-2) && values.size(-2) == self.size(-1) &&
                        grad_output.size(-1) == values.size(-1),
                    op, ": self (..., Sq, Skv), grad_output (..., Sq, H) and values (..., Skv, H) do not fit, got ",
                    self.sizes(), ", ", grad_output.sizes(), " and ", values.sizes());
  TORCH_CHECK_TYPE(grad_output.scalar_type() == self.scalar_type() && values.scalar_type() == self.scalar_type(), op,
                   ": self, grad_output and values must share one dtype");
}

}  // namespace

at::Tensor& npu_attn_softmax_(at::Tensor& self) {
  checkAttnScores("npu_attn_softmax_", self);
  const int64_t dim = self.dim() - 1;
  EXEC_NPU_CMD(aclnnSoftmax, self, dim, self);
  return self;
}

at::Tensor& npu_attn_softmax__meta(at::Tensor& self) {
  checkAttnScores("npu_attn_softmax_", self);
  return self;
}

// self holds the forward's softmax output; the gradient of the scores replaces it.
at::Tensor& npu_attn_softmax_backward_(at::Tensor& self, const at::Tensor& grad_output, const at::Tensor& values) {
  checkAttnSoftmaxBackward(self, grad_output, values);
  const at::Tensor grad_probs = at::matmul(grad_output, values.transpose(-2, -1));
  at::_softmax_backward_data_out(self, grad_probs, self, self.dim() - 1, self.scalar_type());
  return self;
}

at::Tensor& npu_attn_softmax_backward__meta(at::Tensor& self, const at::Tensor& grad_output,
                                            const at::Tensor& values) {
  checkAttnSoftmaxBackward(self, grad_output, values);
  return self;
}

}  // namespace at_npu::native
