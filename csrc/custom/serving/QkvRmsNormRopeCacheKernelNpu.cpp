// QkvRmsNormRopeCacheKernelNpu.cpp - npu_qkv_rms_norm_rope_cache (+ _functional): per-head RMSNorm and RoPE of a
// fused qkv projection, q written to q_out and k / v (optionally int8-quantized) into PA_NZ caches.
#include <ATen/ops/empty.h>

#include <string>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using OptTensor = std::optional<at::Tensor>;
using QkvOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// The pre-quantization q / k / v [B * S, N * D] in qkv's dtype when is_output_qkv, else empty tensors.
QkvOutputs beforeQuantOutputs(const char* op, const at::Tensor& qkv, at::IntArrayRef qkv_size,
                              at::IntArrayRef head_nums, c10::string_view cache_mode, bool is_output_qkv) {
  TORCH_CHECK_VALUE(qkv_size.size() == 4 && head_nums.size() == 3, op,
                    ": qkv_size must be [B, S, Nq + Nk + Nv, D] and head_nums [Nq, Nk, Nv], got ", qkv_size, " and ",
                    head_nums);
  TORCH_CHECK_VALUE(qkv.dim() == 2 && qkv.size(0) == qkv_size[0] * qkv_size[1] &&
                        qkv.size(1) == qkv_size[2] * qkv_size[3] &&
                        head_nums[0] + head_nums[1] + head_nums[2] == qkv_size[2],
                    op, ": qkv must be 2-D [B * S, (Nq + Nk + Nv) * D] matching qkv_size ", qkv_size,
                    " and head_nums ", head_nums, ", got ", qkv.sizes());
  TORCH_CHECK_VALUE(std::string(cache_mode) == "PA_NZ", op, ": cache_mode must be PA_NZ, got '",
                    std::string(cache_mode), "'");
  const int64_t rows = qkv.size(0), d = qkv_size[3];
  auto make = [&](int64_t heads) {
    return is_output_qkv ? at::empty({rows, heads * d}, qkv.options()) : at::empty({0}, qkv.options());
  };
  return {make(head_nums[0]), make(head_nums[1]), make(head_nums[2])};
}

void launch(const at::Tensor& qkv, const at::Tensor& q_gamma, const at::Tensor& k_gamma, const at::Tensor& cos,
            const at::Tensor& sin, const at::Tensor& index, const at::Tensor& q_out, const at::Tensor& k_cache,
            const at::Tensor& v_cache, at::IntArrayRef qkv_size, at::IntArrayRef head_nums, const OptTensor& k_scale,
            const OptTensor& v_scale, const OptTensor& k_offset, const OptTensor& v_offset, double epsilon,
            c10::string_view cache_mode, QkvOutputs& outs) {
  at::Tensor& q_before = std::get<0>(outs);
  at::Tensor& k_before = std::get<1>(outs);
  at::Tensor& v_before = std::get<2>(outs);
  const std::string mode(cache_mode);
  EXEC_NPU_CMD(aclnnQkvRmsNormRopeCache, qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, k_scale,
               v_scale, k_offset, v_offset, qkv_size, head_nums, epsilon, mode, q_before, k_before, v_before);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_qkv_rms_norm_rope_cache(
    const at::Tensor& qkv, const at::Tensor& q_gamma, const at::Tensor& k_gamma, const at::Tensor& cos,
    const at::Tensor& sin, const at::Tensor& index, at::Tensor& q_out, at::Tensor& k_cache, at::Tensor& v_cache,
    at::IntArrayRef qkv_size, at::IntArrayRef head_nums, const OptTensor& k_scale, const OptTensor& v_scale,
    const OptTensor& k_offset, const OptTensor& v_offset, double epsilon, c10::string_view cache_mode,
    bool is_output_qkv) {
  QkvOutputs outs =
      beforeQuantOutputs("npu_qkv_rms_norm_rope_cache", qkv, qkv_size, head_nums, cache_mode, is_output_qkv);
  launch(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size, head_nums, k_scale, v_scale,
         k_offset, v_offset, epsilon, cache_mode, outs);
  return outs;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_qkv_rms_norm_rope_cache_meta(
    const at::Tensor& qkv, const at::Tensor& q_gamma, const at::Tensor& k_gamma, const at::Tensor& cos,
    const at::Tensor& sin, const at::Tensor& index, at::Tensor& q_out, at::Tensor& k_cache, at::Tensor& v_cache,
    at::IntArrayRef qkv_size, at::IntArrayRef head_nums, const OptTensor& k_scale, const OptTensor& v_scale,
    const OptTensor& k_offset, const OptTensor& v_offset, double epsilon, c10::string_view cache_mode,
    bool is_output_qkv) {
  return beforeQuantOutputs("npu_qkv_rms_norm_rope_cache", qkv, qkv_size, head_nums, cache_mode, is_output_qkv);
}

// Returns (q_before, k_before, v_before, q_out, k_cache, v_cache): updated copies, the inputs stay untouched.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
npu_qkv_rms_norm_rope_cache_functional(const at::Tensor& qkv, const at::Tensor& q_gamma, const at::Tensor& k_gamma,
                                       const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& index,
                                       const at::Tensor& q_out, const at::Tensor& k_cache, const at::Tensor& v_cache,
                                       at::IntArrayRef qkv_size, at::IntArrayRef head_nums, const OptTensor& k_scale,
                                       const OptTensor& v_scale, const OptTensor& k_offset, const OptTensor& v_offset,
                                       double epsilon, c10::string_view cache_mode, bool is_output_qkv) {
  QkvOutputs outs = beforeQuantOutputs("npu_qkv_rms_norm_rope_cache_functional", qkv, qkv_size, head_nums,
                                       cache_mode, is_output_qkv);
  at::Tensor q_copy = q_out.clone(), k_copy = k_cache.clone(), v_copy = v_cache.clone();
  launch(qkv, q_gamma, k_gamma, cos, sin, index, q_copy, k_copy, v_copy, qkv_size, head_nums, k_scale, v_scale,
         k_offset, v_offset, epsilon, cache_mode, outs);
  return {std::get<0>(outs), std::get<1>(outs), std::get<2>(outs), q_copy, k_copy, v_copy};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
npu_qkv_rms_norm_rope_cache_functional_meta(const at::Tensor& qkv, const at::Tensor& q_gamma,
                                            const at::Tensor& k_gamma, const at::Tensor& cos, const at::Tensor& sin,
                                            const at::Tensor& index, const at::Tensor& q_out,
                                            const at::Tensor& k_cache, const at::Tensor& v_cache,
                                            at::IntArrayRef qkv_size, at::IntArrayRef head_nums,
                                            const OptTensor& k_scale, const OptTensor& v_scale,
                                            const OptTensor& k_offset, const OptTensor& v_offset, double epsilon,
                                            c10::string_view cache_mode, bool is_output_qkv) {
  auto [q_before, k_before, v_before] = beforeQuantOutputs("npu_qkv_rms_norm_rope_cache_functional", qkv, qkv_size,
                                                           head_nums, cache_mode, is_output_qkv);
  return {q_before,
          k_before,
          v_before,
          at::empty(q_out.sizes(), q_out.options()),
          at::empty(k_cache.sizes(), k_cache.options()),
          at::empty(v_cache.sizes(), v_cache.options())};
}

}  // namespace at_npu::native
