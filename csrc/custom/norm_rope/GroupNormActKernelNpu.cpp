// GroupNormActKernelNpu.cpp - group norm fused with its activation: npu_group_norm_silu on aclnnGroupNormSilu, and
// npu_group_norm_swish (+ its gradient npu_group_norm_swish_grad) on aclnnGroupNormSwish(Grad). Groups split
// dimension 1 (channels) of an [N, C, ...] input; mean and rstd are [N, groups].
#include <ATen/ops/empty.h>

#include <array>
#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

const std::string kChannelsFirst = "NCHW";  // torch_npu's only layout: channels in dimension 1

void checkGroupNorm(const char* op, const at::Tensor& input, int64_t groups, const std::optional<at::Tensor>& weight,
                    const std::optional<at::Tensor>& bias) {
  TORCH_CHECK_TYPE(at::isFloatingType(input.scalar_type()), op, ": input must be a floating-point tensor, got ",
                   input.scalar_type());
  TORCH_CHECK_VALUE(input.dim() >= 2 && input.dim() <= 8, op, ": input must be [N, C, ...] with 2 to 8 dimensions, ",
                    "got ", input.sizes());
  TORCH_CHECK_VALUE(groups > 0, op, ": the number of groups must be positive, got ", groups);
  TORCH_CHECK_VALUE(input.size(1) % groups == 0, op, ": the channel count ", input.size(1), " (dimension 1) must ",
                    "split into ", groups, " equal groups");
  for (const auto* param : {&weight, &bias}) {
    if (!param->has_value() || !(*param)->defined()) continue;
    TORCH_CHECK_VALUE((*param)->dim() == 1 && (*param)->size(0) == input.size(1), op,
                      ": weight and bias must be 1-D with one value per channel (", input.size(1), "), got ",
                      (*param)->sizes());
  }
}

using Three = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// out like input; mean / rstd [N, groups] of `stat_type`.
Three groupNormOutputs(const at::Tensor& input, int64_t groups, at::ScalarType stat_type) {
  const auto stats = input.options().dtype(stat_type);
  return {at::empty(input.sizes(), input.options()), at::empty({input.size(0), groups}, stats),
          at::empty({input.size(0), groups}, stats)};
}

Three groupNormSiluOutputs(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                           const std::optional<at::Tensor>& bias, int64_t group) {
  checkGroupNorm("npu_group_norm_silu", input, group, weight, bias);
  return groupNormOutputs(input, group, input.scalar_type());
}

Three groupNormSwishOutputs(const at::Tensor& input, int64_t num_groups, const at::Tensor& weight,
                            const at::Tensor& bias) {
  checkGroupNorm("npu_group_norm_swish", input, num_groups, weight, bias);
  return groupNormOutputs(input, num_groups, weight.scalar_type());
}

Three groupNormSwishGradOutputs(const at::Tensor& grad, const at::Tensor& input, int64_t num_groups,
                                const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& mean,
                                const at::Tensor& rstd) {
  const char* op = "npu_group_norm_swish_grad";
  checkGroupNorm(op, input, num_groups, weight, bias);
  TORCH_CHECK_VALUE(grad.sizes().equals(input.sizes()), op, ": grad must have input's shape ", input.sizes(),
                    ", got ", grad.sizes());
  for (const at::Tensor* stat : {&mean, &rstd}) {
    TORCH_CHECK_VALUE(stat->numel() == input.size(0) * num_groups, op, ": mean and rstd must be [N, num_groups] = [",
                      input.size(0), ", ", num_groups, "], got ", stat->sizes());
  }
  return {at::empty(input.sizes(), input.options()), at::empty(weight.sizes(), weight.options()),
          at::empty(bias.sizes(), bias.options())};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_group_norm_silu(const at::Tensor& input,
                                                                   const std::optional<at::Tensor>& weight,
                                                                   const std::optional<at::Tensor>& bias,
                                                                   int64_t group, double eps) {
  auto [out, mean, rstd] = groupNormSiluOutputs(input, weight, bias, group);
  EXEC_NPU_CMD(aclnnGroupNormSilu, input, weight, bias, group, eps, out, mean, rstd);
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_group_norm_silu_meta(const at::Tensor& input,
                                                                        const std::optional<at::Tensor>& weight,
                                                                        const std::optional<at::Tensor>& bias,
                                                                        int64_t group, double eps) {
  return groupNormSiluOutputs(input, weight, bias, group);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_group_norm_swish(const at::Tensor& input, int64_t num_groups,
                                                                    const at::Tensor& weight, const at::Tensor& bias,
                                                                    std::optional<double> eps,
                                                                    std::optional<double> swish_scale) {
  auto [out, mean, rstd] = groupNormSwishOutputs(input, num_groups, weight, bias);
  const double eps_value = eps.value_or(1e-5), scale = swish_scale.value_or(1.0);
  const bool activate_swish = true;
  EXEC_NPU_CMD(aclnnGroupNormSwish, input, weight, bias, num_groups, kChannelsFirst, eps_value, activate_swish, scale,
               out, mean, rstd);
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_group_norm_swish_meta(const at::Tensor& input, int64_t num_groups,
                                                                         const at::Tensor& weight,
                                                                         const at::Tensor& bias,
                                                                         std::optional<double> eps,
                                                                         std::optional<double> swish_scale) {
  return groupNormSwishOutputs(input, num_groups, weight, bias);
}

// (dx, dweight, dbias); grad_input_mask[1] / [2] say whether dweight / dbias are wanted (zeros otherwise).
std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_group_norm_swish_grad(
    const at::Tensor& grad, const at::Tensor& input, int64_t num_groups, const at::Tensor& weight,
    const at::Tensor& bias, const at::Tensor& mean, const at::Tensor& rstd, std::array<bool, 3> grad_input_mask,
    std::optional<double> swish_scale) {
  auto [dx, dweight, dbias] = groupNormSwishGradOutputs(grad, input, num_groups, weight, bias, mean, rstd);
  const double scale = swish_scale.value_or(1.0);
  const bool want_dweight = grad_input_mask[1], want_dbias = grad_input_mask[2];
  EXEC_NPU_CMD(aclnnGroupNormSwishGrad, grad, mean, rstd, input, weight, bias, num_groups, kChannelsFirst, scale,
               want_dweight, want_dbias, dx, dweight, dbias);
  return {dx, dweight, dbias};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_group_norm_swish_grad_meta(
    const at::Tensor& grad, const at::Tensor& input, int64_t num_groups, const at::Tensor& weight,
    const at::Tensor& bias, const at::Tensor& mean, const at::Tensor& rstd, std::array<bool, 3> grad_input_mask,
    std::optional<double> swish_scale) {
  return groupNormSwishGradOutputs(grad, input, num_groups, weight, bias, mean, rstd);
}

}  // namespace at_npu::native
