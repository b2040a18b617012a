// RopeQuantKvCacheKernelNpu.cpp - npu_rope_quant_kvcache and npu_dequant_rope_quant_kvcache (split a fused qkv
// row, RoPE on q / k, int8-quantize k / v into the caches) on aclnnDequantRopeQuantKvcache, as torch_npu does.
#include <ATen/ops/empty.h>

#include <string>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using OptTensor = std::optional<at::Tensor>;
using RopeQuantResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// q [.., Nq, D] and (with kv_output) the rotated k / raw v [.., Nkv, D] in cos's dtype; .. is x's leading dims.
std::tuple<at::Tensor, at::Tensor, at::Tensor> ropeQuantOutputs(const char* op, const at::Tensor& x,
                                                                const at::Tensor& cos, const at::Tensor& v_cache,
                                                                at::IntArrayRef size_splits, int64_t quant_mode,
                                                                c10::string_view cache_mode, bool kv_output) {
  TORCH_CHECK_VALUE(x.dim() == 2 || x.dim() == 3, op, ": x must be 2-D [T, H] or 3-D [B, S, H], got ", x.dim(),
                    "-D");
  TORCH_CHECK_VALUE(v_cache.dim() == 4, op, ": the caches must be 4-D, got ", v_cache.sizes());
  TORCH_CHECK_VALUE(size_splits.size() == 3 && size_splits[0] >= 0, op,
                    ": size_splits must be [q, k, v] widths, got ", size_splits);
  TORCH_CHECK_VALUE(quant_mode == 0, op, ": only quant_mode 0 (static scales) is supported, got ", quant_mode);
  const std::string mode(cache_mode);
  TORCH_CHECK_VALUE(mode == "contiguous" || mode == "page", op, ": cache_mode must be contiguous or page, got '", mode,
                    "'");
  const int64_t d = v_cache.size(3), kv_heads = v_cache.size(2);
  TORCH_CHECK_VALUE(d > 0 && size_splits[0] % d == 0, op, ": size_splits[0] (", size_splits[0],
                    ") must be a multiple of the head size ", d);
  std::vector<int64_t> lead(x.sizes().begin(), x.sizes().end() - 1);
  std::vector<int64_t> q_shape = lead, kv_shape = lead;
  q_shape.insert(q_shape.end(), {size_splits[0] / d, d});
  kv_shape.insert(kv_shape.end(), {kv_heads, d});
  if (!kv_output) kv_shape = {0};
  return {at::empty(q_shape, cos.options()), at::empty(kv_shape, cos.options()), at::empty(kv_shape, cos.options())};
}

RopeQuantResult launch(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& k_cache,
                       const at::Tensor& v_cache, const at::Tensor& indices, const at::Tensor& scale_k,
                       const at::Tensor& scale_v, at::IntArrayRef size_splits, const OptTensor& offset_k,
                       const OptTensor& offset_v, const OptTensor& weight_scale, const OptTensor& activation_scale,
                       const OptTensor& bias, int64_t quant_mode, c10::string_view input_layout, bool kv_output,
                       c10::string_view cache_mode, std::tuple<at::Tensor, at::Tensor, at::Tensor> outs) {
  at::Tensor q = std::get<0>(outs), k = std::get<1>(outs), v = std::get<2>(outs);
  const std::string quant = quant_mode == 1 ? "dynamic" : "static", layout(input_layout), mode(cache_mode);
  EXEC_NPU_CMD(aclnnDequantRopeQuantKvcache, x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, offset_k,
               offset_v, weight_scale, activation_scale, bias, size_splits, quant, layout, kv_output, mode, q, k, v);
  return {q, k, v, k_cache, v_cache};
}

}  // namespace

RopeQuantResult npu_rope_quant_kvcache(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                                       const at::Tensor& k_cache, const at::Tensor& v_cache,
                                       const at::Tensor& indices, const at::Tensor& scale_k,
                                       const at::Tensor& scale_v, at::IntArrayRef size_splits,
                                       const OptTensor& offset_k, const OptTensor& offset_v, int64_t quant_mode,
                                       c10::string_view input_layout, bool kv_output, c10::string_view cache_mode) {
  const char* op = "npu_rope_quant_kvcache";
  TORCH_CHECK_TYPE(c10::isFloatingType(x.scalar_type()), op, ": x must be float16, bfloat16 or float32, got ",
                   x.scalar_type(), " (int32 x is npu_dequant_rope_quant_kvcache)");
  auto outs = ropeQuantOutputs(op, x, cos, v_cache, size_splits, quant_mode, cache_mode, kv_output);
  return launch(x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, size_splits, offset_k, offset_v,
                std::nullopt, std::nullopt, std::nullopt, quant_mode, input_layout, kv_output, cache_mode, outs);
}

RopeQuantResult npu_rope_quant_kvcache_meta(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                                            const at::Tensor& k_cache, const at::Tensor& v_cache,
                                            const at::Tensor& indices, const at::Tensor& scale_k,
                                            const at::Tensor& scale_v, at::IntArrayRef size_splits,
                                            const OptTensor& offset_k, const OptTensor& offset_v,
                                            int64_t quant_mode, c10::string_view input_layout, bool kv_output,
                                            c10::string_view cache_mode) {
  auto [q, k, v] = ropeQuantOutputs("npu_rope_quant_kvcache", x, cos, v_cache, size_splits, quant_mode, cache_mode,
                                    kv_output);
  return {q, k, v, at::empty(k_cache.sizes(), k_cache.options()), at::empty(v_cache.sizes(), v_cache.options())};
}

RopeQuantResult npu_dequant_rope_quant_kvcache(
    const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& k_cache,
    const at::Tensor& v_cache, const at::Tensor& indices, const at::Tensor& scale_k, const at::Tensor& scale_v,
    at::IntArrayRef size_splits, const OptTensor& offset_k, const OptTensor& offset_v, const OptTensor& weight_scale,
    const OptTensor& activation_scale, const OptTensor& bias, int64_t quant_mode, c10::string_view input_layout,
    bool kv_output, c10::string_view cache_mode) {
  const char* op = "npu_dequant_rope_quant_kvcache";
  TORCH_CHECK_TYPE(x.scalar_type() == at::kInt, op, ": x must be int32 (a quantized matmul's output), got ",
                   x.scalar_type());
  TORCH_CHECK_VALUE(weight_scale.has_value() && weight_scale->defined(), op,
                    ": weight_scale is needed to dequantize the int32 x");
  auto outs = ropeQuantOutputs(op, x, cos, v_cache, size_splits, quant_mode, cache_mode, kv_output);
  return launch(x, cos, sin, k_cache, v_cache, indices, scale_k, scale_v, size_splits, offset_k, offset_v,
                weight_scale, activation_scale, bias, quant_mode, input_layout, kv_output, cache_mode, outs);
}

RopeQuantResult npu_dequant_rope_quant_kvcache_meta(
    const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& k_cache,
    const at::Tensor& v_cache, const at::Tensor& indices, const at::Tensor& scale_k, const at::Tensor& scale_v,
    at::IntArrayRef size_splits, const OptTensor& offset_k, const OptTensor& offset_v, const OptTensor& weight_scale,
    const OptTensor& activation_scale, const OptTensor& bias, int64_t quant_mode, c10::string_view input_layout,
    bool kv_output, c10::string_view cache_mode) {
  auto [q, k, v] = ropeQuantOutputs("npu_dequant_rope_quant_kvcache", x, cos, v_cache, size_splits, quant_mode,
                                    cache_mode, kv_output);
  return {q, k, v, at::empty(k_cache.sizes(), k_cache.options()), at::empty(v_cache.sizes(), v_cache.options())};
}

}  // namespace at_npu::native
