// BatchNormKernelNpu.cpp - native_batch_norm on the host. Its schema does not mark running_mean /
// running_var as mutated, so the generic CPU fallback would drop the running-stat update.
#include "csrc/aten/NpuNativeFunctions.h"

#include <ATen/ops/native_batch_norm.h>

namespace at_npu::native {
namespace {

std::optional<at::Tensor> toHost(const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return t->cpu();
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  std::optional<at::Tensor> mean = toHost(running_mean), var = toHost(running_var);
  auto [out, save_mean, save_invstd] = at::native_batch_norm(
      input.cpu(), toHost(weight), toHost(bias), mean, var, training, momentum, eps);
  if (training) {
    if (mean) running_mean->copy_(*mean);
    if (var) running_var->copy_(*var);
  }
  const auto device = input.device();
  return {out.to(device), save_mean.to(device), save_invstd.to(device)};
}

}  // namespace at_npu::native
