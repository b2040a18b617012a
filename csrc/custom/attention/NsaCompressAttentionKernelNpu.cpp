// NsaCompressAttentionKernelNpu.cpp - NSA compressed attention with top-k select-block scoring:
// npu_nsa_compress_attention (training, TND) with its Meta kernel, on aclnnNsaCompressAttention.
#include <ATen/ops/empty.h>

#include <string>
#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

namespace {

constexpr int64_t kCompressStatWidth = 8;  // the flash-attention statistics: each row's value repeated 8 times

// attention_out [T1, N1, Dv] (query dtype), topk_indices [T1, N2, select_block_count] int32, softmax_max /
// softmax_sum [T1, N1, 8] float32.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> compressAttentionOutputs(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
    int64_t compress_block_size, int64_t compress_stride, int64_t select_block_size, int64_t select_block_count,
    const std::optional<at::Tensor>& topk_mask, const std::optional<at::Tensor>& atten_mask,
    at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_cmp_seq_kvlen,
    at::OptionalIntArrayRef actual_sel_seq_kvlen) {
  const char* op = "npu_nsa_compress_attention";
  TORCH_CHECK_VALUE(query.dim() == 3 && key.dim() == 3 && value.dim() == 3, op,
                    ": query, key and value must be TND [T, N, D], got ", query.sizes(), ", ", key.sizes(), ", ",
                    value.sizes());
  const at::ScalarType type = query.scalar_type();
  TORCH_CHECK_TYPE(type == at::kHalf || type == at::kBFloat16 || type == at::kFloat, op,
                   ": query must be float16, bfloat16 or float32, got ", type);
  TORCH_CHECK_TYPE(key.scalar_type() == type && value.scalar_type() == type, op,
                   ": key and value must have query's dtype ", type);
  const int64_t kv_heads = key.size(1);
  TORCH_CHECK_VALUE(query.size(1) == head_num, op, ": head_num (", head_num, ") must equal query's N (",
                    query.size(1), ")");
  TORCH_CHECK_VALUE(kv_heads > 0 && head_num % kv_heads == 0 && value.size(1) == kv_heads &&
                        value.size(0) == key.size(0),
                    op, ": query heads must be a multiple of key/value heads, value shaped [T2, N2, Dv]");
  TORCH_CHECK_VALUE(key.size(2) == query.size(2), op, ": query and key head dims differ");
  TORCH_CHECK_VALUE(compress_stride > 0 && compress_block_size > 0 && compress_block_size % compress_stride == 0 &&
                        select_block_size > 0 && select_block_size % compress_stride == 0,
                    op, ": compress_block_size and select_block_size must be positive multiples of compress_stride, "
                        "got ", compress_block_size, "/", select_block_size, " with stride ", compress_stride);
  TORCH_CHECK_VALUE(select_block_count > 0, op, ": select_block_count must be positive, got ", select_block_count);
  TORCH_CHECK_VALUE(actual_seq_qlen.has_value() && actual_cmp_seq_kvlen.has_value() &&
                        actual_sel_seq_kvlen.has_value() && actual_seq_qlen->size() == actual_cmp_seq_kvlen->size() &&
                        actual_seq_qlen->size() == actual_sel_seq_kvlen->size(),
                    op, ": actual_seq_qlen, actual_cmp_seq_kvlen and actual_sel_seq_kvlen are required, one prefix "
                        "sum per sample each");
  for (const auto* mask : {&topk_mask, &atten_mask}) {
    const bool given = mask->has_value() && (*mask)->defined();
    TORCH_CHECK_TYPE(!given || (*mask)->scalar_type() == at::kBool || (*mask)->scalar_type() == at::kByte, op,
                     ": topk_mask / atten_mask must be bool or uint8");
    TORCH_CHECK_VALUE(!given || (*mask)->dim() == 2, op, ": topk_mask / atten_mask must be 2-D [S1, S2]");
  }
  const std::vector<int64_t> stats = {query.size(0), head_num, kCompressStatWidth};
  return std::make_tuple(at::empty({query.size(0), head_num, value.size(2)}, query.options()),
                         at::empty({query.size(0), kv_heads, select_block_count}, query.options().dtype(at::kInt)),
                         at::empty(stats, query.options().dtype(at::kFloat)),
                         at::empty(stats, query.options().dtype(at::kFloat)));
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_nsa_compress_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, double scale_value, int64_t head_num,
    int64_t compress_block_size, int64_t compress_stride, int64_t select_block_size, int64_t select_block_count,
    const std::optional<at::Tensor>& topk_mask, const std::optional<at::Tensor>& atten_mask,
    at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_cmp_seq_kvlen,
    at::OptionalIntArrayRef actual_sel_seq_kvlen) {
  auto [attention_out, topk_indices, softmax_max, softmax_sum] = compressAttentionOutputs(
      query, key, value, head_num, compress_block_size, compress_stride, select_block_size, select_block_count,
      topk_mask, atten_mask, actual_seq_qlen, actual_cmp_seq_kvlen, actual_sel_seq_kvlen);
  const std::string layout = "TND";
  const int64_t sparse_mode = 1;  // the atten_mask, when given, is the whole mask
  EXEC_NPU_CMD(aclnnNsaCompressAttention, query, key, value, atten_mask, topk_mask, actual_seq_qlen,
               actual_cmp_seq_kvlen, actual_sel_seq_kvlen, scale_value, head_num, layout, sparse_mode,
               compress_block_size, compress_stride, select_block_size, select_block_count, softmax_max, softmax_sum,
               attention_out, topk_indices);
  return std::make_tuple(attention_out, topk_indices, softmax_max, softmax_sum);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_nsa_compress_attention_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, double scale_value, int64_t head_num,
    int64_t compress_block_size, int64_t compress_stride, int64_t select_block_size, int64_t select_block_count,
    const std::optional<at::Tensor>& topk_mask, const std::optional<at::Tensor>& atten_mask,
    at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_cmp_seq_kvlen,
    at::OptionalIntArrayRef actual_sel_seq_kvlen) {
  return compressAttentionOutputs(query, key, value, head_num, compress_block_size, compress_stride,
                                  select_block_size, select_block_count, topk_mask, atten_mask, actual_seq_qlen,
                                  actual_cmp_seq_kvlen, actual_sel_seq_kvlen);
}

}  // namespace at_npu::native
