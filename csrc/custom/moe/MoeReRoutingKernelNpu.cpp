// MoeReRoutingKernelNpu.cpp - npu_moe_re_routing: tokens received from other ranks (rank by rank, each rank's
// block expert by expert) rearranged expert by expert, with their per-token scales, the index map back and the
// per-expert token counts, on aclnnMoeReRouting. Inference op: upstream defines no gradient.
#include <ATen/ops/empty.h>

#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

using ReRoutingOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

ReRoutingOutputs reRoutingOutputs(const at::Tensor& tokens, const at::Tensor& counts,
                                  const std::optional<at::Tensor>& per_token_scales, int64_t expert_token_num_type,
                                  int64_t idx_type, std::optional<int64_t> tokens_dtype) {
  const char* op = "npu_moe_re_routing";
  TORCH_CHECK_VALUE(tokens.dim() >= 2, op, ": tokens must be [A, H], got ", tokens.sizes());
  const at::ScalarType type = tokens.scalar_type();
  TORCH_CHECK_TYPE(type == at::kHalf || type == at::kBFloat16 || type == at::kFloat || type == at::kChar, op,
                   ": tokens must be float16, bfloat16, float32 or int8, got ", type);
  TORCH_CHECK_VALUE(!tokens_dtype.has_value(), op, ": tokens_dtype reinterprets tokens as a chip number format ",
                    "(hifloat8 / float4), which the software NPU does not have; leave it None");
  TORCH_CHECK_VALUE(counts.dim() == 2, op, ": expert_token_num_per_rank must be 2-D [ranks, experts], got ",
                    counts.sizes());
  TORCH_CHECK_TYPE(counts.scalar_type() == at::kInt || counts.scalar_type() == at::kLong, op,
                   ": expert_token_num_per_rank must be int32 or int64, got ", counts.scalar_type());
  TORCH_CHECK_VALUE(expert_token_num_type == 0 || expert_token_num_type == 1, op, ": expert_token_num_type must be ",
                    "0 (cumsum) or 1 (count), got ", expert_token_num_type);
  TORCH_CHECK_VALUE(idx_type == 0 || idx_type == 1, op, ": idx_type must be 0 (gather indices) or 1 (scatter ",
                    "indices), got ", idx_type);
  const int64_t a = tokens.size(0);
  if (present(per_token_scales)) {
    TORCH_CHECK_VALUE(per_token_scales->dim() >= 1 && per_token_scales->size(0) == a, op,
                      ": per_token_scales must be [A = ", a, "], got ", per_token_scales->sizes());
  }
  at::Tensor scales_out = present(per_token_scales)
                              ? at::empty(per_token_scales->sizes(), per_token_scales->options())
                              : at::empty({a}, tokens.options().dtype(at::kFloat));
  return {at::empty(tokens.sizes(), tokens.options()), scales_out, at::empty({a}, tokens.options().dtype(at::kInt)),
          at::empty({counts.size(1)}, counts.options())};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_moe_re_routing(
    const at::Tensor& tokens, const at::Tensor& expert_token_num_per_rank,
    const std::optional<at::Tensor>& per_token_scales, int64_t expert_token_num_type, int64_t idx_type,
    std::optional<int64_t> tokens_dtype) {
  auto [permute_tokens, permute_scales, permute_idx, expert_token_num] = reRoutingOutputs(
      tokens, expert_token_num_per_rank, per_token_scales, expert_token_num_type, idx_type, tokens_dtype);
  EXEC_NPU_CMD(aclnnMoeReRouting, tokens, expert_token_num_per_rank, per_token_scales, expert_token_num_type,
               idx_type, permute_tokens, permute_scales, permute_idx, expert_token_num);
  return {permute_tokens, permute_scales, permute_idx, expert_token_num};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_moe_re_routing_meta(
    const at::Tensor& tokens, const at::Tensor& expert_token_num_per_rank,
    const std::optional<at::Tensor>& per_token_scales, int64_t expert_token_num_type, int64_t idx_type,
    std::optional<int64_t> tokens_dtype) {
  return reRoutingOutputs(tokens, expert_token_num_per_rank, per_token_scales, expert_token_num_type, idx_type,
                          tokens_dtype);
}

}  // namespace at_npu::native
