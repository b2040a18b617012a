// ActivationKernelNpu.cpp - gelu and silu (forward and backward) and the backward kernels of relu
// (threshold_backward), sigmoid and tanh, on device ops.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>

#include "csrc/framework/FormatCast.h"

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool floatingOnDevice(TensorRefs tensors, const at::Tensor& out) {
  if (!deviceOpsSupport(tensors)) return false;
  for (const at::Tensor& t : tensors) {
    if (t.device() != out.device() || t.scalar_type() != out.scalar_type() ||
        !at::isFloatingType(t.scalar_type())) {
      return false;
    }
  }
  return true;
}

// 0 = exact, 1 = tanh approximation; anything else goes to the generic path for PyTorch's error.
int64_t geluMode(c10::string_view approximate) {
  if (approximate == "none") return 0;
  if (approximate == "tanh") return 1;
  return -1;
}

}  // namespace

at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out) {
  const int64_t mode = geluMode(approximate);
  if (!floatingOnDevice({self}, out) || mode < 0) {
    runGeneric("aten::gelu", "out", self, approximate, out);
    return out;
  }
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, self.sizes());
  adoptInputFormat(out, self);
  EXEC_NPU_CMD(aclnnGelu, self, mode, out);
  return out;
}

at::Tensor& gelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                              c10::string_view approximate, at::Tensor& grad_input) {
  const int64_t mode = geluMode(approximate);
  if (!floatingOnDevice({grad_output, self}, grad_input) || mode < 0) {
    runGeneric("aten::gelu_backward", "grad_input", grad_output, self, approximate, grad_input);
    return grad_input;
  }
  c10::DeviceGuard guard(grad_input.device());
  at::native::resize_output(grad_input, self.sizes());
  adoptInputFormat(grad_input, grad_output, self);
  EXEC_NPU_CMD(aclnnGeluBackward, grad_output, self, mode, grad_input);
  return grad_input;
}

at::Tensor& silu_out(const at::Tensor& self, at::Tensor& out) {
  if (!floatingOnDevice({self}, out)) {
    runGeneric("aten::silu", "out", self, out);
    return out;
  }
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, self.sizes());
  adoptInputFormat(out, self);
  EXEC_NPU_CMD(aclnnSilu, self, out);
  return out;
}

#define NPU_ACTIVATION_BACKWARD(fn, Name)                                                        \
  at::Tensor& fn##_out(const at::Tensor& grad_output, const at::Tensor& x, at::Tensor& grad_input) { \
    if (!floatingOnDevice({grad_output, x}, grad_input)) {                                       \
      runGeneric("aten::" #fn, "grad_input", grad_output, x, grad_input);                        \
      return grad_input;                                                                         \
    }                                                                                            \
    c10::DeviceGuard guard(grad_input.device());                                                 \
    at::native::resize_output(grad_input, at::infer_size(grad_output.sizes(), x.sizes()));       \
    adoptInputFormat(grad_input, grad_output, x);                                              \
    EXEC_NPU_CMD(aclnn##Name, grad_output, x, grad_input);                                       \
    return grad_input;                                                                           \
  }

NPU_ACTIVATION_BACKWARD(silu_backward, SiluBackward)
NPU_ACTIVATION_BACKWARD(sigmoid_backward, SigmoidBackward)
NPU_ACTIVATION_BACKWARD(tanh_backward, TanhBackward)
#undef NPU_ACTIVATION_BACKWARD

// silu_backward also has a CompositeImplicitAutograd decomposition; registering the functional
// form keeps it one device op.
at::Tensor silu_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return silu_backward_out(grad_output, self, grad_input);
}

at::Tensor& threshold_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                   const at::Scalar& threshold, at::Tensor& grad_input) {
  if (!floatingOnDevice({grad_output, self}, grad_input) || threshold.isComplex()) {
    runGeneric("aten::threshold_backward", "grad_input", grad_output, self, threshold, grad_input);
    return grad_input;
  }
  c10::DeviceGuard guard(grad_input.device());
  at::native::resize_output(grad_input, at::infer_size(grad_output.sizes(), self.sizes()));
  adoptInputFormat(grad_input, grad_output, self);
  EXEC_NPU_CMD(aclnnThresholdBackward, grad_output, self, threshold, grad_input);
  return grad_input;
}

}  // namespace at_npu::native
