// SwigluKernelNpu.cpp - the gated and fast activations: npu_swiglu (silu(a) * b of x's two halves along dim)
// on aclnnSwiGlu / aclnnSwiGluGrad, npu_geglu (gelu of one half times the other) on aclnnGeGluV3(Backward),
// and npu_fast_gelu on aclnnFastGelu / aclnnFastGeluBackward.
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

// The output shape of a SwiGLU: x's with dimension `dim` halved.
std::vector<int64_t> halvedShape(const at::Tensor& self, int64_t dim) {
  const int64_t d = dim < 0 ? dim + self.dim() : dim;
  TORCH_CHECK_VALUE(d >= 0 && d < self.dim(), "npu_swiglu / npu_geglu: dim ", dim, " is out of range for a ", self.dim(),
                    "-D input");
  TORCH_CHECK_VALUE(self.size(d) % 2 == 0, "npu_swiglu / npu_geglu: dimension ", dim, " (size ", self.size(d),
                    ") must split into two equal halves");
  std::vector<int64_t> shape = self.sizes().vec();
  shape[d] /= 2;
  return shape;
}

}  // namespace

at::Tensor npu_swiglu(const at::Tensor& self, int64_t dim) {
  at::Tensor out = at::empty(halvedShape(self, dim), self.options());
  EXEC_NPU_CMD(aclnnSwiGlu, self, dim, out);
  return out;
}

at::Tensor npu_swiglu_meta(const at::Tensor& self, int64_t dim) {
  return at::empty(halvedShape(self, dim), self.options());
}

at::Tensor npu_swiglu_backward(const at::Tensor& grad_output, const at::Tensor& self, int64_t dim) {
  TORCH_CHECK_VALUE(grad_output.sizes().vec() == halvedShape(self, dim), "npu_swiglu_backward: grad_output ",
                    grad_output.sizes(), " must have the output's shape");
  at::Tensor grad_input = at::empty(self.sizes(), self.options());
  EXEC_NPU_CMD(aclnnSwiGluGrad, grad_output, self, dim, grad_input);
  return grad_input;
}

at::Tensor npu_swiglu_backward_meta(const at::Tensor& grad_output, const at::Tensor& self, int64_t dim) {
  halvedShape(self, dim);
  return at::empty(self.sizes(), self.options());
}

at::Tensor npu_fast_gelu(const at::Tensor& self) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  EXEC_NPU_CMD(aclnnFastGelu, self, out);
  return out;
}

at::Tensor npu_fast_gelu_meta(const at::Tensor& self) { return at::empty(self.sizes(), self.options()); }

at::Tensor npu_fast_gelu_backward(const at::Tensor& grad, const at::Tensor& self) {
  TORCH_CHECK_VALUE(grad.sizes() == self.sizes(), "npu_fast_gelu_backward: grad ", grad.sizes(),
                    " must have self's shape ", self.sizes());
  at::Tensor grad_input = at::empty(self.sizes(), self.options());
  EXEC_NPU_CMD(aclnnFastGeluBackward, grad, self, grad_input);
  return grad_input;
}

at::Tensor npu_fast_gelu_backward_meta(const at::Tensor& grad, const at::Tensor& self) {
  return at::empty(self.sizes(), self.options());
}

std::tuple<at::Tensor, at::Tensor> npu_geglu(const at::Tensor& self, int64_t dim, int64_t approximate,
                                             bool activate_left) {
  const auto shape = halvedShape(self, dim);
  at::Tensor out = at::empty(shape, self.options()), gelu = at::empty(shape, self.options());
  EXEC_NPU_CMD(aclnnGeGluV3, self, dim, approximate, activate_left, out, gelu);
  return {out, gelu};
}

std::tuple<at::Tensor, at::Tensor> npu_geglu_meta(const at::Tensor& self, int64_t dim, int64_t approximate,
                                                  bool activate_left) {
  const auto shape = halvedShape(self, dim);
  return {at::empty(shape, self.options()), at::empty(shape, self.options())};
}

at::Tensor npu_geglu_grad(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& gelu, int64_t dim,
                          int64_t approximate, bool activate_left) {
  halvedShape(self, dim);
  at::Tensor grad_input = at::empty(self.sizes(), self.options());
  EXEC_NPU_CMD(aclnnGeGluV3Backward, grad_output, self, gelu, dim, approximate, activate_left, grad_input);
  return grad_input;
}

at::Tensor npu_geglu_grad_meta(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& gelu,
                               int64_t dim, int64_t approximate, bool activate_left) {
  halvedShape(self, dim);
  return at::empty(self.sizes(), self.options());
}

}  // namespace at_npu::native
