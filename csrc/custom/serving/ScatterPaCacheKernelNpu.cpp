// ScatterPaCacheKernelNpu.cpp - npu_scatter_pa_cache (one paged cache: each token's key written into its slot,
// key_cache updated in place and returned) on aclnnScatterPaCache.
#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

void checkScatterPaCache(const at::Tensor& key, const at::Tensor& slot_mapping, const at::Tensor& key_cache,
                         bool compressed) {
  const char* op = "npu_scatter_pa_cache";
  TORCH_CHECK_VALUE(!compressed, op, ": the compressed form (compress_lens, compress_seq_offsets, seq_lens) is not ",
                    "supported; pass None");
  TORCH_CHECK_VALUE(key.dim() == 3 && key_cache.dim() == 4 && key_cache.size(2) == key.size(1) &&
                        key_cache.size(3) == key.size(2),
                    op, ": key must be [tokens, N, D] and key_cache [blocks, block_size, N, D], got ", key.sizes(),
                    " and ", key_cache.sizes());
  TORCH_CHECK_VALUE(slot_mapping.dim() == 1 && slot_mapping.size(0) == key.size(0), op,
                    ": slot_mapping must be [tokens] = [", key.size(0), "], got ", slot_mapping.sizes());
  TORCH_CHECK_TYPE(slot_mapping.scalar_type() == at::kInt || slot_mapping.scalar_type() == at::kLong, op,
                   ": slot_mapping must be int32 or int64, got ", slot_mapping.scalar_type());
  TORCH_CHECK_TYPE(key.scalar_type() == key_cache.scalar_type(), op, ": key and key_cache must have one dtype, got ",
                   key.scalar_type(), " and ", key_cache.scalar_type());
}

}  // namespace

at::Tensor& npu_scatter_pa_cache_value(const at::Tensor& key, const at::Tensor& slot_mapping,
                                       const std::optional<at::Tensor>& compress_lens,
                                       const std::optional<at::Tensor>& compress_seq_offsets,
                                       const std::optional<at::Tensor>& seq_lens, at::Tensor& key_cache) {
  checkScatterPaCache(key, slot_mapping, key_cache,
                      present(compress_lens) || present(compress_seq_offsets) || present(seq_lens));
  const std::string cache_mode = "Norm";  // the only layout torch_npu passes for this op
  EXEC_NPU_CMD(aclnnScatterPaCache, key, key_cache, slot_mapping, compress_lens, compress_seq_offsets, seq_lens,
               cache_mode);
  return key_cache;
}

at::Tensor& npu_scatter_pa_cache_value_meta(const at::Tensor& key, const at::Tensor& slot_mapping,
                                            const std::optional<at::Tensor>& compress_lens,
                                            const std::optional<at::Tensor>& compress_seq_offsets,
                                            const std::optional<at::Tensor>& seq_lens, at::Tensor& key_cache) {
  return key_cache;
}

}  // namespace at_npu::native
