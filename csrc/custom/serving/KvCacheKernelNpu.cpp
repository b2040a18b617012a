// KvCacheKernelNpu.cpp - paged KV caches of serving engines: npu_scatter_pa_kv_cache (tokens into their
// slots, caches updated in place) and npu_gather_pa_kv_cache (sequences back through block tables) on the
// aclnnScatterPaKvCache / aclnnGatherPaKvCache device ops, with their functional forms.
#include <ATen/ops/empty_like.h>

#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/FormatHelper.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr int64_t kFractalNz = 29;

std::string scatterMode(const std::optional<c10::string_view>& cache_mode) {
  const std::string mode = cache_mode.has_value() ? std::string(*cache_mode) : "Norm";
  TORCH_CHECK_VALUE(mode == "Norm" || mode == "PA_NZ",
                    "npu_scatter_pa_kv_cache: cache_mode must be 'Norm' (ND caches [blocks, block_size, N, D]) or "
                    "'PA_NZ' ([blocks, N * D / C, block_size, C]), got '", mode, "'");
  return mode;
}

void scatter(const at::Tensor& key, const at::Tensor& value, const at::Tensor& key_cache, const at::Tensor& value_cache,
             const at::Tensor& slot_mapping, const std::optional<at::Tensor>& compress_lens,
             const std::optional<at::Tensor>& compress_seq_offsets, const std::optional<at::Tensor>& seq_lens,
             const std::string& mode) {
  const std::string scatter_mode = "None";
  const std::vector<int64_t> strides{1, 1}, offsets{0, 0};
  EXEC_NPU_CMD(aclnnScatterPaKvCache, key, key_cache, slot_mapping, value, value_cache, compress_lens,
               compress_seq_offsets, seq_lens, mode, scatter_mode, at::IntArrayRef(strides), at::IntArrayRef(offsets));
}

// The gather reads an NZ-format cache as the fractal layout, any other as ND.
std::string gatherMode(const at::Tensor& key_cache) {
  return npuFormatOf(key_cache) == kFractalNz ? "PA_NZ" : "Norm";
}

}  // namespace

void npu_scatter_pa_kv_cache(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                             at::Tensor& value_cache, const at::Tensor& slot_mapping,
                             const std::optional<at::Tensor>& compress_lens,
                             const std::optional<at::Tensor>& compress_seq_offsets,
                             const std::optional<at::Tensor>& seq_lens, std::optional<c10::string_view> cache_mode) {
  scatter(key, value, key_cache, value_cache, slot_mapping, compress_lens, compress_seq_offsets, seq_lens,
          scatterMode(cache_mode));
}

void npu_scatter_pa_kv_cache_meta(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                                  at::Tensor& value_cache, const at::Tensor& slot_mapping,
                                  const std::optional<at::Tensor>& compress_lens,
                                  const std::optional<at::Tensor>& compress_seq_offsets,
                                  const std::optional<at::Tensor>& seq_lens,
                                  std::optional<c10::string_view> cache_mode) {
  scatterMode(cache_mode);
}

std::tuple<at::Tensor, at::Tensor> npu_scatter_pa_kv_cache_functional(
    const at::Tensor& key, const at::Tensor& value, const at::Tensor& key_cache, const at::Tensor& value_cache,
    const at::Tensor& slot_mapping, const std::optional<at::Tensor>& compress_lens,
    const std::optional<at::Tensor>& compress_seq_offsets, const std::optional<at::Tensor>& seq_lens,
    std::optional<c10::string_view> cache_mode) {
  at::Tensor k = key_cache.clone(at::MemoryFormat::Contiguous), v = value_cache.clone(at::MemoryFormat::Contiguous);
  scatter(key, value, k, v, slot_mapping, compress_lens, compress_seq_offsets, seq_lens, scatterMode(cache_mode));
  return {k, v};
}

std::tuple<at::Tensor, at::Tensor> npu_scatter_pa_kv_cache_functional_meta(
    const at::Tensor& key, const at::Tensor& value, const at::Tensor& key_cache, const at::Tensor& value_cache,
    const at::Tensor& slot_mapping, const std::optional<at::Tensor>& compress_lens,
    const std::optional<at::Tensor>& compress_seq_offsets, const std::optional<at::Tensor>& seq_lens,
    std::optional<c10::string_view> cache_mode) {
  scatterMode(cache_mode);
  return {at::empty_like(key_cache, at::MemoryFormat::Contiguous), at::empty_like(value_cache, at::MemoryFormat::Contiguous)};
}

void npu_gather_pa_kv_cache(const at::Tensor& key_cache, const at::Tensor& value_cache, const at::Tensor& block_tables,
                            const at::Tensor& seq_lens, at::Tensor& key, at::Tensor& value,
                            const std::optional<at::Tensor>& seq_offset, bool is_seq_lens_cumsum) {
  const std::string mode = gatherMode(key_cache);
  EXEC_NPU_CMD(aclnnGatherPaKvCache, key_cache, value_cache, block_tables, seq_lens, key, value, seq_offset, mode,
               is_seq_lens_cumsum);
}

void npu_gather_pa_kv_cache_meta(const at::Tensor& key_cache, const at::Tensor& value_cache,
                                 const at::Tensor& block_tables, const at::Tensor& seq_lens, at::Tensor& key,
                                 at::Tensor& value, const std::optional<at::Tensor>& seq_offset,
                                 bool is_seq_lens_cumsum) {}

std::tuple<at::Tensor, at::Tensor> npu_gather_pa_kv_cache_functional(
    const at::Tensor& key_cache, const at::Tensor& value_cache, const at::Tensor& block_tables,
    const at::Tensor& seq_lens, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& seq_offset, bool is_seq_lens_cumsum) {
  at::Tensor k = key.clone(at::MemoryFormat::Contiguous), v = value.clone(at::MemoryFormat::Contiguous);
  const std::string mode = gatherMode(key_cache);
  EXEC_NPU_CMD(aclnnGatherPaKvCache, key_cache, value_cache, block_tables, seq_lens, k, v, seq_offset, mode,
               is_seq_lens_cumsum);
  return {k, v};
}

std::tuple<at::Tensor, at::Tensor> npu_gather_pa_kv_cache_functional_meta(
    const at::Tensor& key_cache, const at::Tensor& value_cache, const at::Tensor& block_tables,
    const at::Tensor& seq_lens, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& seq_offset, bool is_seq_lens_cumsum) {
  return {at::empty_like(key, at::MemoryFormat::Contiguous), at::empty_like(value, at::MemoryFormat::Contiguous)};
}

}  // namespace at_npu::native
