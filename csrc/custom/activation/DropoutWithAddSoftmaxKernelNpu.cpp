// DropoutWithAddSoftmaxKernelNpu.cpp - npu_dropout_with_add_softmax (softmax(x1 + alpha * self), then
// dropout) and its backward, on aclnnAxpyWithSoftmaxAndDropOutDoMask / aclnnDropoutWithMulsAndSoftmaxGrad.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

// The checks upstream's kernel makes (same shapes, prob in [0, 1), a valid dim); returns dim wrapped.
int64_t checkArguments(const at::Tensor& self, const at::Tensor& x1, double prob, int64_t dim) {
  TORCH_CHECK_VALUE(self.sizes() == x1.sizes(), "npu_dropout_with_add_softmax: self ", self.sizes(), " and x1 ",
                    x1.sizes(), " must have the same shape");
  TORCH_CHECK_VALUE(self.scalar_type() == x1.scalar_type(), "npu_dropout_with_add_softmax: self (",
                    self.scalar_type(), ") and x1 (", x1.scalar_type(), ") must have the same dtype");
  TORCH_CHECK_VALUE(at::isFloatingType(self.scalar_type()), "npu_dropout_with_add_softmax: expects a floating ",
                    "point input, got ", self.scalar_type());
  TORCH_CHECK_VALUE(prob >= 0.0 && prob < 1.0, "npu_dropout_with_add_softmax: prob (the probability of dropping) ",
                    "must be in [0, 1), got ", prob);
  TORCH_CHECK_VALUE(self.dim() >= 1, "npu_dropout_with_add_softmax: expects at least a 1-D input");
  TORCH_CHECK_INDEX(dim >= -self.dim() && dim < self.dim(), "npu_dropout_with_add_softmax: dim ", dim,
                    " is out of range for a ", self.dim(), "-D input");
  return dim < 0 ? dim + self.dim() : dim;
}

}  // namespace

// Returns (mask, softmax, dropout): mask holds one byte per element (1 = kept), as upstream's Meta
// kernel describes it; the dropped elements are drawn from the device's generator.
std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_dropout_with_add_softmax(const at::Tensor& self,
                                                                            const at::Tensor& x1,
                                                                            const at::Scalar& alpha, double prob,
                                                                            int64_t dim) {
  const int64_t axis = checkArguments(self, x1, prob, dim);
  const double keep = 1.0 - prob;
  at::Tensor mask = at::empty({self.numel()}, self.options().dtype(at::kByte));
  if (prob == 0.0) {
    mask.fill_(1);
  } else {
    mask.bernoulli_(keep);
  }
  at::Tensor softmax = at::empty(self.sizes(), self.options());
  at::Tensor dropout = at::empty(self.sizes(), self.options());
  EXEC_NPU_CMD(aclnnAxpyWithSoftmaxAndDropOutDoMask, x1, self, mask, alpha, keep, axis, softmax, dropout);
  return {mask, softmax, dropout};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_dropout_with_add_softmax_meta(const at::Tensor& self,
                                                                                 const at::Tensor& x1,
                                                                                 const at::Scalar& alpha, double prob,
                                                                                 int64_t dim) {
  checkArguments(self, x1, prob, dim);
  return {at::empty({self.numel()}, self.options().dtype(at::kByte)), at::empty(self.sizes(), self.options()),
          at::empty(self.sizes(), self.options())};
}

// Returns (grad_self, grad_x1): the gradients of the dropout output with respect to self (scaled by
// alpha) and x1.
std::tuple<at::Tensor, at::Tensor> npu_dropout_with_add_softmax_backward(const at::Tensor& grad,
                                                                         const at::Tensor& mask,
                                                                         const at::Tensor& softmax_out,
                                                                         const at::Scalar& alpha, double prob,
                                                                         int64_t dim) {
  const int64_t axis = checkArguments(softmax_out, grad, prob, dim);
  TORCH_CHECK_VALUE(mask.scalar_type() == at::kByte && mask.numel() == softmax_out.numel(),
                    "npu_dropout_with_add_softmax_backward: mask must be the uint8 mask the forward returned (",
                    softmax_out.numel(), " elements), got ", mask.scalar_type(), " with ", mask.numel());
  at::Tensor grad_x1 = at::empty(softmax_out.sizes(), softmax_out.options());
  at::Tensor grad_self = at::empty(softmax_out.sizes(), softmax_out.options());
  EXEC_NPU_CMD(aclnnDropoutWithMulsAndSoftmaxGrad, grad, mask, softmax_out, alpha, 1.0 - prob, axis, grad_x1,
               grad_self);
  return {grad_self, grad_x1};
}

std::tuple<at::Tensor, at::Tensor> npu_dropout_with_add_softmax_backward_meta(const at::Tensor& grad,
                                                                              const at::Tensor& mask,
                                                                              const at::Tensor& softmax_out,
                                                                              const at::Scalar& alpha, double prob,
                                                                              int64_t dim) {
  checkArguments(softmax_out, grad, prob, dim);
  return {at::empty(softmax_out.sizes(), softmax_out.options()), at::empty(softmax_out.sizes(), softmax_out.options())};
}

}  // namespace at_npu::native
