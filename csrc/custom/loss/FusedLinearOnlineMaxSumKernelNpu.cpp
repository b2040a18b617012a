// FusedLinearOnlineMaxSumKernelNpu.cpp - npu_fused_linear_online_max_sum: the vocabulary-parallel cross entropy's
// local step (logits = input @ weight^T, row max, exp sum, target logit, target mask) on aclnnFusedLinearOnlineMaxSum.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using OnlineMaxSumOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

constexpr const char* kOp = "npu_fused_linear_online_max_sum";

void checkOnlineMaxSum(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& target,
                       int64_t vocab_start_index, int64_t vocab_end_index) {
  TORCH_CHECK_TYPE(input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16 ||
                       input.scalar_type() == at::kFloat,
                   kOp, ": input must be float16, bfloat16 or float32, got ", input.scalar_type());
  TORCH_CHECK_TYPE(weight.scalar_type() == input.scalar_type(), kOp, ": weight must have input's dtype ",
                   input.scalar_type(), ", got ", weight.scalar_type());
  TORCH_CHECK_TYPE(target.scalar_type() == at::kInt || target.scalar_type() == at::kLong, kOp,
                   ": target must be int32 or int64, got ", target.scalar_type());
  TORCH_CHECK_VALUE(input.dim() == 2 && weight.dim() == 2 && weight.size(1) == input.size(1), kOp,
                    ": input must be [batch, hidden] and weight [vocab, hidden], got ", input.sizes(), " and ",
                    weight.sizes());
  TORCH_CHECK_VALUE(target.dim() == 1 && target.size(0) == input.size(0), kOp, ": target must be [", input.size(0),
                    "], got ", target.sizes());
  // The end index is inclusive: this rank owns targets in [vocab_start_index, vocab_end_index].
  TORCH_CHECK_VALUE(vocab_start_index >= 0 && vocab_end_index >= vocab_start_index &&
                        vocab_end_index - vocab_start_index < weight.size(0),
                    kOp, ": need 0 <= vocab_start_index <= vocab_end_index < vocab_start_index + weight.size(0) (",
                    weight.size(0), "), got ", vocab_start_index, " and ", vocab_end_index);
}

OnlineMaxSumOutputs emptyOnlineMaxSumOutputs(const at::Tensor& input, const at::Tensor& weight,
                                             const at::Tensor& target, bool return_logits) {
  const int64_t batch = input.size(0);
  const auto f32 = input.options().dtype(at::kFloat);
  // The logits are only kept when asked for; otherwise None, as in torch_npu.
  at::Tensor logits = return_logits ? at::empty({batch, weight.size(0)}, input.options()) : at::Tensor();
  return {at::empty({batch}, f32), at::empty({batch}, f32), at::empty({batch}, f32),
          at::empty({(batch + 7) / 8}, input.options().dtype(at::kByte)), at::empty({batch}, target.options()),
          logits};
}

}  // namespace

OnlineMaxSumOutputs npu_fused_linear_online_max_sum(const at::Tensor& input, const at::Tensor& weight,
                                                    const at::Tensor& target, int64_t vocab_start_index,
                                                    int64_t vocab_end_index, bool return_logits) {
  checkOnlineMaxSum(input, weight, target, vocab_start_index, vocab_end_index);
  auto outputs = emptyOnlineMaxSumOutputs(input, weight, target, return_logits);
  auto& [logits_max, sum_exp_logits, predicted_logits, target_mask, masked_target, logits] = outputs;
  const std::optional<at::Tensor> logits_out = return_logits ? std::optional<at::Tensor>(logits) : std::nullopt;
  EXEC_NPU_CMD(aclnnFusedLinearOnlineMaxSum, input, weight, target, vocab_start_index, vocab_end_index, logits_max,
               sum_exp_logits, predicted_logits, target_mask, masked_target, logits_out);
  return outputs;
}

OnlineMaxSumOutputs npu_fused_linear_online_max_sum_meta(const at::Tensor& input, const at::Tensor& weight,
                                                         const at::Tensor& target, int64_t vocab_start_index,
                                                         int64_t vocab_end_index, bool return_logits) {
  checkOnlineMaxSum(input, weight, target, vocab_start_index, vocab_end_index);
  return emptyOnlineMaxSumOutputs(input, weight, target, return_logits);
}

}  // namespace at_npu::native
