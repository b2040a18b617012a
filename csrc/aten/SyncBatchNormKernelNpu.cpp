// SyncBatchNormKernelNpu.cpp - the batch-norm pieces nn.SyncBatchNorm calls on accelerators
// (per-device statistics, gathering them across devices, the elementwise transform and the two
// backward steps), composed of device ops. Statistics are float32 for float16 / bfloat16 inputs.
#include <ATen/TensorOperators.h>
#include <ATen/ops/_to_copy.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/var_mean.h>

#include "csrc/aten/NpuNativeFunctions.h"

namespace at_npu::native {
namespace {

at::ScalarType statsType(const at::Tensor& input) {
  return input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16 ? at::kFloat
                                                                                  : input.scalar_type();
}

// Every dim but the channel dim 1.
std::vector<int64_t> reduceDims(const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 2, "batch norm: expected an input with a channel dim (2-D or more), got ",
              input.dim(), "-D");
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel vector shaped to broadcast against `input` (C -> [1, C, 1, ...]).
at::Tensor perChannel(const at::Tensor& v, const at::Tensor& input) {
  std::vector<int64_t> shape(input.dim(), 1);
  shape[1] = input.size(1);
  return v.reshape(shape);
}

at::Tensor wide(const at::Tensor& t, at::ScalarType type) {
  return t.scalar_type() == type ? t : at::_to_copy(t, type);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> batch_norm_stats(const at::Tensor& input, double eps) {
  auto [var, mean] = at::var_mean(wide(input, statsType(input)), reduceDims(input), 0, false);
  return {mean, at::rsqrt(var + eps)};
}

at::Tensor batch_norm_elemt(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias, const at::Tensor& mean,
                            const at::Tensor& invstd, double eps) {
  const at::ScalarType stats = statsType(input);
  at::Tensor y = (wide(input, stats) - perChannel(mean, input)) * perChannel(invstd, input);
  if (weight.has_value() && weight->defined()) y = y * perChannel(*weight, input);
  if (bias.has_value() && bias->defined()) y = y + perChannel(*bias, input);
  return wide(y, input.scalar_type());
}

at::Tensor& batch_norm_elemt_out(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                 const std::optional<at::Tensor>& bias, const at::Tensor& mean,
                                 const at::Tensor& invstd, double eps, at::Tensor& out) {
  at::Tensor y = at_npu::native::batch_norm_elemt(input, weight, bias, mean, invstd, eps);
  out.resize_(y.sizes());
  return out.copy_(y);
}

std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats_with_counts(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    double momentum, double eps, const at::Tensor& counts) {
  TORCH_CHECK(mean.dim() == 2 && invstd.sizes() == mean.sizes() && counts.numel() == mean.size(0),
              "batch_norm_gather_stats: expected mean and invstd of shape (world_size, channels) and ",
              "one count per row, got ", mean.sizes(), ", ", invstd.sizes(), " and ", counts.sizes());
  const at::ScalarType stats = mean.scalar_type() == at::kHalf || mean.scalar_type() == at::kBFloat16
                                   ? at::kFloat
                                   : mean.scalar_type();
  at::Tensor m = wide(mean, stats), is = wide(invstd, stats);
  at::Tensor n = wide(counts, stats).reshape({-1, 1});
  at::Tensor total = n.sum();
  at::Tensor global_mean = (m * n).sum(0) / total;
  // Each device's biased variance, back from its invstd, plus its mean's distance to the global one.
  at::Tensor var = 1 / (is * is) - eps;
  at::Tensor dev = m - global_mean;
  at::Tensor var_sum = ((var + dev * dev) * n).sum(0);
  at::Tensor global_invstd = at::rsqrt(var_sum / total + eps);
  if (running_mean.has_value() && running_mean->defined()) {
    at::Tensor rm = *running_mean;
    rm.copy_(rm * (1 - momentum) + global_mean * momentum);
  }
  if (running_var.has_value() && running_var->defined()) {
    at::Tensor rv = *running_var;
    rv.copy_(rv * (1 - momentum) + var_sum / (total - 1) * momentum);
  }
  return {global_mean.to(mean.scalar_type()), global_invstd.to(mean.scalar_type())};
}

std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    double momentum, double eps, int64_t count) {
  at::Tensor counts = at::full({mean.size(0)}, static_cast<double>(count), mean.options());
  return at_npu::native::batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean,
                                                             running_var, momentum, eps, counts);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_reduce(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight, bool input_g, bool weight_g,
    bool bias_g) {
  const at::ScalarType stats = statsType(input);
  const auto dims = reduceDims(input);
  at::Tensor g = wide(grad_out, stats);
  at::Tensor sum_dy = g.sum(dims);
  at::Tensor sum_dy_xmu = (g * (wide(input, stats) - perChannel(mean, input))).sum(dims);
  const at::ScalarType param = weight.has_value() && weight->defined() ? weight->scalar_type() : stats;
  at::Tensor grad_weight = weight_g ? wide(sum_dy_xmu * invstd, param) : at::Tensor();
  at::Tensor grad_bias = bias_g ? wide(sum_dy, param) : at::Tensor();
  if (!input_g) return {at::Tensor(), at::Tensor(), grad_weight, grad_bias};
  return {sum_dy, sum_dy_xmu, grad_weight, grad_bias};
}

at::Tensor batch_norm_backward_elemt(const at::Tensor& grad_out, const at::Tensor& input,
                                     const at::Tensor& mean, const at::Tensor& invstd,
                                     const std::optional<at::Tensor>& weight, const at::Tensor& sum_dy,
                                     const at::Tensor& sum_dy_xmu, const at::Tensor& count) {
  const at::ScalarType stats = statsType(input);
  at::Tensor total = wide(count, stats).sum();
  at::Tensor mean_dy = perChannel(sum_dy, input) / total;
  at::Tensor mean_dy_xmu = perChannel(sum_dy_xmu, input) / total;
  at::Tensor is = perChannel(invstd, input);
  at::Tensor xmu = wide(input, stats) - perChannel(mean, input);
  at::Tensor gi = (wide(grad_out, stats) - mean_dy - xmu * is * is * mean_dy_xmu) * is;
  if (weight.has_value() && weight->defined()) gi = gi * perChannel(*weight, input);
  return wide(gi, input.scalar_type());
}

}  // namespace at_npu::native
