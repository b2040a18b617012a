// RmsNormKernelNpu.cpp - npu_rms_norm (+ backward), npu_gemma_rms_norm and npu_add_rms_norm on the
// aclnnRmsNorm / aclnnRmsNormGrad / aclnnGemmaRmsNorm / aclnnAddRmsNorm device ops; rstd is float32,
// x's shape with gamma's dimensions reduced to 1, as torch_npu returns it.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

std::vector<int64_t> rstdShape(const char* op, const at::Tensor& self, const at::Tensor& gamma) {
  TORCH_CHECK_VALUE(gamma.dim() >= 1 && gamma.dim() <= self.dim() &&
                        self.sizes().slice(self.dim() - gamma.dim()).equals(gamma.sizes()),
                    op, ": gamma's shape ", gamma.sizes(), " must equal the trailing dimensions of x ",
                    self.sizes());
  std::vector<int64_t> shape = self.sizes().vec();
  for (int64_t d = self.dim() - gamma.dim(); d < self.dim(); ++d) shape[d] = 1;
  return shape;
}

std::tuple<at::Tensor, at::Tensor> normOutputs(const char* op, const at::Tensor& self, const at::Tensor& gamma) {
  return {at::empty(self.sizes(), self.options()),
          at::empty(rstdShape(op, self, gamma), self.options().dtype(at::kFloat))};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_rms_norm(const at::Tensor& self, const at::Tensor& gamma, double epsilon) {
  auto [y, rstd] = normOutputs("npu_rms_norm", self, gamma);
  EXEC_NPU_CMD(aclnnRmsNorm, self, gamma, epsilon, y, rstd);
  return {y, rstd};
}

std::tuple<at::Tensor, at::Tensor> npu_rms_norm_meta(const at::Tensor& self, const at::Tensor& gamma,
                                                     double epsilon) {
  return normOutputs("npu_rms_norm", self, gamma);
}

std::tuple<at::Tensor, at::Tensor> npu_gemma_rms_norm(const at::Tensor& self, const at::Tensor& gamma,
                                                      double epsilon) {
  auto [y, rstd] = normOutputs("npu_gemma_rms_norm", self, gamma);
  EXEC_NPU_CMD(aclnnGemmaRmsNorm, self, gamma, epsilon, y, rstd);
  return {y, rstd};
}

std::tuple<at::Tensor, at::Tensor> npu_gemma_rms_norm_meta(const at::Tensor& self, const at::Tensor& gamma,
                                                           double epsilon) {
  return normOutputs("npu_gemma_rms_norm", self, gamma);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_add_rms_norm(const at::Tensor& x1, const at::Tensor& x2,
                                                                const at::Tensor& gamma, double epsilon) {
  TORCH_CHECK_VALUE(x1.sizes() == x2.sizes(), "npu_add_rms_norm: x1 and x2 must have one shape, got ", x1.sizes(),
                    " and ", x2.sizes());
  auto [y, rstd] = normOutputs("npu_add_rms_norm", x1, gamma);
  at::Tensor x = at::empty(x1.sizes(), x1.options());
  EXEC_NPU_CMD(aclnnAddRmsNorm, x1, x2, gamma, epsilon, y, rstd, x);
  return {y, rstd, x};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_add_rms_norm_meta(const at::Tensor& x1, const at::Tensor& x2,
                                                                     const at::Tensor& gamma, double epsilon) {
  TORCH_CHECK_VALUE(x1.sizes() == x2.sizes(), "npu_add_rms_norm: x1 and x2 must have one shape, got ", x1.sizes(),
                    " and ", x2.sizes());
  auto [y, rstd] = normOutputs("npu_add_rms_norm", x1, gamma);
  return {y, rstd, at::empty(x1.sizes(), x1.options())};
}

std::tuple<at::Tensor, at::Tensor> npu_rms_norm_backward(const at::Tensor& dy, const at::Tensor& self,
                                                         const at::Tensor& gamma, const at::Tensor& rstd) {
  rstdShape("npu_rms_norm_backward", self, gamma);
  at::Tensor dx = at::empty(self.sizes(), self.options());
  at::Tensor dgamma = at::empty(gamma.sizes(), gamma.options().dtype(at::kFloat));
  EXEC_NPU_CMD(aclnnRmsNormGrad, dy, self, rstd, gamma, dx, dgamma);
  return {dx, dgamma};
}

std::tuple<at::Tensor, at::Tensor> npu_rms_norm_backward_meta(const at::Tensor& dy, const at::Tensor& self,
                                                              const at::Tensor& gamma, const at::Tensor& rstd) {
  rstdShape("npu_rms_norm_backward", self, gamma);
  return {at::empty(self.sizes(), self.options()), at::empty(gamma.sizes(), gamma.options().dtype(at::kFloat))};
}

}  // namespace at_npu::native
