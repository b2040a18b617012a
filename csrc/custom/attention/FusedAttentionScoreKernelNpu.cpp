// FusedAttentionScoreKernelNpu.cpp - npu_fused_attention_score(_fwd) (BERT attention: scale * q k^T + mask,
// softmax, byte-mask dropout, times v, heads merged) and its gradients npu_fused_attention_score_backward /
// npu_fused_attention_score_grad, on aclnnAttentionScore / aclnnAttentionScoreGrad.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>

#include <tuple>
#include <vector>

#include <torch/library.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/NpuCustomOps.h"
#include "csrc/custom/dropout/DropoutMask.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using Tensors3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

bool isAttentionFloat(at::ScalarType t) { return t == at::kFloat || t == at::kHalf || t == at::kBFloat16; }

// torch_npu's transpose flags select the fractal (NZ) layouts its aclop was tuned with; their layouts are not
// documented, so the software NPU takes the default [B, N, S, D] layout only rather than guess.
void checkLayoutFlags(const char* op, std::initializer_list<std::pair<const char*, bool>> flags) {
  for (const auto& [name, set] : flags) {
    TORCH_CHECK_VALUE(!set, op, ": ", name, "=True is not supported on the software NPU (only the default "
                      "[batch, heads, seq, dim] layout is); transpose the tensors with ATen ops and pass False");
  }
}

// Checks [B, N, S, D] query / key / value (same dtype) and the scale / keep_prob; returns the score shape.
std::vector<int64_t> checkScoreInputs(const char* op, const at::Tensor& query, const at::Tensor& key,
                                      const at::Tensor& value, const at::Scalar& scale, double keep_prob) {
  TORCH_CHECK_VALUE(query.dim() == 4 && key.dim() == 4 && value.dim() == 4, op,
                    ": query_layer, key_layer and value_layer must be 4-D [batch, heads, seq, dim], got ",
                    query.sizes(), ", ", key.sizes(), " and ", value.sizes());
  TORCH_CHECK_TYPE(isAttentionFloat(query.scalar_type()), op,
                   ": query_layer must be float16, float32 or bfloat16, got ", query.scalar_type());
  TORCH_CHECK_TYPE(key.scalar_type() == query.scalar_type() && value.scalar_type() == query.scalar_type(), op,
                   ": key_layer and value_layer must have query_layer's dtype ", query.scalar_type());
  TORCH_CHECK_VALUE(key.size(0) == query.size(0) && key.size(1) == query.size(1) && key.size(3) == query.size(3), op,
                    ": key_layer ", key.sizes(), " must match query_layer ", query.sizes(),
                    " in batch, heads and head_dim");
  TORCH_CHECK_VALUE(value.size(0) == query.size(0) && value.size(1) == query.size(1) && value.size(2) == key.size(2),
                    op, ": value_layer ", value.sizes(), " must match key_layer ", key.sizes(),
                    " in batch, heads and seq");
  TORCH_CHECK_VALUE(keep_prob > 0.0 && keep_prob <= 1.0, op, ": keep_prob (the probability of keeping) must be in ",
                    "(0, 1], got ", keep_prob);
  TORCH_CHECK_TYPE(!scale.isComplex() && !scale.isBoolean(), op, ": scale must be a real number");
  return {query.size(0), query.size(1), query.size(2), key.size(2)};
}

Tensors3 fwdOutputs(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                    const at::Tensor& attention_mask, const at::Scalar& scale, double keep_prob,
                    bool query_transpose, bool key_transpose, bool bmm_score_transpose_a, bool bmm_score_transpose_b,
                    bool value_transpose, bool dx_transpose) {
  const char* op = "npu_fused_attention_score_fwd";
  checkLayoutFlags(op, {{"query_transpose", query_transpose}, {"key_transpose", key_transpose},
                        {"bmm_score_transpose_a", bmm_score_transpose_a},
                        {"bmm_score_transpose_b", bmm_score_transpose_b}, {"value_transpose", value_transpose},
                        {"dx_transpose", dx_transpose}});
  const std::vector<int64_t> scores = checkScoreInputs(op, query, key, value, scale, keep_prob);
  TORCH_CHECK_VALUE(attention_mask.dim() <= 4 && at::is_expandable_to(attention_mask.sizes(), scores), op,
                    ": attention_mask must broadcast to [batch, heads, q_seq, k_seq] = ", at::IntArrayRef(scores),
                    ", got ", attention_mask.sizes());
  TORCH_CHECK_TYPE(at::isFloatingType(attention_mask.scalar_type()), op,
                   ": attention_mask must be a floating-point (additive) mask, got ", attention_mask.scalar_type());
  const auto opts = query.options();
  const int64_t numel = scores[0] * scores[1] * scores[2] * scores[3];
  return {at::empty({query.size(0) * query.size(2), query.size(1) * value.size(3)}, opts), at::empty(scores, opts),
          at::empty({numel}, opts.dtype(at::kByte))};
}

// Gradient buffers: [B, N, S, D] like each input (`rows` = false, _backward) or the forward result's
// [B * S, N * D] rows layout (`rows` = true, _grad).
Tensors3 gradOutputs(const char* op, const at::Tensor& grad_output, const at::Tensor& softmax_output,
                     const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& mask,
                     const at::Scalar& scale, double keep_prob, bool query_transpose, bool key_transpose,
                     bool value_transpose, bool dx_transpose, bool rows) {
  checkLayoutFlags(op, {{"query_transpose", query_transpose}, {"key_transpose", key_transpose},
                        {"value_transpose", value_transpose}, {"dx_transpose", dx_transpose}});
  const std::vector<int64_t> scores = checkScoreInputs(op, query, key, value, scale, keep_prob);
  TORCH_CHECK_VALUE(softmax_output.sizes() == at::IntArrayRef(scores), op, ": softmax_output must be the forward's ",
                    at::IntArrayRef(scores), ", got ", softmax_output.sizes());
  TORCH_CHECK_VALUE(grad_output.numel() == query.size(0) * query.size(1) * query.size(2) * value.size(3), op,
                    ": grad_output must be the gradient of the forward's [", query.size(0) * query.size(2), ", ",
                    query.size(1) * value.size(3), "] result, got ", grad_output.sizes());
  TORCH_CHECK_TYPE(mask.scalar_type() == at::kByte, op, ": mask must be the forward's uint8 drop mask, got ",
                   mask.scalar_type());
  TORCH_CHECK_VALUE(mask.numel() == softmax_output.numel(), op, ": mask must hold one byte per score (",
                    softmax_output.numel(), "), got ", mask.numel());
  const auto like = [&](const at::Tensor& t) {
    return rows ? at::empty({t.size(0) * t.size(2), t.size(1) * t.size(3)}, grad_output.options())
                : at::empty(t.sizes(), grad_output.options());
  };
  return {like(query), like(key), like(value)};
}

}  // namespace

// Returns (attention_score [B * Sq, N * Dv], softmax_output [B, N, Sq, Sk], drop_mask [B * N * Sq * Sk] uint8,
// 1 = kept). The mask is drawn from the npu generator (all ones when keep_prob = 1).
Tensors3 npu_fused_attention_score_fwd(const at::Tensor& query_layer, const at::Tensor& key_layer,
                                       const at::Tensor& value_layer, const at::Tensor& attention_mask,
                                       const at::Scalar& scale, double keep_prob, bool query_transpose,
                                       bool key_transpose, bool bmm_score_transpose_a, bool bmm_score_transpose_b,
                                       bool value_transpose, bool dx_transpose) {
  Tensors3 outs = fwdOutputs(query_layer, key_layer, value_layer, attention_mask, scale, keep_prob, query_transpose,
                             key_transpose, bmm_score_transpose_a, bmm_score_transpose_b, value_transpose,
                             dx_transpose);
  auto& [attention_score, softmax_output, drop_mask] = outs;
  // Same npu generator stream as the other dropouts, so manual_seed makes the mask reproducible.
  const auto [seed, offset] = nextDropoutSeed(query_layer.device().index());
  const double drop_prob = 1.0 - keep_prob;
  EXEC_NPU_CMD(aclnnDropoutGenMaskV3, softmax_output.sizes(), drop_prob, seed, offset, drop_mask);
  EXEC_NPU_CMD(aclnnAttentionScore, query_layer, key_layer, value_layer, attention_mask, scale, drop_mask, keep_prob,
               query_transpose, key_transpose, bmm_score_transpose_a, bmm_score_transpose_b, attention_score,
               softmax_output);
  return outs;
}

Tensors3 npu_fused_attention_score_fwd_meta(const at::Tensor& query_layer, const at::Tensor& key_layer,
                                            const at::Tensor& value_layer, const at::Tensor& attention_mask,
                                            const at::Scalar& scale, double keep_prob, bool query_transpose,
                                            bool key_transpose, bool bmm_score_transpose_a,
                                            bool bmm_score_transpose_b, bool value_transpose, bool dx_transpose) {
  return fwdOutputs(query_layer, key_layer, value_layer, attention_mask, scale, keep_prob, query_transpose,
                    key_transpose, bmm_score_transpose_a, bmm_score_transpose_b, value_transpose, dx_transpose);
}

// torch_npu's npu_fused_attention_score: the first output of npu_fused_attention_score_fwd (dispatched, so it
// carries _fwd's gradient when called with autograd, see the registration below).
at::Tensor npu_fused_attention_score(const at::Tensor& query_layer, const at::Tensor& key_layer,
                                     const at::Tensor& value_layer, const at::Tensor& attention_mask,
                                     const at::Scalar& scale, double keep_prob, bool query_transpose,
                                     bool key_transpose, bool bmm_score_transpose_a, bool bmm_score_transpose_b,
                                     bool value_transpose, bool dx_transpose) {
  return std::get<0>(at_npu::ops::npu_fused_attention_score_fwd(
      query_layer, key_layer, value_layer, attention_mask, scale, keep_prob, query_transpose, key_transpose,
      bmm_score_transpose_a, bmm_score_transpose_b, value_transpose, dx_transpose));
}

at::Tensor npu_fused_attention_score_meta(const at::Tensor& query_layer, const at::Tensor& key_layer,
                                          const at::Tensor& value_layer, const at::Tensor& attention_mask,
                                          const at::Scalar& scale, double keep_prob, bool query_transpose,
                                          bool key_transpose, bool bmm_score_transpose_a, bool bmm_score_transpose_b,
                                          bool value_transpose, bool dx_transpose) {
  return std::get<0>(fwdOutputs(query_layer, key_layer, value_layer, attention_mask, scale, keep_prob,
                                query_transpose, key_transpose, bmm_score_transpose_a, bmm_score_transpose_b,
                                value_transpose, dx_transpose));
}

// Returns (query_dx, key_dw, value_dw) shaped like query_layer, key_layer and value_layer ([B, N, S, D]).
Tensors3 npu_fused_attention_score_backward(const at::Tensor& grad_output, const at::Tensor& softmax_output,
                                            const at::Tensor& query_layer, const at::Tensor& key_layer,
                                            const at::Tensor& value_layer, const at::Tensor& mask,
                                            const at::Scalar& scale, double keep_prob, bool query_transpose,
                                            bool key_transpose, bool value_transpose, bool dx_transpose) {
  Tensors3 outs = gradOutputs("npu_fused_attention_score_backward", grad_output, softmax_output, query_layer,
                              key_layer, value_layer, mask, scale, keep_prob, query_transpose, key_transpose,
                              value_transpose, dx_transpose, /*rows=*/false);
  auto& [query_dx, key_dw, value_dw] = outs;
  EXEC_NPU_CMD(aclnnAttentionScoreGrad, softmax_output, grad_output, value_layer, key_layer, query_layer, scale, mask,
               keep_prob, query_transpose, key_transpose, value_transpose, dx_transpose, value_dw, query_dx, key_dw);
  return outs;
}

Tensors3 npu_fused_attention_score_backward_meta(const at::Tensor& grad_output, const at::Tensor& softmax_output,
                                                 const at::Tensor& query_layer, const at::Tensor& key_layer,
                                                 const at::Tensor& value_layer, const at::Tensor& mask,
                                                 const at::Scalar& scale, double keep_prob, bool query_transpose,
                                                 bool key_transpose, bool value_transpose, bool dx_transpose) {
  return gradOutputs("npu_fused_attention_score_backward", grad_output, softmax_output, query_layer, key_layer,
                     value_layer, mask, scale, keep_prob, query_transpose, key_transpose, value_transpose,
                     dx_transpose, /*rows=*/false);
}

// The same gradients in the forward result's layout: each [B * S, N * D] (rows of [B, S, N, D]), as torch_npu's
// _grad returns them without its _backward's final permute.
Tensors3 npu_fused_attention_score_grad(const at::Tensor& grad_output, const at::Tensor& softmax_output,
                                        const at::Tensor& query_layer, const at::Tensor& key_layer,
                                        const at::Tensor& value_layer, const at::Tensor& mask,
                                        const at::Scalar& scale, double keep_prob, bool query_transpose,
                                        bool key_transpose, bool value_transpose, bool dx_transpose) {
  Tensors3 outs = gradOutputs("npu_fused_attention_score_grad", grad_output, softmax_output, query_layer, key_layer,
                              value_layer, mask, scale, keep_prob, query_transpose, key_transpose, value_transpose,
                              dx_transpose, /*rows=*/true);
  auto& [query_dx, key_dw, value_dw] = outs;
  EXEC_NPU_CMD(aclnnAttentionScoreGrad, softmax_output, grad_output, value_layer, key_layer, query_layer, scale, mask,
               keep_prob, query_transpose, key_transpose, value_transpose, dx_transpose, value_dw, query_dx, key_dw);
  return outs;
}

Tensors3 npu_fused_attention_score_grad_meta(const at::Tensor& grad_output, const at::Tensor& softmax_output,
                                             const at::Tensor& query_layer, const at::Tensor& key_layer,
                                             const at::Tensor& value_layer, const at::Tensor& mask,
                                             const at::Scalar& scale, double keep_prob, bool query_transpose,
                                             bool key_transpose, bool value_transpose, bool dx_transpose) {
  return gradOutputs("npu_fused_attention_score_grad", grad_output, softmax_output, query_layer, key_layer,
                     value_layer, mask, scale, keep_prob, query_transpose, key_transpose, value_transpose,
                     dx_transpose, /*rows=*/true);
}

namespace {

// npu_fused_attention_score composes npu_fused_attention_score_fwd, so its autograd kernel is the same composition
// called with autograd on: its gradient is _fwd's (torch_npu leaves the exposed op without one).
TORCH_LIBRARY_IMPL(npu, AutogradPrivateUse1, m) {
  m.impl("npu_fused_attention_score",
         [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
            const at::Scalar& scale, double keep_prob, bool qt, bool kt, bool at_, bool bt, bool vt, bool dxt) {
           return npu_fused_attention_score(q, k, v, mask, scale, keep_prob, qt, kt, at_, bt, vt, dxt);
         });
}

}  // namespace

}  // namespace at_npu::native
