// MoeFinalizeRoutingKernelNpu.cpp - the end of an MoE layer: npu_moe_finalize_routing (experts' rows weighted,
// biased and summed back per token, plus skip connections, on aclnnMoeFinalizeRoutingV2) and
// npu_moe_compute_expert_tokens (where each expert's rows end in the expert-sorted order, on
// aclnnMoeComputeExpertTokens). Inference ops: upstream defines no gradient.
#include <ATen/ops/empty.h>

#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

bool isFloat(at::ScalarType type) { return type == at::kFloat || type == at::kHalf || type == at::kBFloat16; }

bool isIndexType(at::ScalarType type) { return type == at::kInt || type == at::kLong; }

// The output's shape [tokens, H]: tokens from scales ([tokens, K]) or the index count / k; H from the rows.
std::vector<int64_t> finalizeShape(const at::Tensor& rows, const std::optional<at::Tensor>& skip1,
                                   const std::optional<at::Tensor>& skip2, const std::optional<at::Tensor>& bias,
                                   const std::optional<at::Tensor>& scales, const at::Tensor& src_to_dst,
                                   const std::optional<at::Tensor>& experts, std::optional<int64_t> drop_pad_mode,
                                   std::optional<int64_t> k) {
  const char* op = "npu_moe_finalize_routing";
  const int64_t mode = drop_pad_mode.value_or(0);
  TORCH_CHECK_VALUE(mode >= 0 && mode <= 3, op, ": drop_pad_mode must be 0 / 2 (dropless, index by column / row) ",
                    "or 1 / 3 (drop / pad, by column / row), got ", mode);
  TORCH_CHECK_VALUE(rows.dim() == 2 || rows.dim() == 3, op, ": expanded_permuted_rows must be [tokens * K, H] or ",
                    "[experts, capacity, H], got ", rows.sizes());
  TORCH_CHECK_TYPE(isFloat(rows.scalar_type()), op, ": expanded_permuted_rows must be float16, bfloat16 or float32, ",
                   "got ", rows.scalar_type());
  TORCH_CHECK_VALUE(src_to_dst.dim() == 1, op, ": expanded_src_to_dst_row must be 1-D [tokens * K], got ",
                    src_to_dst.sizes());
  TORCH_CHECK_TYPE(isIndexType(src_to_dst.scalar_type()), op, ": expanded_src_to_dst_row must be int32, got ",
                   src_to_dst.scalar_type());
  const int64_t nk = src_to_dst.size(0), h = rows.size(-1);
  int64_t kk = k.value_or(1);
  if (present(scales)) {
    TORCH_CHECK_VALUE(scales->dim() == 2, op, ": scales must be 2-D [tokens, K], got ", scales->sizes());
    TORCH_CHECK_TYPE(isFloat(scales->scalar_type()), op, ": scales must be floating point, got ",
                     scales->scalar_type());
    kk = scales->size(1);
  }
  TORCH_CHECK_VALUE(kk >= 1, op, ": k must be at least 1, got ", kk);
  const int64_t tokens = present(scales) ? scales->size(0) : nk / kk;
  TORCH_CHECK_VALUE(tokens * kk == nk, op, ": expanded_src_to_dst_row holds ", nk, " indices, not tokens * K = ",
                    tokens, " * ", kk);
  const std::vector<int64_t> shape{tokens, h};
  for (const auto* skip : {&skip1, &skip2}) {
    if (!present(*skip)) continue;
    TORCH_CHECK_VALUE((*skip)->sizes().equals(shape), op, ": skip1 / skip2 must be [", tokens, ", ", h, "], got ",
                      (*skip)->sizes());
    TORCH_CHECK_TYPE((*skip)->scalar_type() == rows.scalar_type(), op, ": skip1 / skip2 must have ",
                     "expanded_permuted_rows' dtype ", rows.scalar_type(), ", got ", (*skip)->scalar_type());
  }
  if (present(bias)) {
    TORCH_CHECK_VALUE(bias->dim() == 2 && bias->size(1) == h, op, ": bias must be [experts, H = ", h, "], got ",
                      bias->sizes());
    TORCH_CHECK_TYPE(isFloat(bias->scalar_type()), op, ": bias must be floating point, got ", bias->scalar_type());
    TORCH_CHECK_VALUE(present(experts), op, ": bias is added per expert: expert_for_source_row must be given");
  }
  if (present(experts)) {
    TORCH_CHECK_VALUE(experts->dim() == 2 && experts->size(0) == tokens && experts->size(1) == kk, op,
                      ": expert_for_source_row must be [tokens = ", tokens, ", K = ", kk, "], got ", experts->sizes());
    TORCH_CHECK_TYPE(isIndexType(experts->scalar_type()), op, ": expert_for_source_row must be int32, got ",
                     experts->scalar_type());
  }
  return shape;
}

}  // namespace

at::Tensor npu_moe_finalize_routing(const at::Tensor& expanded_permuted_rows, const std::optional<at::Tensor>& skip1,
                                    const std::optional<at::Tensor>& skip2, const std::optional<at::Tensor>& bias,
                                    const std::optional<at::Tensor>& scales, const at::Tensor& expanded_src_to_dst_row,
                                    const std::optional<at::Tensor>& export_for_source_row,
                                    std::optional<int64_t> drop_pad_mode, std::optional<int64_t> k) {
  const std::vector<int64_t> shape = finalizeShape(expanded_permuted_rows, skip1, skip2, bias, scales,
                                                   expanded_src_to_dst_row, export_for_source_row, drop_pad_mode, k);
  at::Tensor out = at::empty(shape, expanded_permuted_rows.options());
  if (out.numel() == 0) return out;
  const int64_t mode = drop_pad_mode.value_or(0);
  // The device op reads K from the index count and the output's rows.
  EXEC_NPU_CMD(aclnnMoeFinalizeRoutingV2, expanded_permuted_rows, expanded_src_to_dst_row, skip1, skip2, bias, scales,
               export_for_source_row, mode, out);
  return out;
}

at::Tensor npu_moe_finalize_routing_meta(const at::Tensor& expanded_permuted_rows,
                                         const std::optional<at::Tensor>& skip1, const std::optional<at::Tensor>& skip2,
                                         const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& scales,
                                         const at::Tensor& expanded_src_to_dst_row,
                                         const std::optional<at::Tensor>& export_for_source_row,
                                         std::optional<int64_t> drop_pad_mode, std::optional<int64_t> k) {
  return at::empty(finalizeShape(expanded_permuted_rows, skip1, skip2, bias, scales, expanded_src_to_dst_row,
                                 export_for_source_row, drop_pad_mode, k),
                   expanded_permuted_rows.options());
}

namespace {

void checkExpertTokens(const at::Tensor& sorted, int64_t num_expert) {
  const char* op = "npu_moe_compute_expert_tokens";
  TORCH_CHECK_VALUE(sorted.dim() == 1, op, ": sorted_expert_for_source_row must be 1-D, got ", sorted.sizes());
  TORCH_CHECK_TYPE(isIndexType(sorted.scalar_type()), op, ": sorted_expert_for_source_row must be int32, got ",
                   sorted.scalar_type());
  TORCH_CHECK_VALUE(num_expert >= 1, op, ": num_expert must be at least 1, got ", num_expert);
}

}  // namespace

at::Tensor npu_moe_compute_expert_tokens(const at::Tensor& sorted_expert_for_source_row, int64_t num_expert) {
  checkExpertTokens(sorted_expert_for_source_row, num_expert);
  at::Tensor out = at::empty({num_expert}, sorted_expert_for_source_row.options());
  EXEC_NPU_CMD(aclnnMoeComputeExpertTokens, sorted_expert_for_source_row, num_expert, out);
  return out;
}

at::Tensor npu_moe_compute_expert_tokens_meta(const at::Tensor& sorted_expert_for_source_row, int64_t num_expert) {
  checkExpertTokens(sorted_expert_for_source_row, num_expert);
  return at::empty({num_expert}, sorted_expert_for_source_row.options());
}

}  // namespace at_npu::native
