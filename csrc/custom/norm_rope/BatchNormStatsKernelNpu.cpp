// BatchNormStatsKernelNpu.cpp - torch_npu's SyncBatchNorm statistics: batch_norm_reduce (per-channel sum and
// square sum of one device's batch, on aclnnBatchNormReduce) and batch_norm_gather_stats_update (global mean /
// invstd from every device's sums and counts, moving the running statistics, on aclnnSyncBatchNormGatherStats).
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool isNormType(at::ScalarType type) {
  return type == at::kFloat || type == at::kHalf || type == at::kBFloat16;
}

// The channel count: dim 1 of (N, C, ...). torch_npu raises a RuntimeError naming the "dim input tensor" (its
// tests match that text), so this check keeps TORCH_CHECK rather than a ValueError.
int64_t channelsOf(const char* op, const at::Tensor& input) {
  TORCH_CHECK(input.dim() > 1, op, ": expected input of 2 or more dims (N, C, ...), got a ", input.dim(),
              "-dim input tensor");
  return input.size(1);
}

std::tuple<at::Tensor, at::Tensor> reduceOutputs(const at::Tensor& input) {
  TORCH_CHECK_TYPE(isNormType(input.scalar_type()),
                   "batch_norm_reduce: input must be float32, float16 or bfloat16, got ", input.scalar_type());
  const int64_t channels = channelsOf("batch_norm_reduce", input);
  const at::TensorOptions stats = input.options().dtype(at::kFloat);
  return {at::empty({channels}, stats), at::empty({channels}, stats)};
}

// sum / square_sum: (world_size, C) (or (C,) for one device), counts: one per row; running statistics: (C,).
int64_t checkGather(const at::Tensor& input, const at::Tensor& sum, const at::Tensor& square_sum,
                    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
                    const at::Tensor& counts) {
  const char* op = "batch_norm_gather_stats_update";
  const int64_t channels = channelsOf(op, input);
  TORCH_CHECK_TYPE(isNormType(sum.scalar_type()) && square_sum.scalar_type() == sum.scalar_type(), op,
                   ": the sums (mean) and square sums (invstd) must share one dtype of float32, float16 or bfloat16, ",
                   "got ", sum.scalar_type(), " and ", square_sum.scalar_type());
  TORCH_CHECK_VALUE((sum.dim() == 1 || sum.dim() == 2) && sum.size(-1) == channels &&
                        square_sum.sizes() == sum.sizes(),
                    op, ": the sums (mean) and square sums (invstd) must be (world_size, ", channels,
                    ") like input's channels, got ", sum.sizes(), " and ", square_sum.sizes());
  const int64_t world = sum.dim() == 2 ? sum.size(0) : 1;
  TORCH_CHECK_VALUE(counts.numel() == world, op, ": counts must hold one count per device (", world, "), got ",
                    counts.sizes());
  const bool has_mean = running_mean.has_value() && running_mean->defined();
  const bool has_var = running_var.has_value() && running_var->defined();
  TORCH_CHECK_VALUE(has_mean == has_var, op, ": give both running_mean and running_var, or neither");
  if (has_mean) {
    TORCH_CHECK_VALUE(running_mean->numel() == channels && running_var->numel() == channels, op,
                      ": running_mean and running_var must hold ", channels, " values, got ", running_mean->sizes(),
                      " and ", running_var->sizes());
    TORCH_CHECK_TYPE(isNormType(running_mean->scalar_type()) && isNormType(running_var->scalar_type()), op,
                     ": running_mean and running_var must be floating point, got ", running_mean->scalar_type(),
                     " and ", running_var->scalar_type());
  }
  return channels;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> batch_norm_reduce(const at::Tensor& input, double eps) {
  // eps is kept for torch_npu's signature; sums do not use it.
  auto [sum, square_sum] = reduceOutputs(input);
  EXEC_NPU_CMD(aclnnBatchNormReduce, input, sum, square_sum);
  return {sum, square_sum};
}

std::tuple<at::Tensor, at::Tensor> batch_norm_reduce_meta(const at::Tensor& input, double eps) {
  return reduceOutputs(input);
}

std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats_update(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, double momentum,
    double eps, const at::Tensor& counts) {
  // torch_npu names the inputs mean / invstd, but they are every device's per-channel sums and square sums
  // (batch_norm_reduce's outputs, gathered). The running statistics are updated in place, as torch_npu does.
  const int64_t channels = checkGather(input, mean, invstd, running_mean, running_var, counts);
  at::Tensor batch_mean = at::empty({channels}, mean.options());
  at::Tensor batch_invstd = at::empty({channels}, mean.options());
  EXEC_NPU_CMD(aclnnSyncBatchNormGatherStats, mean, invstd, counts, running_mean, running_var, momentum, eps,
               batch_mean, batch_invstd);
  return {batch_mean, batch_invstd};
}

std::tuple<at::Tensor, at::Tensor> batch_norm_gather_stats_update_meta(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, double momentum,
    double eps, const at::Tensor& counts) {
  const int64_t channels = checkGather(input, mean, invstd, running_mean, running_var, counts);
  return {at::empty({channels}, mean.options()), at::empty({channels}, mean.options())};
}

}  // namespace at_npu::native
