// DropoutKernelNpu.cpp - native_dropout and its backward on device ops; the mask is drawn from the
// npu generator (the op has no Generator argument) with one seed per launch.
#include <ATen/ops/empty.h>
#include <ATen/ops/ones_like.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/core/NPUGenerator.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  c10::DeviceGuard guard(input.device());
  if (!train.value_or(true) || input.numel() == 0) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  if (!deviceOpsSupport({input}) || !at::isFloatingType(input.scalar_type())) {
    auto r = runGeneric("aten::native_dropout", "", input, p, train);
    return {r[0].toTensor(), r[1].toTensor()};
  }
  at::Tensor out = at::empty(input.sizes(), input.options());
  at::Tensor mask = at::empty(input.sizes(), input.options().dtype(at::kBool));
  const auto seed = static_cast<int64_t>(c10_npu::launchSeedFor(std::nullopt, input.device().index()));
  EXEC_NPU_CMD(aclnnDropout, input, p, seed, int64_t{0}, out, mask);
  return {out, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad_output, const at::Tensor& mask,
                                   double scale) {
  if (!deviceOpsSupport({grad_output, mask}) || mask.device() != grad_output.device() ||
      mask.scalar_type() != at::kBool) {
    return runGeneric("aten::native_dropout_backward", "", grad_output, mask, scale)[0].toTensor();
  }
  c10::DeviceGuard guard(grad_output.device());
  at::Tensor grad_input = at::empty(grad_output.sizes(), grad_output.options());
  EXEC_NPU_CMD(aclnnDropoutBackward, grad_output, mask, scale, grad_input);
  return grad_input;
}

}  // namespace at_npu::native
