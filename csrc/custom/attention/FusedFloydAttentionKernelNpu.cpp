// FusedFloydAttentionKernelNpu.cpp - npu_fused_floyd_attention (attention over node pairs: query [B, H, N, M, D]
// scores each pivot j through key_ij [B, H, N, K, D] and key_jk [B, H, K, M, D], and gathers value_ij / value_jk)
// and its gradient npu_fused_floyd_attention_backward, on aclnnFusedFloydAttention / aclnnFusedFloydAttentionGrad.
#include <ATen/ops/empty.h>

#include <tuple>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_fused_floyd_attention";
using FloydResult = std::tuple<at::Tensor, at::Tensor, at::Tensor>;
using FloydGrads = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

void checkInputs(const char* op, const at::Tensor& query_ik, const at::Tensor& key_ij, const at::Tensor& value_ij,
                 const at::Tensor& key_jk, const at::Tensor& value_jk) {
  TORCH_CHECK_VALUE(query_ik.dim() == 5 && key_ij.dim() == 5 && value_ij.dim() == 5 && key_jk.dim() == 5 &&
                        value_jk.dim() == 5,
                    op, ": query_ik [B, H, N, M, D], key_ij / value_ij [B, H, N, K, D] and key_jk / value_jk ",
                    "[B, H, K, M, D] must be 5-D, got ", query_ik.sizes(), ", ", key_ij.sizes(), ", ",
                    value_ij.sizes(), ", ", key_jk.sizes(), " and ", value_jk.sizes());
  const at::ScalarType t = query_ik.scalar_type();
  TORCH_CHECK_TYPE(t == at::kHalf || t == at::kBFloat16 || t == at::kFloat, op,
                   ": query_ik must be float16, bfloat16 or float32, got ", t);
  for (const at::Tensor* x : {&key_ij, &value_ij, &key_jk, &value_jk}) {
    TORCH_CHECK_TYPE(x->scalar_type() == t, op, ": keys and values must have query_ik's dtype ", t, ", got ",
                     x->scalar_type());
  }
  const int64_t k = key_ij.size(3);
  TORCH_CHECK_VALUE(key_ij.size(0) == query_ik.size(0) && key_ij.size(1) == query_ik.size(1) &&
                        key_ij.size(2) == query_ik.size(2) && key_ij.size(4) == query_ik.size(4),
                    op, ": key_ij ", key_ij.sizes(), " must match query_ik ", query_ik.sizes(), " in B, H, N and D");
  TORCH_CHECK_VALUE(value_ij.sizes() == key_ij.sizes(), op, ": value_ij must have key_ij's shape ", key_ij.sizes(),
                    ", got ", value_ij.sizes());
  TORCH_CHECK_VALUE(key_jk.size(0) == query_ik.size(0) && key_jk.size(1) == query_ik.size(1) && key_jk.size(2) == k &&
                        key_jk.size(3) == query_ik.size(3) && key_jk.size(4) == query_ik.size(4),
                    op, ": key_jk must be [B, H, K, M, D] = [", query_ik.size(0), ", ", query_ik.size(1), ", ", k,
                    ", ", query_ik.size(3), ", ", query_ik.size(4), "], got ", key_jk.sizes());
  TORCH_CHECK_VALUE(value_jk.sizes() == key_jk.sizes(), op, ": value_jk must have key_jk's shape ", key_jk.sizes(),
                    ", got ", value_jk.sizes());
}

FloydResult allocate(const at::Tensor& query_ik, const at::Tensor& key_ij, const at::Tensor& value_ij,
                     const at::Tensor& key_jk, const at::Tensor& value_jk,
                     const std::optional<at::Tensor>& atten_mask) {
  checkInputs(kOp, query_ik, key_ij, value_ij, key_jk, value_jk);
  if (atten_mask.has_value() && atten_mask->defined()) {
    const auto& m = *atten_mask;
    TORCH_CHECK_TYPE(m.scalar_type() == at::kBool || m.scalar_type() == at::kByte, kOp,
                     ": atten_mask must be bool or uint8 (1 = pivot not attended), got ", m.scalar_type());
    TORCH_CHECK_VALUE(m.dim() == 5 && m.size(0) == query_ik.size(0) && m.size(1) == 1 &&
                          m.size(2) == query_ik.size(2) && m.size(3) == 1 && m.size(4) == key_ij.size(3),
                      kOp, ": atten_mask must be [B, 1, N, 1, K] = [", query_ik.size(0), ", 1, ", query_ik.size(2),
                      ", 1, ", key_ij.size(3), "], got ", m.sizes());
  }
  const auto stats = query_ik.options().dtype(at::kFloat);
  const std::vector<int64_t> shape{query_ik.size(0), query_ik.size(1), query_ik.size(2), query_ik.size(3), 8};
  return {at::empty(shape, stats), at::empty(shape, stats), at::empty(query_ik.sizes(), query_ik.options())};
}

}  // namespace

FloydResult npu_fused_floyd_attention(const at::Tensor& query_ik, const at::Tensor& key_ij, const at::Tensor& value_ij,
                                      const at::Tensor& key_jk, const at::Tensor& value_jk,
                                      const std::optional<at::Tensor>& atten_mask, double scale_value) {
  FloydResult result = allocate(query_ik, key_ij, value_ij, key_jk, value_jk, atten_mask);
  auto& [softmax_max, softmax_sum, out] = result;
  const at::Tensor mask = atten_mask.value_or(at::Tensor());
  EXEC_NPU_CMD(aclnnFusedFloydAttention, query_ik, key_ij, value_ij, key_jk, value_jk, mask, scale_value, softmax_max,
               softmax_sum, out);
  return result;
}

FloydResult npu_fused_floyd_attention_meta(const at::Tensor& query_ik, const at::Tensor& key_ij,
                                           const at::Tensor& value_ij, const at::Tensor& key_jk,
                                           const at::Tensor& value_jk, const std::optional<at::Tensor>& atten_mask,
                                           double scale_value) {
  (void)scale_value;
  return allocate(query_ik, key_ij, value_ij, key_jk, value_jk, atten_mask);
}

FloydGrads npu_fused_floyd_attention_backward(const at::Tensor& grad_output, const at::Tensor& query_ik,
                                              const at::Tensor& key_ij, const at::Tensor& value_ij,
                                              const at::Tensor& key_jk, const at::Tensor& value_jk,
                                              const at::Tensor& attention_out, const at::Tensor& softmax_max,
                                              const at::Tensor& softmax_sum,
                                              const std::optional<at::Tensor>& atten_mask, double scale_value) {
  const char* op = "npu_fused_floyd_attention_backward";
  checkInputs(op, query_ik, key_ij, value_ij, key_jk, value_jk);
  TORCH_CHECK_VALUE(grad_output.sizes() == query_ik.sizes() && attention_out.sizes() == query_ik.sizes(), op,
                    ": grad_output and attention_out must have query_ik's shape ", query_ik.sizes());
  TORCH_CHECK_TYPE(softmax_max.scalar_type() == at::kFloat && softmax_sum.scalar_type() == at::kFloat, op,
                   ": softmax_max and softmax_sum must be the forward's float32 statistics");
  FloydGrads grads{at::empty(query_ik.sizes(), query_ik.options()), at::empty(key_ij.sizes(), key_ij.options()),
                   at::empty(value_ij.sizes(), value_ij.options()), at::empty(key_jk.sizes(), key_jk.options()),
                   at::empty(value_jk.sizes(), value_jk.options())};
  auto& [dq, dk1, dv1, dk2, dv2] = grads;
  const at::Tensor mask = atten_mask.value_or(at::Tensor());
  EXEC_NPU_CMD(aclnnFusedFloydAttentionGrad, query_ik, key_ij, value_ij, key_jk, value_jk, grad_output, mask,
               softmax_max, softmax_sum, attention_out, scale_value, dq, dk1, dv1, dk2, dv2);
  return grads;
}

FloydGrads npu_fused_floyd_attention_backward_meta(const at::Tensor& grad_output, const at::Tensor& query_ik,
                                                   const at::Tensor& key_ij, const at::Tensor& value_ij,
                                                   const at::Tensor& key_jk, const at::Tensor& value_jk,
                                                   const at::Tensor& attention_out, const at::Tensor& softmax_max,
                                                   const at::Tensor& softmax_sum,
                                                   const std::optional<at::Tensor>& atten_mask, double scale_value) {
  (void)grad_output, (void)attention_out, (void)softmax_max, (void)softmax_sum, (void)atten_mask, (void)scale_value;
  checkInputs("npu_fused_floyd_attention_backward", query_ik, key_ij, value_ij, key_jk, value_jk);
  return {at::empty(query_ik.sizes(), query_ik.options()), at::empty(key_ij.sizes(), key_ij.options()),
          at::empty(value_ij.sizes(), value_ij.options()), at::empty(key_jk.sizes(), key_jk.options()),
          at::empty(value_jk.sizes(), value_jk.options())};
}

}  // namespace at_npu::native
