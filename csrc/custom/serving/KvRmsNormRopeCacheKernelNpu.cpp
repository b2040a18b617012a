// KvRmsNormRopeCacheKernelNpu.cpp - npu_kv_rmsnorm_rope_cache (MLA's latent KV normalised, rotated and written
// into the KV caches, which it returns updated in place as torch_npu does) on aclnnKvRmsNormRopeCache(V2).
#include <ATen/ops/empty.h>

#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

// k_rope [B, 1, S, Dk] and c_kv [B, 1, S, Dc]: V2 (v of 128 values given) caches the normalised vector and v.
std::pair<std::vector<int64_t>, std::vector<int64_t>> outputShapes(const at::Tensor& kv, const at::Tensor& gamma,
                                                                   const at::Tensor& cos,
                                                                   const std::optional<at::Tensor>& v) {
  TORCH_CHECK_VALUE(kv.dim() == 4 && cos.dim() == 4 && gamma.dim() == 1,
                    "npu_kv_rmsnorm_rope_cache: kv and cos must be 4-D and gamma 1-D, got ", kv.sizes(), ", ",
                    cos.sizes(), ", ", gamma.sizes());
  std::vector<int64_t> k = kv.sizes().vec(), c = kv.sizes().vec();
  if (v.has_value() && v->defined()) {
    k.back() = kv.size(-1);
    c.back() = v->size(-1);
  } else {
    k.back() = cos.size(-1);
    c.back() = gamma.size(0);
  }
  return {k, c};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_kv_rmsnorm_rope_cache(
    const at::Tensor& kv, const at::Tensor& gamma, const at::Tensor& cos, const at::Tensor& sin,
    const at::Tensor& index, const at::Tensor& k_cache, const at::Tensor& ckv_cache,
    const std::optional<at::Tensor>& k_rope_scale, const std::optional<at::Tensor>& c_kv_scale,
    const std::optional<at::Tensor>& k_rope_offset, const std::optional<at::Tensor>& c_kv_offset,
    const std::optional<at::Tensor>& v, double epsilon, c10::string_view cache_mode, bool is_output_kv) {
  auto [k_shape, c_shape] = outputShapes(kv, gamma, cos, v);
  at::Tensor k_rope = at::empty(k_shape, kv.options()), c_kv = at::empty(c_shape, kv.options());
  const std::string mode(cache_mode);
  if (v.has_value() && v->defined()) {
    EXEC_NPU_CMD(aclnnKvRmsNormRopeCacheV2, kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale,
                 k_rope_offset, c_kv_offset, v, epsilon, mode, is_output_kv, k_rope, c_kv);
  } else {
    EXEC_NPU_CMD(aclnnKvRmsNormRopeCache, kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale,
                 k_rope_offset, c_kv_offset, epsilon, mode, is_output_kv, k_rope, c_kv);
  }
  return {k_cache, ckv_cache, k_rope, c_kv};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_kv_rmsnorm_rope_cache_meta(
    const at::Tensor& kv, const at::Tensor& gamma, const at::Tensor& cos, const at::Tensor& sin,
    const at::Tensor& index, const at::Tensor& k_cache, const at::Tensor& ckv_cache,
    const std::optional<at::Tensor>& k_rope_scale, const std::optional<at::Tensor>& c_kv_scale,
    const std::optional<at::Tensor>& k_rope_offset, const std::optional<at::Tensor>& c_kv_offset,
    const std::optional<at::Tensor>& v, double epsilon, c10::string_view cache_mode, bool is_output_kv) {
  auto [k_shape, c_shape] = outputShapes(kv, gamma, cos, v);
  return {at::empty(k_cache.sizes(), k_cache.options()), at::empty(ckv_cache.sizes(), ckv_cache.options()),
          at::empty(k_shape, kv.options()), at::empty(c_shape, kv.options())};
}

}  // namespace at_npu::native
