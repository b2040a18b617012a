// RenormKernelNpu.cpp - npu_renorm_backward: the gradient of torch.renorm (sub-tensors along `dim` whose
// p-norm exceeds maxnorm are scaled down to it), the derivative of the same composition.
#include <ATen/ops/renorm.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/CustomOpUtils.h"

namespace at_npu::native {

at::Tensor npu_renorm_backward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& p, int64_t dim,
                               const at::Scalar& maxnorm) {
  TORCH_CHECK_VALUE(grad.sizes().equals(self.sizes()), "npu_renorm_backward: grad ", grad.sizes(),
                    " must have the input's shape ", self.sizes());
  auto grads = custom::compositeGrads(
      [&](const std::vector<at::Tensor>& in) { return std::vector<at::Tensor>{at::renorm(in[0], p, dim, maxnorm)}; },
      {self}, {grad});
  return grads[0];
}

}  // namespace at_npu::native
