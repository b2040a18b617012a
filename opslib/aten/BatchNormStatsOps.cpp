// BatchNormStatsOps.cpp - SyncBatchNorm statistics: BatchNormReduce (per-channel sum and square sum over every
// dim but 1, in float32) and SyncBatchNormGatherStats (global mean and invstd from every device's sums and
// sample counts; the running mean / variance, when given, move towards them by `momentum`, with the biased
// variance as torch_npu defines it).
#include <ATen/TensorOperators.h>

#include <algorithm>
#include <vector>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

std::vector<int64_t> nonChannelDims(const at::Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnBatchNormReduceGetWorkspaceSize(const aclTensor* x, aclTensor* sum,
                                                                    aclTensor* squareSum, uint64_t* workspaceSize,
                                                                    aclOpExecutor** executor) {
  return prepareOp("aclnnBatchNormReduce", workspaceSize, executor, [&] {
    const char* op = "aclnnBatchNormReduce";
    at::Tensor input = requiredTensor(x, "x");
    at::Tensor s = requiredTensor(sum, "sum"), sq = requiredTensor(squareSum, "squareSum");
    TORCH_CHECK(input.dim() >= 2, op, ": x must be (N, C, ...), got ", input.sizes());
    TORCH_CHECK(s.numel() == input.size(1) && sq.numel() == input.size(1), op, ": sum and squareSum must hold ",
                input.size(1), " values, got ", describeTensors({s, sq}));
    return Prepared{{input}, [=]() mutable {
                      const at::Tensor x32 = input.to(at::kFloat);
                      const std::vector<int64_t> dims = nonChannelDims(x32);
                      s.copy_(x32.sum(dims).view(s.sizes()));
                      sq.copy_((x32 * x32).sum(dims).view(sq.sizes()));
                    },
                    {s, sq}};
  });
}
NPU_ATEN_OP(BatchNormReduce, "x, sum, squareSum");

// totalSum / totalSquareSum: (world_size, C) or (C,); sampleCount: world_size counts (truncated to integers);
// meanRef / varRef (optional, updated in place); batchMean / batchInvstd: (C,).
extern "C" NOP_API aclnnStatus aclnnSyncBatchNormGatherStatsGetWorkspaceSize(
    const aclTensor* totalSum, const aclTensor* totalSquareSum, const aclTensor* sampleCount, aclTensor* meanRef,
    aclTensor* varRef, double momentum, double eps, aclTensor* batchMean, aclTensor* batchInvstd,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnSyncBatchNormGatherStats", workspaceSize, executor, [&] {
    const char* op = "aclnnSyncBatchNormGatherStats";
    at::Tensor sums = requiredTensor(totalSum, "totalSum");
    at::Tensor squares = requiredTensor(totalSquareSum, "totalSquareSum");
    at::Tensor counts = requiredTensor(sampleCount, "sampleCount");
    at::Tensor running_mean = hostTensor(meanRef), running_var = hostTensor(varRef);
    at::Tensor mean_out = requiredTensor(batchMean, "batchMean");
    at::Tensor invstd_out = requiredTensor(batchInvstd, "batchInvstd");
    TORCH_CHECK(sums.dim() >= 1 && squares.sizes() == sums.sizes(), op,
                ": totalSum and totalSquareSum must be (world_size, C), got ", describeTensors({sums, squares}));
    const int64_t channels = sums.size(-1);
    const int64_t world = sums.numel() / std::max<int64_t>(channels, 1);
    TORCH_CHECK(counts.numel() == world, op, ": sampleCount must hold ", world, " counts, got ", counts.sizes());
    TORCH_CHECK(mean_out.numel() == channels && invstd_out.numel() == channels, op, ": batchMean and batchInvstd ",
                "must hold ", channels, " values, got ", describeTensors({mean_out, invstd_out}));
    TORCH_CHECK(running_mean.defined() == running_var.defined() &&
                    (!running_mean.defined() || (running_mean.numel() == channels && running_var.numel() == channels)),
                op, ": meanRef and varRef must both be given, with ", channels, " values each, or both be NULL");
    return Prepared{{sums, squares, counts, running_mean, running_var}, [=]() mutable {
                      // Counts are whole numbers; fractional ones are truncated, as torch_npu's int32 cast does.
                      const double total = counts.to(at::kLong).sum().item<double>();
                      const at::Tensor mean = sums.to(at::kFloat).reshape({world, channels}).sum(0) / total;
                      const at::Tensor square_mean =
                          squares.to(at::kFloat).reshape({world, channels}).sum(0) / total;
                      const at::Tensor var = square_mean - mean * mean;
                      mean_out.copy_(mean.view(mean_out.sizes()));
                      invstd_out.copy_((var + eps).rsqrt().view(invstd_out.sizes()));
                      if (running_mean.defined()) {
                        const at::Tensor rm = running_mean.to(at::kFloat).reshape({channels});
                        const at::Tensor rv = running_var.to(at::kFloat).reshape({channels});
                        running_mean.copy_((mean * momentum + rm * (1 - momentum)).view(running_mean.sizes()));
                        running_var.copy_((var * momentum + rv * (1 - momentum)).view(running_var.sizes()));
                      }
                    },
                    {mean_out, invstd_out, running_mean, running_var}};
  });
}
NPU_ATEN_OP(SyncBatchNormGatherStats, "totalSum, totalSquareSum, sampleCount, meanRef, varRef, momentum, eps, "
                                      "batchMean, batchInvstd");
