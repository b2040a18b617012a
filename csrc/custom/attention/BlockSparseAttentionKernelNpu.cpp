// BlockSparseAttentionKernelNpu.cpp - npu_block_sparse_attention (attention restricted by a block mask, TND/BNSD)
// with its Meta kernel, on aclnnBlockSparseAttention.
#include <ATen/ops/empty.h>

#include <string>
#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

namespace {

constexpr const char* kBlockSparseOp = "npu_block_sparse_attention";

// attention_out is shaped like query; softmax_lse is float32 [T, N, 1] (TND) or [B, N, S, 1] (BNSD) and is
// allocated whatever softmax_lse_flag says, as upstream does (its content is only meaningful with flag 1).
std::tuple<at::Tensor, at::Tensor> blockSparseOutputs(const at::Tensor& query, const at::Tensor& key,
                                                      const at::Tensor& value, const at::Tensor& block_sparse_mask,
                                                      at::IntArrayRef block_shape, c10::string_view q_input_layout,
                                                      c10::string_view kv_input_layout, int64_t num_key_value_heads,
                                                      int64_t inner_precise, at::OptionalIntArrayRef actual_seq_lengths,
                                                      at::OptionalIntArrayRef actual_seq_lengths_kv,
                                                      std::optional<int64_t> softmax_lse_flag) {
  const char* op = kBlockSparseOp;
  const std::string q_layout(q_input_layout), kv_layout(kv_input_layout);
  TORCH_CHECK_VALUE((q_layout == "TND" || q_layout == "BNSD") && kv_layout == q_layout, op,
                    ": q_input_layout and kv_input_layout must both be 'TND' or both be 'BNSD', got '", q_layout,
                    "'/'", kv_layout, "'");
  const int64_t rank = q_layout == "TND" ? 3 : 4;
  TORCH_CHECK_VALUE(query.dim() == rank && key.dim() == rank, op, ": query and key must be ", rank,
                    "-D for layout ", q_layout, ", got ", query.sizes(), " and ", key.sizes());
  TORCH_CHECK_VALUE(value.sizes() == key.sizes(), op, ": value must be shaped like key ", key.sizes(), ", got ",
                    value.sizes());
  const at::ScalarType type = query.scalar_type();
  TORCH_CHECK_TYPE(type == at::kHalf || type == at::kBFloat16 || type == at::kFloat, op,
                   ": query must be float16, bfloat16 or float32, got ", type);
  TORCH_CHECK_TYPE(key.scalar_type() == type && value.scalar_type() == type, op,
                   ": query, key, value must have the same dtype, got ", type, ", ", key.scalar_type(), ", ",
                   value.scalar_type());
  TORCH_CHECK_TYPE(block_sparse_mask.scalar_type() == at::kChar || block_sparse_mask.scalar_type() == at::kByte ||
                       block_sparse_mask.scalar_type() == at::kBool,
                   op, ": block_sparse_mask must be int8 (1 = block attended), got ", block_sparse_mask.scalar_type());
  TORCH_CHECK_VALUE(block_sparse_mask.dim() == 4, op,
                    ": block_sparse_mask must be [batch, N1, ceil(Sq/blockShapeX), ceil(Skv/blockShapeY)], got ",
                    block_sparse_mask.sizes());
  TORCH_CHECK_VALUE(block_shape.size() >= 2 && block_shape[0] > 0 && block_shape[1] > 0, op,
                    ": block_shape must hold two positive sizes [blockShapeX, blockShapeY], got ", block_shape);
  TORCH_CHECK_VALUE(inner_precise == 0 || inner_precise == 1, op, ": inner_precise must be 0 or 1, got ",
                    inner_precise);
  TORCH_CHECK_VALUE(type != at::kBFloat16 || inner_precise == 0, op,
                    ": bfloat16 inputs only support inner_precise=0 (float32 softmax)");
  const int64_t flag = softmax_lse_flag.value_or(0);
  TORCH_CHECK_VALUE(flag == 0 || flag == 1, op, ": softmax_lse_flag must be 0 or 1, got ", flag);
  TORCH_CHECK_VALUE(actual_seq_lengths.has_value() == actual_seq_lengths_kv.has_value(), op,
                    ": actual_seq_lengths and actual_seq_lengths_kv must be given together or both be None");
  TORCH_CHECK_VALUE(q_layout != "TND" || actual_seq_lengths.has_value(), op,
                    ": layout TND needs actual_seq_lengths and actual_seq_lengths_kv (one length per batch)");
  const int64_t heads = query.size(1), kv_heads = key.size(1);
  TORCH_CHECK_VALUE(kv_heads == num_key_value_heads, op, ": num_key_value_heads (", num_key_value_heads,
                    ") must equal key's head count (", kv_heads, ")");
  TORCH_CHECK_VALUE(kv_heads > 0 && heads % kv_heads == 0, op, ": query heads (", heads,
                    ") must be a multiple of key heads (", kv_heads, ")");
  TORCH_CHECK_VALUE(key.size(-1) == query.size(-1), op, ": query and key head dims differ (", query.size(-1),
                    " vs ", key.size(-1), ")");
  at::Tensor attention_out = at::empty(query.sizes(), query.options());
  std::vector<int64_t> lse_shape = {query.size(0), query.size(1), 1};
  if (rank == 4) {
    lse_shape = {query.size(0), query.size(1), query.size(2), 1};
  }
  at::Tensor softmax_lse = at::empty(lse_shape, query.options().dtype(at::kFloat));
  return std::make_tuple(attention_out, softmax_lse);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_block_sparse_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& block_sparse_mask,
    at::IntArrayRef block_shape, c10::string_view q_input_layout, c10::string_view kv_input_layout,
    int64_t num_key_value_heads, double scale_value, int64_t inner_precise, at::OptionalIntArrayRef actual_seq_lengths,
    at::OptionalIntArrayRef actual_seq_lengths_kv, std::optional<int64_t> softmax_lse_flag) {
  auto [attention_out, softmax_lse] =
      blockSparseOutputs(query, key, value, block_sparse_mask, block_shape, q_input_layout, kv_input_layout,
                         num_key_value_heads, inner_precise, actual_seq_lengths, actual_seq_lengths_kv,
                         softmax_lse_flag);
  const std::string q_layout(q_input_layout), kv_layout(kv_input_layout);
  // The dense mask, paged KV and band arguments of the device op are not exposed by torch_npu.
  const std::optional<at::Tensor> absent;
  const int64_t mask_type = 0, block_size = 0;
  const int64_t pre_tokens = 2147483647, next_tokens = 2147483647;
  const int64_t flag = softmax_lse_flag.value_or(0);
  EXEC_NPU_CMD(aclnnBlockSparseAttention, query, key, value, block_sparse_mask, absent, block_shape,
               actual_seq_lengths, actual_seq_lengths_kv, absent, q_layout, kv_layout, num_key_value_heads, mask_type,
               scale_value, inner_precise, block_size, pre_tokens, next_tokens, flag, attention_out, softmax_lse);
  return std::make_tuple(attention_out, softmax_lse);
}

std::tuple<at::Tensor, at::Tensor> npu_block_sparse_attention_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& block_sparse_mask,
    at::IntArrayRef block_shape, c10::string_view q_input_layout, c10::string_view kv_input_layout,
    int64_t num_key_value_heads, double scale_value, int64_t inner_precise, at::OptionalIntArrayRef actual_seq_lengths,
    at::OptionalIntArrayRef actual_seq_lengths_kv, std::optional<int64_t> softmax_lse_flag) {
  return blockSparseOutputs(query, key, value, block_sparse_mask, block_shape, q_input_layout, kv_input_layout,
                            num_key_value_heads, inner_precise, actual_seq_lengths, actual_seq_lengths_kv,
                            softmax_lse_flag);
}

}  // namespace at_npu::native
