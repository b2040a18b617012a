// NsaCompressAttentionInferKernelNpu.cpp - npu_nsa_compress_attention_infer: NSA decode-time attention over a paged
// cache of compressed key/value tokens plus the top-k select blocks, on aclnnNsaCompressAttentionInfer. Inference only.
#include <ATen/ops/empty.h>

#include <string>
#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_nsa_compress_attention_infer";

bool given(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined();
}

// Checks everything knowable on the host and returns (output, topk_indices) allocated like query:
// TND: [B, N1, Dv] and int32 [B, N2, select_block_count]; BSND: [B, 1, N1, Dv] and [B, 1, N2, select_block_count].
std::tuple<at::Tensor, at::Tensor> compressInferOutputs(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
    int64_t key_value_head_num, int64_t select_block_size, int64_t select_block_count, int64_t page_block_size,
    int64_t compress_block_size, int64_t compress_stride, c10::string_view layout,
    const std::optional<at::Tensor>& atten_mask, const std::optional<at::Tensor>& block_table,
    const std::optional<at::Tensor>& topk_mask, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_cmp_seq_kvlen, at::OptionalIntArrayRef actual_sel_seq_kvlen) {
  const std::string layout_str(layout);
  TORCH_CHECK_VALUE(layout_str == "TND" || layout_str == "BSND", kOp, ": layout must be 'TND' or 'BSND', got '",
                    layout_str, "'");
  // Upstream documents these four as not supported yet; refusing them beats silently ignoring a mask.
  TORCH_CHECK_VALUE(!given(atten_mask), kOp, ": atten_mask is not supported (a single decode token needs no mask); "
                    "pass None");
  TORCH_CHECK_VALUE(!given(topk_mask), kOp, ": topk_mask is not supported; pass None");
  TORCH_CHECK_VALUE(!actual_seq_qlen.has_value(), kOp, ": actual_seq_qlen is not supported (each batch has exactly "
                    "one query token); pass None");
  TORCH_CHECK_VALUE(!actual_sel_seq_kvlen.has_value(), kOp, ": actual_sel_seq_kvlen is not supported; pass None");

  const at::ScalarType dtype = query.scalar_type();
  TORCH_CHECK_TYPE(dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat, kOp,
                   ": query must be float16 or bfloat16 (or float32), got ", dtype);
  TORCH_CHECK_TYPE(key.scalar_type() == dtype && value.scalar_type() == dtype, kOp,
                   ": key and value must have query's dtype ", dtype, ", got ", key.scalar_type(), " and ",
                   value.scalar_type());
  TORCH_CHECK_VALUE(head_num > 0 && key_value_head_num > 0 && head_num % key_value_head_num == 0, kOp,
                    ": head_num (", head_num, ") must be a positive multiple of key_value_head_num (",
                    key_value_head_num, ")");
  const bool bsnd = layout_str == "BSND";
  TORCH_CHECK_VALUE(query.dim() == (bsnd ? 4 : 3), kOp, ": query must be ",
                    bsnd ? "[B, 1, N1, D] for layout BSND" : "[B, N1, D] for layout TND", ", got ", query.sizes());
  TORCH_CHECK_VALUE(!bsnd || query.size(1) == 1, kOp, ": only one query token per batch is supported (S = 1), got ",
                    query.sizes());
  TORCH_CHECK_VALUE(query.size(-2) == head_num, kOp, ": head_num (", head_num, ") must equal query's N (",
                    query.size(-2), ")");
  TORCH_CHECK_VALUE(page_block_size > 0 && key.dim() == 3 && value.dim() == 3 && key.size(0) == value.size(0) &&
                        key.size(1) == page_block_size && value.size(1) == page_block_size,
                    kOp, ": key and value must be a paged cache [block_num, page_block_size=", page_block_size,
                    ", N2 * D], got ", key.sizes(), " and ", value.sizes());
  const int64_t d = query.size(-1);
  TORCH_CHECK_VALUE(key.size(2) == key_value_head_num * d, kOp, ": key's last dim (", key.size(2),
                    ") must be key_value_head_num * query's head dim = ", key_value_head_num * d);
  TORCH_CHECK_VALUE(value.size(2) % key_value_head_num == 0, kOp, ": value's last dim (", value.size(2),
                    ") must split into key_value_head_num (", key_value_head_num, ") heads");
  TORCH_CHECK_VALUE(compress_stride > 0 && compress_block_size >= compress_stride &&
                        select_block_size >= compress_block_size && select_block_size % compress_stride == 0,
                    kOp, ": need compress_block_size >= compress_stride > 0 and select_block_size >= "
                    "compress_block_size with select_block_size a multiple of compress_stride, got ",
                    compress_block_size, "/", compress_stride, "/", select_block_size);
  TORCH_CHECK_VALUE(select_block_count >= 3, kOp, ": select_block_count must be at least 3 (the first and the last "
                    "two select blocks are always kept), got ", select_block_count);

  const int64_t batch = query.size(0);
  TORCH_CHECK_VALUE(given(block_table), kOp, ": block_table is required: key/value are a paged cache");
  TORCH_CHECK_TYPE(block_table->scalar_type() == at::kInt, kOp, ": block_table must be int32, got ",
                   block_table->scalar_type());
  TORCH_CHECK_VALUE(block_table->dim() == 2 && block_table->size(0) == batch, kOp,
                    ": block_table must be [B=", batch, ", max blocks], got ", block_table->sizes());
  TORCH_CHECK_VALUE(actual_cmp_seq_kvlen.has_value() && static_cast<int64_t>(actual_cmp_seq_kvlen->size()) == batch,
                    kOp, ": actual_cmp_seq_kvlen is required: one compressed kv length per batch (", batch, ")");
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = (*actual_cmp_seq_kvlen)[b];
    TORCH_CHECK_VALUE(len >= 1, kOp, ": actual_cmp_seq_kvlen[", b, "] must be positive, got ", len);
    TORCH_CHECK_VALUE((len + page_block_size - 1) / page_block_size <= block_table->size(1), kOp,
                      ": block_table's rows (", block_table->size(1), " blocks) are too short for ", len,
                      " tokens of page_block_size ", page_block_size);
    // The select blocks a sequence has: its uncompressed length (len - 1) * stride + compress_block_size, rounded up.
    const int64_t blocks = ((len - 1) * compress_stride + compress_block_size + select_block_size - 1) /
                           select_block_size;
    TORCH_CHECK_VALUE(select_block_count <= blocks, kOp, ": select_block_count (", select_block_count,
                      ") exceeds the ", blocks, " select blocks of batch ", b, " (actual_cmp_seq_kvlen ", len,
                      "); lower select_block_count");
  }

  const int64_t dv = value.size(2) / key_value_head_num;
  std::vector<int64_t> out_shape = {batch, head_num, dv};
  std::vector<int64_t> topk_shape = {batch, key_value_head_num, select_block_count};
  if (bsnd) {
    out_shape.insert(out_shape.begin() + 1, 1);
    topk_shape.insert(topk_shape.begin() + 1, 1);
  }
  return std::make_tuple(at::empty(out_shape, query.options()),
                         at::empty(topk_shape, query.options().dtype(at::kInt)));
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_nsa_compress_attention_infer(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, double scale_value, int64_t head_num,
    int64_t key_value_head_num, int64_t select_block_size, int64_t select_block_count, int64_t page_block_size,
    int64_t compress_block_size, int64_t compress_stride, c10::string_view layout,
    const std::optional<at::Tensor>& atten_mask, const std::optional<at::Tensor>& block_table,
    const std::optional<at::Tensor>& topk_mask, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_cmp_seq_kvlen, at::OptionalIntArrayRef actual_sel_seq_kvlen) {
  auto [out, topk_indices] = compressInferOutputs(
      query, key, value, head_num, key_value_head_num, select_block_size, select_block_count, page_block_size,
      compress_block_size, compress_stride, layout, atten_mask, block_table, topk_mask, actual_seq_qlen,
      actual_cmp_seq_kvlen, actual_sel_seq_kvlen);
  const std::string layout_str(layout);
  const at::IntArrayRef cmp_lengths = *actual_cmp_seq_kvlen;
  const at::IntArrayRef sel_lengths = actual_sel_seq_kvlen.value_or(at::IntArrayRef{});
  const int64_t sparse_mode = 0;  // no mask: upstream always passes 0
  EXEC_NPU_CMD(aclnnNsaCompressAttentionInfer, query, key, value, atten_mask, block_table, actual_seq_qlen,
               cmp_lengths, sel_lengths, topk_mask, head_num, key_value_head_num, select_block_size,
               select_block_count, compress_block_size, compress_stride, scale_value, layout_str, page_block_size,
               sparse_mode, out, topk_indices);
  return std::make_tuple(out, topk_indices);
}

std::tuple<at::Tensor, at::Tensor> npu_nsa_compress_attention_infer_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, double scale_value, int64_t head_num,
    int64_t key_value_head_num, int64_t select_block_size, int64_t select_block_count, int64_t page_block_size,
    int64_t compress_block_size, int64_t compress_stride, c10::string_view layout,
    const std::optional<at::Tensor>& atten_mask, const std::optional<at::Tensor>& block_table,
    const std::optional<at::Tensor>& topk_mask, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_cmp_seq_kvlen, at::OptionalIntArrayRef actual_sel_seq_kvlen) {
  return compressInferOutputs(query, key, value, head_num, key_value_head_num, select_block_size, select_block_count,
                              page_block_size, compress_block_size, compress_stride, layout, atten_mask, block_table,
                              topk_mask, actual_seq_qlen, actual_cmp_seq_kvlen, actual_sel_seq_kvlen);
}

}  // namespace at_npu::native
