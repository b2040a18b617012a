// SoftmaxLossKernelNpu.cpp - softmax / log_softmax, nll_loss and mse_loss (forward and backward)
// on device ops; cross_entropy reaches them through log_softmax + nll_loss.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <c10/core/WrapDimMinimal.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
#define NPU_SOFTMAX_KERNELS(fn, Name)                                                              \
  at::Tensor& fn##_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) { \
    const at::ScalarType expected = half_to_float ? at::kFloat : self.scalar_type();               \
    if (!onDevice({self, out}, out.device(), /*floating_only=*/true) || out.scalar_type() != expected) {           \
      runGeneric("aten::" #fn, "out", self, dim, half_to_float, out);                              \
      return out;                                                                                  \
    }                                                                                              \
    const int64_t d = c10::maybe_wrap_dim(dim, self.dim());                                        \
    c10::DeviceGuard guard(out.device());                                                          \
    at::native::resize_output(out, self.sizes());                                                  \
    /* half_to_float: the float16 input computes in float32 */                                     \
    const at::Tensor in = self.scalar_type() == expected ? self : self.to(expected);               \
    EXEC_NPU_CMD(aclnn##Name, in, d, out);                                                         \
    return out;                                                                                    \
  }                                                                                                \
  at::Tensor& fn##_backward_data_out(const at::Tensor& grad_output, const at::Tensor& output,      \
                                     int64_t dim, at::ScalarType input_dtype,                      \
                                     at::Tensor& grad_input) {                                     \
    if (!onDevice({grad_output, output, grad_input}, grad_input.device(), /*floating_only=*/true)) {               \
      runGeneric("aten::" #fn "_backward_data", "out", grad_output, output, dim, input_dtype,      \
                 grad_input);                                                                      \
      return grad_input;                                                                           \
    }                                                                                              \
    const int64_t d = c10::maybe_wrap_dim(dim, output.dim());                                      \
    c10::DeviceGuard guard(grad_input.device());                                                   \
    at::native::resize_output(grad_input, output.sizes());                                         \
    if (grad_input.scalar_type() != grad_output.scalar_type()) {                                   \
      /* backward of a half_to_float softmax: computed in the gradient's type, then cast */       \
      at::Tensor wide = at::empty(output.sizes(), grad_output.options());                         \
      EXEC_NPU_CMD(aclnn##Name##Backward, grad_output, output, d,                                  \
                   aclType(grad_output.scalar_type()), wide);                                      \
      grad_input.copy_(wide);                                                                      \
      return grad_input;                                                                           \
    }                                                                                              \
    EXEC_NPU_CMD(aclnn##Name##Backward, grad_output, output, d, aclType(input_dtype), grad_input); \
    return grad_input;                                                                             \
  }

NPU_SOFTMAX_KERNELS(_softmax, Softmax)
NPU_SOFTMAX_KERNELS(_log_softmax, LogSoftmax)
#undef NPU_SOFTMAX_KERNELS

std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(const at::Tensor& self,
                                                          const at::Tensor& target,
                                                          const std::optional<at::Tensor>& weight,
                                                          int64_t reduction, int64_t ignore_index,
                                                          at::Tensor& output,
                                                          at::Tensor& total_weight) {
  const at::Tensor w = weight.value_or(at::Tensor());
  const bool ok = onDevice({self, w, output, total_weight}, output.device(), /*floating_only=*/true) &&
                  target.device() == output.device() && target.scalar_type() == at::kLong &&
                  (self.dim() == 1 || self.dim() == 2);
  if (!ok) {
    runGeneric("aten::nll_loss_forward", "output", self, target, weight, reduction, ignore_index,
               output, total_weight);
    return {output, total_weight};
  }
  TORCH_CHECK(self.dim() == 1 ? target.dim() == 0 : (target.dim() == 1 && target.size(0) == self.size(0)),
              "nll_loss: expected target of shape [", self.dim() == 2 ? self.size(0) : 0,
              "] for input of shape ", self.sizes(), ", got ", target.sizes());
  c10::DeviceGuard guard(output.device());
  if (reduction == at::Reduction::None && self.dim() == 2) {
    at::native::resize_output(output, {self.size(0)});
  } else {
    at::native::resize_output(output, {});
  }
  at::native::resize_output(total_weight, {});
  EXEC_NPU_CMD(aclnnNLLLoss, self, target, w, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

at::Tensor& nll_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                  const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                  int64_t reduction, int64_t ignore_index,
                                  const at::Tensor& total_weight, at::Tensor& grad_input) {
  const at::Tensor w = weight.value_or(at::Tensor());
  const bool ok = onDevice({grad_output, self, w, total_weight, grad_input}, grad_input.device(), /*floating_only=*/true) &&
                  target.device() == grad_input.device() && target.scalar_type() == at::kLong;
  if (!ok) {
    runGeneric("aten::nll_loss_backward", "grad_input", grad_output, self, target, weight,
               reduction, ignore_index, total_weight, grad_input);
    return grad_input;
  }
  c10::DeviceGuard guard(grad_input.device());
  at::native::resize_output(grad_input, self.sizes());
  EXEC_NPU_CMD(aclnnNLLLossBackward, grad_output, self, target, w, reduction, ignore_index,
               total_weight, grad_input);
  return grad_input;
}

at::Tensor& mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                         at::Tensor& out) {
  if (!onDevice({self, target, out}, out.device(), /*floating_only=*/true)) {
    runGeneric("aten::mse_loss", "out", self, target, reduction, out);
    return out;
  }
  const auto shape = at::infer_size(self.sizes(), target.sizes());
  c10::DeviceGuard guard(out.device());
  if (reduction == at::Reduction::None) {
    at::native::resize_output(out, shape);
  } else {
    at::native::resize_output(out, {});
  }
  EXEC_NPU_CMD(aclnnMseLoss, self, target, reduction, out);
  return out;
}

at::Tensor& mse_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                  const at::Tensor& target, int64_t reduction,
                                  at::Tensor& grad_input) {
  if (!onDevice({grad_output, self, target, grad_input}, grad_input.device(), /*floating_only=*/true)) {
    runGeneric("aten::mse_loss_backward", "grad_input", grad_output, self, target, reduction,
               grad_input);
    return grad_input;
  }
  c10::DeviceGuard guard(grad_input.device());
  at::native::resize_output(grad_input, self.sizes());
  EXEC_NPU_CMD(aclnnMseLossBackward, grad_output, self, target, reduction, grad_input);
  return grad_input;
}

at::Tensor mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                             const at::Tensor& target, int64_t reduction) {
  at::Tensor grad_input = at::empty({0}, self.options());
  return mse_loss_backward_out(grad_output, self, target, reduction, grad_input);
}

}  // namespace at_npu::native
