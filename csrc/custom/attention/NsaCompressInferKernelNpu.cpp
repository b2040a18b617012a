// NsaCompressInferKernelNpu.cpp - npu_nsa_compress_infer.cache: NSA key/value compression at decode time - the last
// compress_block_size tokens of each paged sequence, weighted per head and summed, written into cache[slot] when the
// sequence just completed a window - on aclnnNsaCompressWithCache. Inference only.
#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_nsa_compress_infer";

void checkCompressInfer(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& slot_mapping,
                        int64_t compress_block_size, int64_t compress_stride, int64_t page_block_size,
                        const std::optional<at::Tensor>& block_table, at::OptionalIntArrayRef actual_seq_len,
                        const at::Tensor& cache) {
  const at::ScalarType dtype = input.scalar_type();
  TORCH_CHECK_TYPE((dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat) &&
                       weight.scalar_type() == dtype && cache.scalar_type() == dtype,
                   kOp, ": input, weight and cache must share one dtype of float16 or bfloat16 (or float32), got ",
                   dtype, ", ", weight.scalar_type(), " and ", cache.scalar_type());
  TORCH_CHECK_VALUE(input.dim() == 4 && input.numel() > 0, kOp, ": input must be a non-empty (block_num, "
                    "page_block_size, head_num, head_dim), got ", input.sizes());
  TORCH_CHECK_VALUE(page_block_size >= 1 && input.size(1) == page_block_size, kOp, ": input's second dimension must "
                    "be page_block_size = ", page_block_size, ", got ", input.sizes());
  TORCH_CHECK_VALUE(compress_block_size >= 1 && compress_stride >= 1, kOp, ": compress_block_size and "
                    "compress_stride must be positive, got ", compress_block_size, " and ", compress_stride);
  const int64_t heads = input.size(2), dim = input.size(3);
  TORCH_CHECK_VALUE(weight.dim() == 2 && weight.size(0) == compress_block_size && weight.size(1) == heads, kOp,
                    ": weight must be (compress_block_size, head_num) = (", compress_block_size, ", ", heads,
                    "), got ", weight.sizes());
  TORCH_CHECK_TYPE(slot_mapping.scalar_type() == at::kInt || slot_mapping.scalar_type() == at::kLong, kOp,
                   ": slot_mapping must be int32, got ", slot_mapping.scalar_type());
  TORCH_CHECK_VALUE(slot_mapping.dim() == 1 && slot_mapping.numel() > 0, kOp, ": slot_mapping must be a non-empty "
                    "[batch], got ", slot_mapping.sizes());
  const int64_t batch = slot_mapping.size(0);
  TORCH_CHECK_VALUE(actual_seq_len.has_value() && static_cast<int64_t>(actual_seq_len->size()) == batch, kOp,
                    ": actual_seq_len must list one length per sequence (", batch, ")");
  TORCH_CHECK_VALUE(block_table.has_value() && block_table->defined(), kOp, ": block_table is needed: it maps each "
                    "sequence's pages to input's blocks");
  TORCH_CHECK_TYPE(block_table->scalar_type() == at::kInt || block_table->scalar_type() == at::kLong, kOp,
                   ": block_table must be int32, got ", block_table->scalar_type());
  TORCH_CHECK_VALUE(block_table->dim() == 2 && block_table->size(0) == batch, kOp, ": block_table must be [batch, "
                    "max_pages] with batch = ", batch, ", got ", block_table->sizes());
  TORCH_CHECK_VALUE(cache.dim() == 3 && cache.size(1) == heads && cache.size(2) == dim, kOp,
                    ": cache must be (slots, head_num, head_dim) = (slots, ", heads, ", ", dim, "), got ",
                    cache.sizes());
}

}  // namespace

at::Tensor& npu_nsa_compress_infer_cache(const at::Tensor& input, const at::Tensor& weight,
                                         const at::Tensor& slot_mapping, int64_t compress_block_size,
                                         int64_t compress_stride, int64_t page_block_size,
                                         const std::optional<at::Tensor>& block_table,
                                         at::OptionalIntArrayRef actual_seq_len, at::Tensor& cache) {
  checkCompressInfer(input, weight, slot_mapping, compress_block_size, compress_stride, page_block_size, block_table,
                     actual_seq_len, cache);
  const at::IntArrayRef lengths = *actual_seq_len;
  const std::string layout = "TND";
  const int64_t seq_len_type = 1;  // per-sequence lengths (not prefix sums), as torch_npu passes them
  EXEC_NPU_CMD(aclnnNsaCompressWithCache, input, weight, slot_mapping, lengths, block_table, layout,
               compress_block_size, compress_stride, seq_len_type, page_block_size, cache);
  return cache;
}

at::Tensor& npu_nsa_compress_infer_cache_meta(const at::Tensor& input, const at::Tensor& weight,
                                              const at::Tensor& slot_mapping, int64_t compress_block_size,
                                              int64_t compress_stride, int64_t page_block_size,
                                              const std::optional<at::Tensor>& block_table,
                                              at::OptionalIntArrayRef actual_seq_len, at::Tensor& cache) {
  checkCompressInfer(input, weight, slot_mapping, compress_block_size, compress_stride, page_block_size, block_table,
                     actual_seq_len, cache);
  return cache;
}

}  // namespace at_npu::native
