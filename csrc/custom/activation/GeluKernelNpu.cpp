// GeluKernelNpu.cpp - npu_gelu (torch_npu.npu_gelu): GELU, exact ("none") or tanh-approximated ("tanh"), on
// the aclnnGelu device op; the worked example of docs/op_development.md.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

at::Tensor npu_gelu(const at::Tensor& self, c10::string_view approximate) {
  TORCH_CHECK_VALUE(approximate == "none" || approximate == "tanh",
                    "npu_gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  at::Tensor out = at::empty(self.sizes(), self.options());
  const int64_t mode = approximate == "tanh" ? 1 : 0;
  EXEC_NPU_CMD(aclnnGelu, self, mode, out);
  return out;
}

at::Tensor npu_gelu_meta(const at::Tensor& self, c10::string_view approximate) {
  TORCH_CHECK_VALUE(approximate == "none" || approximate == "tanh",
                    "npu_gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  return at::empty(self.sizes(), self.options());
}

}  // namespace at_npu::native

namespace at_npu::native {

at::Tensor npu_gelu_backward(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  TORCH_CHECK_VALUE(approximate == "none" || approximate == "tanh",
                    "npu_gelu_backward: approximate must be 'none' or 'tanh', got '", approximate, "'");
  TORCH_CHECK_VALUE(grad_output.sizes() == self.sizes(), "npu_gelu_backward: grad_output ", grad_output.sizes(),
                    " must have self's shape ", self.sizes());
  at::Tensor grad_input = at::empty(self.sizes(), self.options());
  const int64_t mode = approximate == "tanh" ? 1 : 0;
  EXEC_NPU_CMD(aclnnGeluBackward, grad_output, self, mode, grad_input);
  return grad_input;
}

at::Tensor npu_gelu_backward_meta(const at::Tensor& grad_output, const at::Tensor& self,
                                  c10::string_view approximate) {
  return at::empty(self.sizes(), self.options());
}

}  // namespace at_npu::native
