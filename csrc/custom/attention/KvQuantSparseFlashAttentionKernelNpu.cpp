// KvQuantSparseFlashAttentionKernelNpu.cpp - npu_kv_quant_sparse_flash_attention (sparse MLA attention over a
// per-tile int8 KV cache) with its Meta kernel, on aclnnKvQuantSparseFlashAttention(V2).
#include <ATen/ops/empty.h>

#include <limits>
#include <string>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

namespace {

constexpr const char* kKvQuantSfaOp = "npu_kv_quant_sparse_flash_attention";

// The output is query's shape with D = query D - rope_head_dim (the nope width), in query's dtype.
at::Tensor kvQuantSfaOutput(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                            const at::Tensor& sparse_indices, int64_t key_quant_mode, int64_t value_quant_mode,
                            const std::optional<at::Tensor>& key_dequant_scale,
                            const std::optional<at::Tensor>& value_dequant_scale,
                            const std::optional<at::Tensor>& block_table,
                            const std::optional<at::Tensor>& actual_seq_lengths_query,
                            const std::optional<at::Tensor>& actual_seq_lengths_kv, int64_t sparse_block_size,
                            c10::string_view layout_query, c10::string_view layout_kv, int64_t sparse_mode,
                            int64_t pre_tokens, int64_t next_tokens, int64_t attention_mode,
                            int64_t quant_scale_repo_mode, int64_t tile_size, int64_t rope_head_dim,
                            std::optional<int64_t> key_dtype, std::optional<int64_t> value_dtype,
                            const std::optional<at::Tensor>& sinks) {
  const char* op = kKvQuantSfaOp;
  TORCH_CHECK_TYPE(!key_dtype.has_value() && !value_dtype.has_value(), op,
                   ": key_dtype/value_dtype select hifloat8, a chip number format the software NPU does not have; "
                   "pass int8 key/value and leave them None");
  TORCH_CHECK_TYPE(key.scalar_type() != at::kFloat8_e4m3fn && value.scalar_type() != at::kFloat8_e4m3fn, op,
                   ": float8_e4m3fn key/value is a chip number format the software NPU does not have; use int8");
  TORCH_CHECK_TYPE(key.scalar_type() == at::kChar && value.scalar_type() == at::kChar, op,
                   ": key and value must be int8 per-tile quantized caches, got ", key.scalar_type(), "/",
                   value.scalar_type());
  const at::ScalarType type = query.scalar_type();
  TORCH_CHECK_TYPE(type == at::kHalf || type == at::kBFloat16 || type == at::kFloat, op,
                   ": query must be float16, bfloat16 or float32, got ", type);
  TORCH_CHECK_TYPE(sparse_indices.scalar_type() == at::kInt, op, ": sparse_indices must be int32, got ",
                   sparse_indices.scalar_type());
  for (const auto* lengths : {&actual_seq_lengths_query, &actual_seq_lengths_kv, &block_table}) {
    TORCH_CHECK_TYPE(!lengths->has_value() || !(*lengths)->defined() || (*lengths)->scalar_type() == at::kInt, op,
                     ": actual_seq_lengths_query / actual_seq_lengths_kv / block_table must be int32");
  }
  const bool has_sinks = sinks.has_value() && sinks->defined();
  TORCH_CHECK_TYPE(!has_sinks || sinks->scalar_type() == at::kFloat, op, ": sinks must be float32");
  TORCH_CHECK_VALUE(!(key_dequant_scale.has_value() && key_dequant_scale->defined()) &&
                        !(value_dequant_scale.has_value() && value_dequant_scale->defined()),
                    op, ": key_dequant_scale / value_dequant_scale are reserved and must be None "
                        "(the per-tile scales are stored inside key)");
  TORCH_CHECK_VALUE(key_quant_mode == 2 && value_quant_mode == 2, op,
                    ": key_quant_mode and value_quant_mode must be 2 (per-tile), got ", key_quant_mode, "/",
                    value_quant_mode);
  TORCH_CHECK_VALUE(quant_scale_repo_mode == 1, op,
                    ": quant_scale_repo_mode must be 1 (scales combined into key), got ", quant_scale_repo_mode);
  TORCH_CHECK_VALUE(attention_mode == 2, op, ": attention_mode must be 2 (MLA-absorb), got ", attention_mode);
  TORCH_CHECK_VALUE(sparse_mode == 0 || sparse_mode == 3, op, ": sparse_mode must be 0 or 3, got ", sparse_mode);
  TORCH_CHECK_VALUE(pre_tokens == std::numeric_limits<int64_t>::max() &&
                        next_tokens == std::numeric_limits<int64_t>::max(),
                    op, ": pre_tokens and next_tokens only support their default 2^63-1");
  TORCH_CHECK_VALUE(sparse_block_size > 0, op, ": sparse_block_size must be positive, got ", sparse_block_size);
  const std::string q_layout(layout_query), kv_layout(layout_kv);
  TORCH_CHECK_VALUE(q_layout == "BSND" || q_layout == "TND", op, ": layout_query must be BSND or TND, got '",
                    q_layout, "'");
  TORCH_CHECK_VALUE(kv_layout == "BSND" || kv_layout == "TND" || kv_layout == "PA_BSND", op,
                    ": layout_kv must be BSND, TND or PA_BSND, got '", kv_layout, "'");
  TORCH_CHECK_VALUE(kv_layout == "PA_BSND" || kv_layout == q_layout, op,
                    ": without PageAttention layout_query and layout_kv must match");
  const int64_t q_rank = q_layout == "TND" ? 3 : 4, kv_rank = kv_layout == "TND" ? 3 : 4;
  TORCH_CHECK_VALUE(query.dim() == q_rank && sparse_indices.dim() == q_rank, op, ": query and sparse_indices must be ",
                    q_rank, "-D for layout ", q_layout, ", got ", query.sizes(), " and ", sparse_indices.sizes());
  TORCH_CHECK_VALUE(key.dim() == kv_rank && value.dim() == kv_rank, op, ": key and value must be ", kv_rank,
                    "-D for layout ", kv_layout);
  TORCH_CHECK_VALUE(q_layout != "TND" || (actual_seq_lengths_query.has_value() && actual_seq_lengths_query->defined()),
                    op, ": layout_query TND needs actual_seq_lengths_query (prefix sums)");
  TORCH_CHECK_VALUE(kv_layout == "BSND" || (actual_seq_lengths_kv.has_value() && actual_seq_lengths_kv->defined()),
                    op, ": layout_kv ", kv_layout, " needs actual_seq_lengths_kv");
  TORCH_CHECK_VALUE(kv_layout != "PA_BSND" || (block_table.has_value() && block_table->defined()), op,
                    ": layout_kv PA_BSND needs block_table");
  TORCH_CHECK_VALUE(tile_size > 0 && rope_head_dim >= 0 && query.size(-1) > rope_head_dim &&
                        (query.size(-1) - rope_head_dim) % tile_size == 0,
                    op, ": query D (", query.size(-1), ") minus rope_head_dim (", rope_head_dim,
                    ") must be a positive multiple of tile_size (", tile_size, ")");
  const int64_t nope = query.size(-1) - rope_head_dim;
  const int64_t key_d = nope + rope_head_dim * static_cast<int64_t>(c10::elementSize(type)) + nope / tile_size * 4;
  TORCH_CHECK_VALUE(key.size(-1) == key_d, op, ": key D must be ", key_d, " = nope ", nope,
                    " int8 + rope ", rope_head_dim, " x ", type, " bytes + ", nope / tile_size,
                    " float32 tile scales, got ", key.size(-1));
  const int64_t heads = query.size(-2), kv_heads = key.size(-2);
  TORCH_CHECK_VALUE(kv_heads > 0 && heads % kv_heads == 0 && value.size(-2) == kv_heads, op, ": query heads (",
                    heads, ") must be a multiple of key/value heads (", kv_heads, ")");
  TORCH_CHECK_VALUE(sparse_indices.size(-2) == kv_heads, op, ": sparse_indices must have N2=", kv_heads, " heads");
  TORCH_CHECK_VALUE(!has_sinks || (sinks->dim() == 1 && sinks->size(0) == heads), op, ": sinks must be [N1=",
                    heads, "]");
  std::vector<int64_t> shape = query.sizes().vec();
  shape.back() = nope;
  return at::empty(shape, query.options());
}

}  // namespace

at::Tensor npu_kv_quant_sparse_flash_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& sparse_indices,
    double scale_value, int64_t key_quant_mode, int64_t value_quant_mode,
    const std::optional<at::Tensor>& key_dequant_scale, const std::optional<at::Tensor>& value_dequant_scale,
    const std::optional<at::Tensor>& block_table, const std::optional<at::Tensor>& actual_seq_lengths_query,
    const std::optional<at::Tensor>& actual_seq_lengths_kv, int64_t sparse_block_size, c10::string_view layout_query,
    c10::string_view layout_kv, int64_t sparse_mode, int64_t pre_tokens, int64_t next_tokens, int64_t attention_mode,
    int64_t quant_scale_repo_mode, int64_t tile_size, int64_t rope_head_dim, std::optional<int64_t> key_dtype,
    std::optional<int64_t> value_dtype, const std::optional<at::Tensor>& sinks) {
  at::Tensor out = kvQuantSfaOutput(query, key, value, sparse_indices, key_quant_mode, value_quant_mode,
                                    key_dequant_scale, value_dequant_scale, block_table, actual_seq_lengths_query,
                                    actual_seq_lengths_kv, sparse_block_size, layout_query, layout_kv, sparse_mode,
                                    pre_tokens, next_tokens, attention_mode, quant_scale_repo_mode, tile_size,
                                    rope_head_dim, key_dtype, value_dtype, sinks);
  const std::string q_layout(layout_query), kv_layout(layout_kv);
  if (sinks.has_value() && sinks->defined()) {
    EXEC_NPU_CMD(aclnnKvQuantSparseFlashAttentionV2, query, key, value, sparse_indices, key_dequant_scale,
                 value_dequant_scale, block_table, actual_seq_lengths_query, actual_seq_lengths_kv, sinks, scale_value,
                 key_quant_mode, value_quant_mode, sparse_block_size, q_layout, kv_layout, sparse_mode, pre_tokens,
                 next_tokens, attention_mode, quant_scale_repo_mode, tile_size, rope_head_dim, out);
  } else {
    EXEC_NPU_CMD(aclnnKvQuantSparseFlashAttention, query, key, value, sparse_indices, key_dequant_scale,
                 value_dequant_scale, block_table, actual_seq_lengths_query, actual_seq_lengths_kv, scale_value,
                 key_quant_mode, value_quant_mode, sparse_block_size, q_layout, kv_layout, sparse_mode, pre_tokens,
                 next_tokens, attention_mode, quant_scale_repo_mode, tile_size, rope_head_dim, out);
  }
  return out;
}

at::Tensor npu_kv_quant_sparse_flash_attention_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& sparse_indices,
    double scale_value, int64_t key_quant_mode, int64_t value_quant_mode,
    const std::optional<at::Tensor>& key_dequant_scale, const std::optional<at::Tensor>& value_dequant_scale,
    const std::optional<at::Tensor>& block_table, const std::optional<at::Tensor>& actual_seq_lengths_query,
    const std::optional<at::Tensor>& actual_seq_lengths_kv, int64_t sparse_block_size, c10::string_view layout_query,
    c10::string_view layout_kv, int64_t sparse_mode, int64_t pre_tokens, int64_t next_tokens, int64_t attention_mode,
    int64_t quant_scale_repo_mode, int64_t tile_size, int64_t rope_head_dim, std::optional<int64_t> key_dtype,
    std::optional<int64_t> value_dtype, const std::optional<at::Tensor>& sinks) {
  return kvQuantSfaOutput(query, key, value, sparse_indices, key_quant_mode, value_quant_mode, key_dequant_scale,
                          value_dequant_scale, block_table, actual_seq_lengths_query, actual_seq_lengths_kv,
                          sparse_block_size, layout_query, layout_kv, sparse_mode, pre_tokens, next_tokens,
                          attention_mode, quant_scale_repo_mode, tile_size, rope_head_dim, key_dtype, value_dtype,
                          sinks);
}

}  // namespace at_npu::native
