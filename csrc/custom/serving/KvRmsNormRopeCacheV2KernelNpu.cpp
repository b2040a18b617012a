// KvRmsNormRopeCacheV2KernelNpu.cpp - npu_kv_rmsnorm_rope_cache_v2 (in place on the caches, returns k_rope / c_kv)
// and its _functional twin (updates copies of the caches), both through npu_kv_rmsnorm_rope_cache's device ops.
#include <ATen/ops/empty.h>

#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/NpuCustomOps.h"

namespace at_npu::native {
namespace {

using OptTensor = std::optional<at::Tensor>;

// The cache dtype overrides only name hifloat8 / float8 storage, which the software NPU does not have.
void checkCacheDtypes(const char* op, std::optional<int64_t> k_cache_dtype, std::optional<int64_t> ckv_cache_dtype) {
  TORCH_CHECK_TYPE(!k_cache_dtype.has_value() && !ckv_cache_dtype.has_value(), op,
                   ": k_cache_dtype / ckv_cache_dtype select hifloat8 / float8 cache storage, which is not ",
                   "supported; pass caches of the dtype to store (bfloat16, float16, float32 or int8)");
}

// k_rope / c_kv as npu_kv_rmsnorm_rope_cache allocates them: kv's [B, 1, S] with the rope / normalised widths
// (with v: the whole kv row and v's width).
std::tuple<at::Tensor, at::Tensor> outputsLike(const at::Tensor& kv, const at::Tensor& gamma, const at::Tensor& cos,
                                               const OptTensor& v) {
  TORCH_CHECK_VALUE(kv.dim() == 4 && cos.dim() == 4 && gamma.dim() == 1,
                    "npu_kv_rmsnorm_rope_cache_v2: kv and cos must be 4-D and gamma 1-D, got ", kv.sizes(), ", ",
                    cos.sizes(), ", ", gamma.sizes());
  const bool with_v = v.has_value() && v->defined();
  std::vector<int64_t> k = kv.sizes().vec(), c = kv.sizes().vec();
  k.back() = with_v ? kv.size(-1) : cos.size(-1);
  c.back() = with_v ? v->size(-1) : gamma.size(0);
  return {at::empty(k, kv.options()), at::empty(c, kv.options())};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_kv_rmsnorm_rope_cache_v2(
    const at::Tensor& kv, const at::Tensor& gamma, const at::Tensor& cos, const at::Tensor& sin,
    const at::Tensor& index, at::Tensor& k_cache, at::Tensor& ckv_cache, const OptTensor& k_rope_scale,
    const OptTensor& c_kv_scale, const OptTensor& k_rope_offset, const OptTensor& c_kv_offset, const OptTensor& v,
    double epsilon, c10::string_view cache_mode, bool is_output_kv, std::optional<int64_t> k_cache_dtype,
    std::optional<int64_t> ckv_cache_dtype) {
  checkCacheDtypes("npu_kv_rmsnorm_rope_cache_v2", k_cache_dtype, ckv_cache_dtype);
  auto out = at_npu::ops::npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale,
                                                    c_kv_scale, k_rope_offset, c_kv_offset, v, epsilon, cache_mode,
                                                    is_output_kv);
  return {std::get<2>(out), std::get<3>(out)};
}

std::tuple<at::Tensor, at::Tensor> npu_kv_rmsnorm_rope_cache_v2_meta(
    const at::Tensor& kv, const at::Tensor& gamma, const at::Tensor& cos, const at::Tensor& sin,
    const at::Tensor& index, at::Tensor& k_cache, at::Tensor& ckv_cache, const OptTensor& k_rope_scale,
    const OptTensor& c_kv_scale, const OptTensor& k_rope_offset, const OptTensor& c_kv_offset, const OptTensor& v,
    double epsilon, c10::string_view cache_mode, bool is_output_kv, std::optional<int64_t> k_cache_dtype,
    std::optional<int64_t> ckv_cache_dtype) {
  return outputsLike(kv, gamma, cos, v);
}

// Returns (k_rope, c_kv, k_cache_out, ckv_cache_out); the caches passed in stay as they were.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_kv_rmsnorm_rope_cache_v2_functional(
    const at::Tensor& kv, const at::Tensor& gamma, const at::Tensor& cos, const at::Tensor& sin,
    const at::Tensor& index, const at::Tensor& k_cache, const at::Tensor& ckv_cache, const OptTensor& k_rope_scale,
    const OptTensor& c_kv_scale, const OptTensor& k_rope_offset, const OptTensor& c_kv_offset, const OptTensor& v,
    double epsilon, c10::string_view cache_mode, bool is_output_kv, std::optional<int64_t> k_cache_dtype,
    std::optional<int64_t> ckv_cache_dtype) {
  checkCacheDtypes("npu_kv_rmsnorm_rope_cache_v2_functional", k_cache_dtype, ckv_cache_dtype);
  at::Tensor k_cache_out = k_cache.clone(), ckv_cache_out = ckv_cache.clone();
  auto out = at_npu::ops::npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, k_cache_out, ckv_cache_out,
                                                    k_rope_scale, c_kv_scale, k_rope_offset, c_kv_offset, v, epsilon,
                                                    cache_mode, is_output_kv);
  return {std::get<2>(out), std::get<3>(out), k_cache_out, ckv_cache_out};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_kv_rmsnorm_rope_cache_v2_functional_meta(
    const at::Tensor& kv, const at::Tensor& gamma, const at::Tensor& cos, const at::Tensor& sin,
    const at::Tensor& index, const at::Tensor& k_cache, const at::Tensor& ckv_cache, const OptTensor& k_rope_scale,
    const OptTensor& c_kv_scale, const OptTensor& k_rope_offset, const OptTensor& c_kv_offset, const OptTensor& v,
    double epsilon, c10::string_view cache_mode, bool is_output_kv, std::optional<int64_t> k_cache_dtype,
    std::optional<int64_t> ckv_cache_dtype) {
  auto [k_rope, c_kv] = outputsLike(kv, gamma, cos, v);
  return {k_rope, c_kv, at::empty(k_cache.sizes(), k_cache.options()),
          at::empty(ckv_cache.sizes(), ckv_cache.options())};
}

}  // namespace at_npu::native
