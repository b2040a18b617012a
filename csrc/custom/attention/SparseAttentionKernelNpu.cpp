// SparseAttentionKernelNpu.cpp - DeepSeek sparse attention adapters: npu_lightning_indexer, npu_quant_lightning_indexer,
// npu_dense_lightning_indexer_softmax_lse and npu_sparse_flash_attention, with Meta kernels, on their aclnn device ops.
#include <ATen/ops/empty.h>

#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

namespace {

void checkSparseLayout(const char* op, const std::string& layout, bool allow_paged, const char* what) {
  const bool known = layout == "BSND" || layout == "TND" || (allow_paged && layout == "PA_BSND");
  TORCH_CHECK_VALUE(known, op, ": ", what, " must be BSND, TND", allow_paged ? " or PA_BSND" : "", ", got '", layout,
                    "'");
}

void checkRank(const char* op, const at::Tensor& t, const std::string& layout, const char* what) {
  const int64_t rank = layout == "TND" ? 3 : 4;
  TORCH_CHECK_VALUE(t.dim() == rank, op, ": ", what, " must be ", rank, "-D for layout ", layout, ", got shape ",
                    t.sizes());
}

void checkHalfType(const char* op, const at::Tensor& t, const char* what) {
  const at::ScalarType type = t.scalar_type();
  TORCH_CHECK_TYPE(type == at::kHalf || type == at::kBFloat16 || type == at::kFloat, op, ": ", what,
                   " must be float16, bfloat16 or float32, got ", type);
}

void checkIndexType(const char* op, const std::optional<at::Tensor>& t, const char* what) {
  TORCH_CHECK_TYPE(!t.has_value() || !t->defined() || t->scalar_type() == at::kInt || t->scalar_type() == at::kLong,
                   op, ": ", what, " must be int32 (or int64), got ", t.has_value() ? t->scalar_type() : at::kInt);
}

// Output shape of both lightning indexer results: [B, S1, N2, K] for BSND queries, [T1, N2, K] for TND.
std::vector<int64_t> indexerShape(const char* op, const at::Tensor& query, const at::Tensor& key,
                                  const std::string& q_layout, const std::string& k_layout, int64_t sparse_count) {
  checkSparseLayout(op, q_layout, false, "layout_query");
  checkSparseLayout(op, k_layout, true, "layout_key");
  checkRank(op, query, q_layout, "query");
  checkRank(op, key, k_layout, "key");
  TORCH_CHECK_VALUE(sparse_count > 0, op, ": sparse_count must be positive, got ", sparse_count);
  const int64_t kv_heads = key.size(-2);
  if (q_layout == "TND") {
    return {query.size(0), kv_heads, sparse_count};
  }
  return {query.size(0), query.size(1), kv_heads, sparse_count};
}

std::tuple<at::Tensor, at::Tensor> indexerOutputs(const char* op, const at::Tensor& query, const at::Tensor& key,
                                                  const at::Tensor& weights, c10::string_view layout_query,
                                                  c10::string_view layout_key, int64_t sparse_count,
                                                  int64_t sparse_mode, bool return_value) {
  checkHalfType(op, query, "query");
  checkHalfType(op, weights, "weights");
  TORCH_CHECK_TYPE(key.scalar_type() == query.scalar_type(), op, ": key dtype (", key.scalar_type(),
                   ") must equal query dtype (", query.scalar_type(), ")");
  TORCH_CHECK_VALUE(sparse_mode == 0 || sparse_mode == 3, op, ": sparse_mode must be 0 or 3, got ", sparse_mode);
  const std::vector<int64_t> shape =
      indexerShape(op, query, key, std::string(layout_query), std::string(layout_key), sparse_count);
  TORCH_CHECK_VALUE(query.size(-1) == key.size(-1), op, ": query and key head dims differ (", query.size(-1), " vs ",
                    key.size(-1), ")");
  TORCH_CHECK_VALUE(query.size(-2) % key.size(-2) == 0, op, ": query heads (", query.size(-2),
                    ") must be a multiple of key heads (", key.size(-2), ")");
  at::Tensor indices = at::empty(shape, query.options().dtype(at::kInt));
  // Without return_value the values output is an empty placeholder, as upstream returns it.
  at::Tensor values = return_value ? at::empty(shape, query.options()) : at::empty({0}, query.options());
  return std::make_tuple(indices, values);
}

// attention_out is shaped like query (value shares query's head dim); the softmax statistics are
// [B, N2, S1, N1/N2] (BSND) or [N2, T1, N1/N2] (TND) in float32, or empty placeholders.
std::tuple<at::Tensor, at::Tensor, at::Tensor> sparseAttentionOutputs(const char* op, const at::Tensor& query,
                                                                      const at::Tensor& key, const at::Tensor& value,
                                                                      const at::Tensor& sparse_indices,
                                                                      c10::string_view layout_query,
                                                                      c10::string_view layout_kv,
                                                                      bool return_softmax_lse) {
  const std::string q_layout(layout_query), kv_layout(layout_kv);
  checkSparseLayout(op, q_layout, false, "layout_query");
  checkSparseLayout(op, kv_layout, true, "layout_kv");
  checkRank(op, query, q_layout, "query");
  checkRank(op, sparse_indices, q_layout, "sparse_indices");
  checkRank(op, key, kv_layout, "key");
  checkRank(op, value, kv_layout, "value");
  checkHalfType(op, query, "query");
  TORCH_CHECK_TYPE(key.scalar_type() == query.scalar_type() && value.scalar_type() == query.scalar_type(), op,
                   ": key and value must have query's dtype ", query.scalar_type());
  TORCH_CHECK_TYPE(sparse_indices.scalar_type() == at::kInt || sparse_indices.scalar_type() == at::kLong, op,
                   ": sparse_indices must be int32, got ", sparse_indices.scalar_type());
  const int64_t heads = query.size(-2), kv_heads = key.size(-2);
  TORCH_CHECK_VALUE(kv_heads > 0 && heads % kv_heads == 0, op, ": query heads (", heads,
                    ") must be a multiple of key heads (", kv_heads, ")");
  TORCH_CHECK_VALUE(value.size(-1) == query.size(-1), op, ": value head dim (", value.size(-1),
                    ") must equal query head dim (", query.size(-1), ")");
  at::Tensor out = at::empty(query.sizes(), query.options());
  std::vector<int64_t> stats_shape = {0};
  if (return_softmax_lse) {
    if (q_layout == "TND") {
      stats_shape = {kv_heads, query.size(0), heads / kv_heads};
    } else {
      stats_shape = {query.size(0), kv_heads, query.size(1), heads / kv_heads};
    }
  }
  at::Tensor softmax_max = at::empty(stats_shape, query.options().dtype(at::kFloat));
  at::Tensor softmax_sum = at::empty(stats_shape, query.options().dtype(at::kFloat));
  return std::make_tuple(out, softmax_max, softmax_sum);
}

// The quantized indexer's int32 indices, shaped like npu_lightning_indexer's. Only int8 operands run here:
// float8_e4m3fn and hifloat8 (query_dtype/key_dtype) are chip number formats this device does not have.
at::Tensor quantIndexerOutput(const at::Tensor& query, const at::Tensor& key, const at::Tensor& weights,
                              const at::Tensor& query_dequant_scale, const at::Tensor& key_dequant_scale,
                              int64_t query_quant_mode, int64_t key_quant_mode, c10::string_view layout_query,
                              c10::string_view layout_key, int64_t sparse_count, int64_t sparse_mode,
                              std::optional<int64_t> query_dtype, std::optional<int64_t> key_dtype) {
  const char* op = "npu_quant_lightning_indexer";
  TORCH_CHECK_TYPE(!query_dtype.has_value() && !key_dtype.has_value(), op,
                   ": query_dtype/key_dtype select hifloat8, which this device does not support; pass int8 tensors");
  TORCH_CHECK_TYPE(query.scalar_type() == at::kChar && key.scalar_type() == at::kChar, op,
                   ": query and key must be int8 (float8/hifloat8 are not supported here), got ", query.scalar_type(),
                   "/", key.scalar_type());
  checkHalfType(op, weights, "weights");
  checkHalfType(op, query_dequant_scale, "query_dequant_scale");
  checkHalfType(op, key_dequant_scale, "key_dequant_scale");
  TORCH_CHECK_VALUE(query_quant_mode == 0 && key_quant_mode == 0, op,
                    ": query_quant_mode and key_quant_mode must be 0 (per-token scales), got ", query_quant_mode, "/",
                    key_quant_mode);
  TORCH_CHECK_VALUE(sparse_mode == 0 || sparse_mode == 3, op, ": sparse_mode must be 0 or 3, got ", sparse_mode);
  const std::vector<int64_t> shape =
      indexerShape(op, query, key, std::string(layout_query), std::string(layout_key), sparse_count);
  TORCH_CHECK_VALUE(query_dequant_scale.sizes() == query.sizes().slice(0, query.dim() - 1), op,
                    ": query_dequant_scale must be query's shape without D, got ", query_dequant_scale.sizes());
  TORCH_CHECK_VALUE(key_dequant_scale.sizes() == key.sizes().slice(0, key.dim() - 1), op,
                    ": key_dequant_scale must be key's shape without D, got ", key_dequant_scale.sizes());
  return at::empty(shape, query.options().dtype(at::kInt));
}

// softmax_max / softmax_sum of the dense indexer: [B, N2, S1] for BSND, [N2, T1] for TND, float32.
std::tuple<at::Tensor, at::Tensor> denseIndexerLseOutputs(const at::Tensor& query_index, const at::Tensor& key_index,
                                                          const at::Tensor& weights, const std::string& layout,
                                                          at::OptionalIntArrayRef actual_seq_qlen,
                                                          at::OptionalIntArrayRef actual_seq_klen,
                                                          int64_t sparse_mode) {
  const char* op = "npu_dense_lightning_indexer_softmax_lse";
  checkSparseLayout(op, layout, false, "layout");
  checkRank(op, query_index, layout, "query_index");
  checkRank(op, key_index, layout, "key_index");
  checkHalfType(op, query_index, "query_index");
  checkHalfType(op, weights, "weights");
  TORCH_CHECK_TYPE(key_index.scalar_type() == query_index.scalar_type(), op, ": key_index dtype (",
                   key_index.scalar_type(), ") must equal query_index dtype (", query_index.scalar_type(), ")");
  TORCH_CHECK_VALUE(sparse_mode == 0 || sparse_mode == 3, op, ": sparse_mode must be 0 or 3, got ", sparse_mode);
  TORCH_CHECK_VALUE(query_index.size(-1) == key_index.size(-1), op, ": query_index and key_index head dims differ");
  TORCH_CHECK_VALUE(query_index.size(-2) % key_index.size(-2) == 0, op, ": query heads (", query_index.size(-2),
                    ") must be a multiple of key heads (", key_index.size(-2), ")");
  TORCH_CHECK_VALUE(layout != "TND" || (actual_seq_qlen.has_value() && actual_seq_klen.has_value()), op,
                    ": layout TND needs actual_seq_qlen and actual_seq_klen (prefix sums)");
  const int64_t kv_heads = key_index.size(-2);
  std::vector<int64_t> shape;
  if (layout == "TND") {
    shape = {kv_heads, query_index.size(0)};
  } else {
    shape = {query_index.size(0), kv_heads, query_index.size(1)};
  }
  at::Tensor softmax_max = at::empty(shape, query_index.options().dtype(at::kFloat));
  at::Tensor softmax_sum = at::empty(shape, query_index.options().dtype(at::kFloat));
  return std::make_tuple(softmax_max, softmax_sum);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_dense_lightning_indexer_softmax_lse(
    const at::Tensor& query_index, const at::Tensor& key_index, const at::Tensor& weights,
    at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_klen,
    std::optional<c10::string_view> layout, std::optional<int64_t> sparse_mode, std::optional<int64_t> pre_tokens,
    std::optional<int64_t> next_tokens) {
  const std::string layout_str(layout.value_or("BSND"));
  const int64_t mode = sparse_mode.value_or(3);
  const int64_t before = pre_tokens.value_or(std::numeric_limits<int64_t>::max());
  const int64_t after = next_tokens.value_or(std::numeric_limits<int64_t>::max());
  auto [softmax_max, softmax_sum] =
      denseIndexerLseOutputs(query_index, key_index, weights, layout_str, actual_seq_qlen, actual_seq_klen, mode);
  EXEC_NPU_CMD(aclnnDenseLightningIndexerSoftmaxLse, query_index, key_index, weights, actual_seq_qlen,
               actual_seq_klen, layout_str, mode, before, after, softmax_max, softmax_sum);
  return std::make_tuple(softmax_max, softmax_sum);
}

std::tuple<at::Tensor, at::Tensor> npu_dense_lightning_indexer_softmax_lse_meta(
    const at::Tensor& query_index, const at::Tensor& key_index, const at::Tensor& weights,
    at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_klen,
    std::optional<c10::string_view> layout, std::optional<int64_t> sparse_mode, std::optional<int64_t> pre_tokens,
    std::optional<int64_t> next_tokens) {
  return denseIndexerLseOutputs(query_index, key_index, weights, std::string(layout.value_or("BSND")),
                                actual_seq_qlen, actual_seq_klen, sparse_mode.value_or(3));
}

std::tuple<at::Tensor, at::Tensor> npu_lightning_indexer(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& weights,
    const std::optional<at::Tensor>& actual_seq_lengths_query, const std::optional<at::Tensor>& actual_seq_lengths_key,
    const std::optional<at::Tensor>& block_table, c10::string_view layout_query, c10::string_view layout_key,
    int64_t sparse_count, int64_t sparse_mode, int64_t pre_tokens, int64_t next_tokens, bool return_value) {
  const char* op = "npu_lightning_indexer";
  checkIndexType(op, actual_seq_lengths_query, "actual_seq_lengths_query");
  checkIndexType(op, actual_seq_lengths_key, "actual_seq_lengths_key");
  checkIndexType(op, block_table, "block_table");
  const std::string q_layout(layout_query), k_layout(layout_key);
  TORCH_CHECK_VALUE(q_layout != "TND" || (actual_seq_lengths_query.has_value() && actual_seq_lengths_query->defined()),
                    op, ": layout_query TND needs actual_seq_lengths_query (prefix sums)");
  TORCH_CHECK_VALUE(k_layout == "BSND" || (actual_seq_lengths_key.has_value() && actual_seq_lengths_key->defined()),
                    op, ": layout_key ", k_layout, " needs actual_seq_lengths_key");
  TORCH_CHECK_VALUE(k_layout != "PA_BSND" || (block_table.has_value() && block_table->defined()), op,
                    ": layout_key PA_BSND needs block_table");
  auto [indices, values] =
      indexerOutputs(op, query, key, weights, layout_query, layout_key, sparse_count, sparse_mode, return_value);
  EXEC_NPU_CMD(aclnnLightningIndexer, query, key, weights, actual_seq_lengths_query, actual_seq_lengths_key,
               block_table, q_layout, k_layout, sparse_count, sparse_mode, pre_tokens, next_tokens, return_value,
               indices, values);
  return std::make_tuple(indices, values);
}

std::tuple<at::Tensor, at::Tensor> npu_lightning_indexer_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& weights,
    const std::optional<at::Tensor>& actual_seq_lengths_query, const std::optional<at::Tensor>& actual_seq_lengths_key,
    const std::optional<at::Tensor>& block_table, c10::string_view layout_query, c10::string_view layout_key,
    int64_t sparse_count, int64_t sparse_mode, int64_t pre_tokens, int64_t next_tokens, bool return_value) {
  return indexerOutputs("npu_lightning_indexer", query, key, weights, layout_query, layout_key, sparse_count,
                        sparse_mode, return_value);
}

at::Tensor npu_quant_lightning_indexer(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& weights, const at::Tensor& query_dequant_scale,
    const at::Tensor& key_dequant_scale, int64_t query_quant_mode, int64_t key_quant_mode,
    const std::optional<at::Tensor>& actual_seq_lengths_query, const std::optional<at::Tensor>& actual_seq_lengths_key,
    const std::optional<at::Tensor>& block_table, c10::string_view layout_query, c10::string_view layout_key,
    int64_t sparse_count, int64_t sparse_mode, int64_t pre_tokens, int64_t next_tokens,
    std::optional<int64_t> query_dtype, std::optional<int64_t> key_dtype) {
  const char* op = "npu_quant_lightning_indexer";
  checkIndexType(op, actual_seq_lengths_query, "actual_seq_lengths_query");
  checkIndexType(op, actual_seq_lengths_key, "actual_seq_lengths_key");
  checkIndexType(op, block_table, "block_table");
  const std::string q_layout(layout_query), k_layout(layout_key);
  TORCH_CHECK_VALUE(q_layout != "TND" || (actual_seq_lengths_query.has_value() && actual_seq_lengths_query->defined()),
                    op, ": layout_query TND needs actual_seq_lengths_query (prefix sums)");
  TORCH_CHECK_VALUE(k_layout == "BSND" || (actual_seq_lengths_key.has_value() && actual_seq_lengths_key->defined()),
                    op, ": layout_key ", k_layout, " needs actual_seq_lengths_key");
  TORCH_CHECK_VALUE(k_layout != "PA_BSND" || (block_table.has_value() && block_table->defined()), op,
                    ": layout_key PA_BSND needs block_table");
  at::Tensor indices = quantIndexerOutput(query, key, weights, query_dequant_scale, key_dequant_scale,
                                          query_quant_mode, key_quant_mode, layout_query, layout_key, sparse_count,
                                          sparse_mode, query_dtype, key_dtype);
  EXEC_NPU_CMD(aclnnQuantLightningIndexer, query, key, weights, query_dequant_scale, key_dequant_scale,
               actual_seq_lengths_query, actual_seq_lengths_key, block_table, query_quant_mode, key_quant_mode,
               q_layout, k_layout, sparse_count, sparse_mode, pre_tokens, next_tokens, indices);
  return indices;
}

at::Tensor npu_quant_lightning_indexer_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& weights, const at::Tensor& query_dequant_scale,
    const at::Tensor& key_dequant_scale, int64_t query_quant_mode, int64_t key_quant_mode,
    const std::optional<at::Tensor>& actual_seq_lengths_query, const std::optional<at::Tensor>& actual_seq_lengths_key,
    const std::optional<at::Tensor>& block_table, c10::string_view layout_query, c10::string_view layout_key,
    int64_t sparse_count, int64_t sparse_mode, int64_t pre_tokens, int64_t next_tokens,
    std::optional<int64_t> query_dtype, std::optional<int64_t> key_dtype) {
  return quantIndexerOutput(query, key, weights, query_dequant_scale, key_dequant_scale, query_quant_mode,
                            key_quant_mode, layout_query, layout_key, sparse_count, sparse_mode, query_dtype,
                            key_dtype);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_sparse_flash_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& sparse_indices,
    double scale_value, const std::optional<at::Tensor>& block_table,
    const std::optional<at::Tensor>& actual_seq_lengths_query, const std::optional<at::Tensor>& actual_seq_lengths_kv,
    const std::optional<at::Tensor>& query_rope, const std::optional<at::Tensor>& key_rope, int64_t sparse_block_size,
    c10::string_view layout_query, c10::string_view layout_kv, int64_t sparse_mode, int64_t pre_tokens,
    int64_t next_tokens, int64_t attention_mode, bool return_softmax_lse, const std::optional<at::Tensor>& sinks) {
  const char* op = "npu_sparse_flash_attention";
  TORCH_CHECK_VALUE(sparse_block_size > 0, op, ": sparse_block_size must be positive, got ", sparse_block_size);
  TORCH_CHECK_VALUE(sparse_mode == 0 || sparse_mode == 3, op, ": sparse_mode must be 0 or 3, got ", sparse_mode);
  TORCH_CHECK_VALUE(attention_mode == 0 || attention_mode == 2, op, ": attention_mode must be 0 or 2, got ",
                    attention_mode);
  const bool has_query_rope = query_rope.has_value() && query_rope->defined();
  const bool has_key_rope = key_rope.has_value() && key_rope->defined();
  TORCH_CHECK_VALUE(has_query_rope == has_key_rope, op, ": query_rope and key_rope must be given together");
  checkIndexType(op, block_table, "block_table");
  checkIndexType(op, actual_seq_lengths_query, "actual_seq_lengths_query");
  checkIndexType(op, actual_seq_lengths_kv, "actual_seq_lengths_kv");
  const std::string q_layout(layout_query), kv_layout(layout_kv);
  TORCH_CHECK_VALUE(q_layout != "TND" || (actual_seq_lengths_query.has_value() && actual_seq_lengths_query->defined()),
                    op, ": layout_query TND needs actual_seq_lengths_query (prefix sums)");
  TORCH_CHECK_VALUE(kv_layout == "BSND" || (actual_seq_lengths_kv.has_value() && actual_seq_lengths_kv->defined()),
                    op, ": layout_kv ", kv_layout, " needs actual_seq_lengths_kv");
  TORCH_CHECK_VALUE(kv_layout != "PA_BSND" || (block_table.has_value() && block_table->defined()), op,
                    ": layout_kv PA_BSND needs block_table");
  const bool has_sinks = sinks.has_value() && sinks->defined();
  TORCH_CHECK_TYPE(!has_sinks || sinks->scalar_type() == at::kFloat, op, ": sinks must be float32, got ",
                   has_sinks ? sinks->scalar_type() : at::kFloat);
  TORCH_CHECK_VALUE(!has_sinks || (sinks->dim() == 1 && sinks->size(0) == query.size(-2)), op,
                    ": sinks must be [N1=", query.size(-2), "]");
  auto [out, softmax_max, softmax_sum] = sparseAttentionOutputs(op, query, key, value, sparse_indices, layout_query,
                                                                layout_kv, return_softmax_lse);
  if (has_sinks) {
    EXEC_NPU_CMD(aclnnSparseFlashAttentionV2, query, key, value, sparse_indices, block_table,
                 actual_seq_lengths_query, actual_seq_lengths_kv, query_rope, key_rope, sinks, scale_value,
                 sparse_block_size, q_layout, kv_layout, sparse_mode, pre_tokens, next_tokens, attention_mode,
                 return_softmax_lse, out, softmax_max, softmax_sum);
  } else {
    EXEC_NPU_CMD(aclnnSparseFlashAttention, query, key, value, sparse_indices, block_table, actual_seq_lengths_query,
                 actual_seq_lengths_kv, query_rope, key_rope, scale_value, sparse_block_size, q_layout, kv_layout,
                 sparse_mode, pre_tokens, next_tokens, attention_mode, return_softmax_lse, out, softmax_max,
                 softmax_sum);
  }
  return std::make_tuple(out, softmax_max, softmax_sum);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_sparse_flash_attention_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& sparse_indices,
    double scale_value, const std::optional<at::Tensor>& block_table,
    const std::optional<at::Tensor>& actual_seq_lengths_query, const std::optional<at::Tensor>& actual_seq_lengths_kv,
    const std::optional<at::Tensor>& query_rope, const std::optional<at::Tensor>& key_rope, int64_t sparse_block_size,
    c10::string_view layout_query, c10::string_view layout_kv, int64_t sparse_mode, int64_t pre_tokens,
    int64_t next_tokens, int64_t attention_mode, bool return_softmax_lse, const std::optional<at::Tensor>& sinks) {
  return sparseAttentionOutputs("npu_sparse_flash_attention", query, key, value, sparse_indices, layout_query,
                                layout_kv, return_softmax_lse);
}

}  // namespace at_npu::native
