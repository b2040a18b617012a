// NsaSelectAttentionKernelNpu.cpp - NSA selected-block attention: npu_nsa_select_attention (training, TND), its
// gradient npu_nsa_select_attention_grad and npu_nsa_select_attention_infer (paged KV cache), with Meta kernels.
#include <ATen/ops/empty.h>

#include <string>
#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

namespace {

constexpr int64_t kSoftmaxStatWidth = 8;  // the chip stores each row's max / sum repeated 8 times

void checkFloatTriple(const char* op, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value) {
  const at::ScalarType type = query.scalar_type();
  TORCH_CHECK_TYPE(type == at::kHalf || type == at::kBFloat16 || type == at::kFloat, op,
                   ": query must be float16, bfloat16 or float32, got ", type);
  TORCH_CHECK_TYPE(key.scalar_type() == type && value.scalar_type() == type, op,
                   ": key and value must have query's dtype ", type, ", got ", key.scalar_type(), "/",
                   value.scalar_type());
}

void checkLengths(const char* op, at::OptionalIntArrayRef q_len, at::OptionalIntArrayRef kv_len, const char* q_name,
                  const char* kv_name) {
  TORCH_CHECK_VALUE(q_len.has_value() == kv_len.has_value() && (!q_len.has_value() || q_len->size() == kv_len->size()),
                    op, ": ", q_name, " and ", kv_name, " must be given together with one prefix sum per sample");
}

// Shared checks of the training op and its gradient: TND tensors, head counts, topk shape, mask.
void checkSelectTraining(const char* op, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const at::Tensor& topk_indices, int64_t head_num, int64_t select_block_size,
                         int64_t select_block_count, const std::optional<at::Tensor>& atten_mask,
                         at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_kvlen) {
  TORCH_CHECK_VALUE(query.dim() == 3 && key.dim() == 3 && value.dim() == 3, op,
                    ": query, key and value must be TND [T, N, D], got ", query.sizes(), ", ", key.sizes(), ", ",
                    value.sizes());
  checkFloatTriple(op, query, key, value);
  TORCH_CHECK_VALUE(query.size(1) == head_num, op, ": head_num (", head_num, ") must equal query's N (",
                    query.size(1), ")");
  const int64_t kv_heads = key.size(1);
  TORCH_CHECK_VALUE(kv_heads > 0 && head_num % kv_heads == 0 && value.size(1) == kv_heads &&
                        value.size(0) == key.size(0),
                    op, ": query heads (", head_num, ") must be a multiple of key/value heads (", kv_heads,
                    ") and value must be [T2, N2, Dv]");
  TORCH_CHECK_VALUE(key.size(2) == query.size(2), op, ": query and key head dims differ (", query.size(2), " vs ",
                    key.size(2), ")");
  TORCH_CHECK_VALUE(select_block_size > 0 && select_block_count > 0, op,
                    ": select_block_size and select_block_count must be positive, got ", select_block_size, "/",
                    select_block_count);
  TORCH_CHECK_TYPE(topk_indices.scalar_type() == at::kInt, op, ": topk_indices must be int32, got ",
                   topk_indices.scalar_type());
  TORCH_CHECK_VALUE(topk_indices.dim() == 3 && topk_indices.size(0) == query.size(0) &&
                        topk_indices.size(1) == kv_heads && topk_indices.size(2) == select_block_count,
                    op, ": topk_indices must be [T1=", query.size(0), ", N2=", kv_heads,
                    ", select_block_count=", select_block_count, "], got ", topk_indices.sizes());
  const bool has_mask = atten_mask.has_value() && atten_mask->defined();
  TORCH_CHECK_TYPE(!has_mask || atten_mask->scalar_type() == at::kBool || atten_mask->scalar_type() == at::kByte,
                   op, ": atten_mask must be bool or uint8 (it selects the causal mask)");
  checkLengths(op, actual_seq_qlen, actual_seq_kvlen, "actual_seq_qlen", "actual_seq_kvlen");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> selectOutputs(const at::Tensor& query, const at::Tensor& value) {
  const std::vector<int64_t> stats = {query.size(0), query.size(1), kSoftmaxStatWidth};
  return std::make_tuple(at::empty({query.size(0), query.size(1), value.size(2)}, query.options()),
                         at::empty(stats, query.options().dtype(at::kFloat)),
                         at::empty(stats, query.options().dtype(at::kFloat)));
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_nsa_select_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& topk_indices,
    double scale_value, int64_t head_num, int64_t select_block_size, int64_t select_block_count,
    const std::optional<at::Tensor>& atten_mask, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_seq_kvlen) {
  checkSelectTraining("npu_nsa_select_attention", query, key, value, topk_indices, head_num, select_block_size,
                      select_block_count, atten_mask, actual_seq_qlen, actual_seq_kvlen);
  auto [attention_out, softmax_max, softmax_sum] = selectOutputs(query, value);
  const std::string layout = "TND";
  const int64_t sparse_mode = 2;  // left-up causal when atten_mask is given
  EXEC_NPU_CMD(aclnnNsaSelectedAttention, query, key, value, topk_indices, atten_mask, actual_seq_qlen,
               actual_seq_kvlen, scale_value, head_num, layout, sparse_mode, select_block_size, select_block_count,
               softmax_max, softmax_sum, attention_out);
  return std::make_tuple(attention_out, softmax_max, softmax_sum);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_nsa_select_attention_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& topk_indices,
    double scale_value, int64_t head_num, int64_t select_block_size, int64_t select_block_count,
    const std::optional<at::Tensor>& atten_mask, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_seq_kvlen) {
  checkSelectTraining("npu_nsa_select_attention", query, key, value, topk_indices, head_num, select_block_size,
                      select_block_count, atten_mask, actual_seq_qlen, actual_seq_kvlen);
  return selectOutputs(query, value);
}

namespace {

void checkSelectGrad(const at::Tensor& grad, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                     const at::Tensor& attention_out, const at::Tensor& softmax_max, const at::Tensor& softmax_sum,
                     const at::Tensor& topk_indices, int64_t head_num, int64_t select_block_size,
                     int64_t select_block_count, const std::optional<at::Tensor>& atten_mask,
                     at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_kvlen) {
  const char* op = "npu_nsa_select_attention_grad";
  checkSelectTraining(op, query, key, value, topk_indices, head_num, select_block_size, select_block_count,
                      atten_mask, actual_seq_qlen, actual_seq_kvlen);
  const std::vector<int64_t> out_shape = {query.size(0), query.size(1), value.size(2)};
  TORCH_CHECK_VALUE(grad.sizes() == at::IntArrayRef(out_shape) && attention_out.sizes() == grad.sizes(), op,
                    ": grad and attention_out must be [T1, N1, Dv] = ", at::IntArrayRef(out_shape));
  TORCH_CHECK_VALUE(softmax_max.dim() == 3 && softmax_max.size(0) == query.size(0) &&
                        softmax_max.size(1) == query.size(1) && softmax_sum.sizes() == softmax_max.sizes(),
                    op, ": softmax_max and softmax_sum must be the forward's [T1, N1, 8] statistics");
  TORCH_CHECK_TYPE(softmax_max.scalar_type() == at::kFloat && softmax_sum.scalar_type() == at::kFloat, op,
                   ": softmax_max and softmax_sum must be float32");
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_nsa_select_attention_grad(
    const at::Tensor& grad, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attention_out, const at::Tensor& softmax_max, const at::Tensor& softmax_sum,
    const at::Tensor& topk_indices, double scale_value, int64_t head_num, int64_t select_block_size,
    int64_t select_block_count, const std::optional<at::Tensor>& atten_mask, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_seq_kvlen) {
  checkSelectGrad(grad, query, key, value, attention_out, softmax_max, softmax_sum, topk_indices, head_num,
                  select_block_size, select_block_count, atten_mask, actual_seq_qlen, actual_seq_kvlen);
  at::Tensor query_grad = at::empty(query.sizes(), query.options());
  at::Tensor key_grad = at::empty(key.sizes(), key.options());
  at::Tensor value_grad = at::empty(value.sizes(), value.options());
  const std::string layout = "TND";
  const int64_t sparse_mode = 2;
  EXEC_NPU_CMD(aclnnNsaSelectedAttentionGrad, query, key, value, attention_out, grad, softmax_max, softmax_sum,
               topk_indices, actual_seq_qlen, actual_seq_kvlen, atten_mask, scale_value, select_block_size,
               select_block_count, head_num, layout, sparse_mode, query_grad, key_grad, value_grad);
  return std::make_tuple(query_grad, key_grad, value_grad);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_nsa_select_attention_grad_meta(
    const at::Tensor& grad, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attention_out, const at::Tensor& softmax_max, const at::Tensor& softmax_sum,
    const at::Tensor& topk_indices, double scale_value, int64_t head_num, int64_t select_block_size,
    int64_t select_block_count, const std::optional<at::Tensor>& atten_mask, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_seq_kvlen) {
  checkSelectGrad(grad, query, key, value, attention_out, softmax_max, softmax_sum, topk_indices, head_num,
                  select_block_size, select_block_count, atten_mask, actual_seq_qlen, actual_seq_kvlen);
  return std::make_tuple(at::empty(query.sizes(), query.options()), at::empty(key.sizes(), key.options()),
                         at::empty(value.sizes(), value.options()));
}

namespace {

// Output of the inference form: BSH [B, S1, N1 * Dv], TND [T, N1, Dv], BSND [B, S1, N1, Dv], in query's dtype.
at::Tensor selectInferOutput(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                             const at::Tensor& topk_indices, int64_t head_num, int64_t key_value_head_num,
                             int64_t select_block_size, int64_t select_block_count, int64_t page_block_size,
                             c10::string_view layout, const std::optional<at::Tensor>& atten_mask,
                             const std::optional<at::Tensor>& block_table, at::OptionalIntArrayRef actual_seq_kvlen) {
  const char* op = "npu_nsa_select_attention_infer";
  const std::string layout_str(layout);
  TORCH_CHECK_VALUE(layout_str == "BSH" || layout_str == "BSND" || layout_str == "TND", op,
                    ": layout must be 'BSH', 'BSND' or 'TND', got '", layout_str, "'");
  checkFloatTriple(op, query, key, value);
  TORCH_CHECK_VALUE(head_num > 0 && key_value_head_num > 0 && head_num % key_value_head_num == 0, op,
                    ": head_num (", head_num, ") must be a positive multiple of key_value_head_num (",
                    key_value_head_num, ")");
  TORCH_CHECK_VALUE(select_block_size > 0 && select_block_count > 0 && page_block_size > 0, op,
                    ": select_block_size, select_block_count and page_block_size must be positive");
  TORCH_CHECK_VALUE(!(atten_mask.has_value() && atten_mask->defined()), op,
                    ": atten_mask is reserved in the inference form (no mask is applied); pass None");
  TORCH_CHECK_VALUE(block_table.has_value() && block_table->defined() && block_table->dim() == 2, op,
                    ": block_table [B, max blocks] is required: key/value are a paged cache");
  TORCH_CHECK_TYPE(block_table->scalar_type() == at::kInt, op, ": block_table must be int32");
  TORCH_CHECK_VALUE(actual_seq_kvlen.has_value() && static_cast<int64_t>(actual_seq_kvlen->size()) ==
                                                        block_table->size(0),
                    op, ": actual_seq_kvlen must give one kv length per batch (", block_table->size(0), ")");
  TORCH_CHECK_TYPE(topk_indices.scalar_type() == at::kInt, op, ": topk_indices must be int32, got ",
                   topk_indices.scalar_type());
  TORCH_CHECK_VALUE(topk_indices.size(-1) == select_block_count && topk_indices.size(-2) == key_value_head_num, op,
                    ": topk_indices must end in [key_value_head_num, select_block_count], got ",
                    topk_indices.sizes());
  const int64_t rank = layout_str == "BSND" ? 4 : 3;
  TORCH_CHECK_VALUE(query.dim() == rank && key.dim() == rank && value.dim() == rank, op, ": query, key and value must be ",
                    rank, "-D for layout ", layout_str);
  TORCH_CHECK_VALUE(key.size(1) == page_block_size && value.size(1) == page_block_size, op,
                    ": key/value must be paged [blocks, page_block_size=", page_block_size, ", ...]");
  if (layout_str == "BSND") {
    return at::empty({query.size(0), query.size(1), query.size(2), value.size(3)}, query.options());
  }
  TORCH_CHECK_VALUE(value.size(2) % key_value_head_num == 0, op, ": value hidden size (", value.size(2),
                    ") must split into key_value_head_num heads");
  const int64_t dv = value.size(2) / key_value_head_num;
  if (layout_str == "BSH") {
    return at::empty({query.size(0), query.size(1), head_num * dv}, query.options());
  }
  return at::empty({query.size(0), query.size(1), dv}, query.options());
}

}  // namespace

at::Tensor npu_nsa_select_attention_infer(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                          const at::Tensor& topk_indices, double scale_value, int64_t head_num,
                                          int64_t key_value_head_num, int64_t select_block_size,
                                          int64_t select_block_count, int64_t page_block_size, c10::string_view layout,
                                          const std::optional<at::Tensor>& atten_mask,
                                          const std::optional<at::Tensor>& block_table,
                                          at::OptionalIntArrayRef actual_seq_qlen,
                                          at::OptionalIntArrayRef actual_seq_kvlen) {
  at::Tensor out = selectInferOutput(query, key, value, topk_indices, head_num, key_value_head_num, select_block_size,
                                     select_block_count, page_block_size, layout, atten_mask, block_table,
                                     actual_seq_kvlen);
  const std::string layout_str(layout);
  const int64_t sparse_mode = 0;
  EXEC_NPU_CMD(aclnnNsaSelectedAttentionInfer, query, key, value, topk_indices, atten_mask, block_table,
               actual_seq_qlen, actual_seq_kvlen, layout_str, head_num, key_value_head_num, select_block_size,
               select_block_count, page_block_size, scale_value, sparse_mode, out);
  return out;
}

at::Tensor npu_nsa_select_attention_infer_meta(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                               const at::Tensor& topk_indices, double scale_value, int64_t head_num,
                                               int64_t key_value_head_num, int64_t select_block_size,
                                               int64_t select_block_count, int64_t page_block_size,
                                               c10::string_view layout, const std::optional<at::Tensor>& atten_mask,
                                               const std::optional<at::Tensor>& block_table,
                                               at::OptionalIntArrayRef actual_seq_qlen,
                                               at::OptionalIntArrayRef actual_seq_kvlen) {
  return selectInferOutput(query, key, value, topk_indices, head_num, key_value_head_num, select_block_size,
                           select_block_count, page_block_size, layout, atten_mask, block_table, actual_seq_kvlen);
}

}  // namespace at_npu::native
