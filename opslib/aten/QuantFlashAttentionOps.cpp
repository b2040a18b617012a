// QuantFlashAttentionOps.cpp - QuantFlashAttentionScore: flash attention on block-quantised float8 query / key / value. Each block of
// rows shares one dequantisation scale; the softmax probabilities are rounded to float8_e4m3fn before they weight
// the values, as the chip's fp8 matmul takes them. The descriptors carry the float8 values widened exactly to
// float16 (this library's element types have no float8; the adapter widens them).
#include <ATen/ExpandUtils.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/isinf.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

// [B, N, S, D] view of a tensor in `layout`; `heads` splits the hidden size of BSH / SBH.
at::Tensor toBnsd(const char* op, const char* what, const at::Tensor& t, const std::string& layout, int64_t heads) {
  if (layout == "BNSD") {
    TORCH_CHECK(t.dim() == 4, op, ": ", what, " must be 4-D [B, N, S, D] in BNSD, got ", t.sizes());
    return t;
  }
  if (layout == "BSND") {
    TORCH_CHECK(t.dim() == 4, op, ": ", what, " must be 4-D [B, S, N, D] in BSND, got ", t.sizes());
    return t.permute({0, 2, 1, 3});
  }
  TORCH_CHECK(t.dim() == 3, op, ": ", what, " must be 3-D in ", layout, ", got ", t.sizes());
  TORCH_CHECK(heads > 0 && t.size(2) % heads == 0, op, ": ", what, "'s hidden size ", t.size(2),
              " is not a multiple of its head count ", heads);
  const int64_t d = t.size(2) / heads;
  if (layout == "BSH") return t.view({t.size(0), t.size(1), heads, d}).permute({0, 2, 1, 3});
  return t.view({t.size(0), t.size(1), heads, d}).permute({1, 2, 0, 3});  // SBH
}

// The inverse of toBnsd for the attention output.
at::Tensor fromBnsd(const at::Tensor& t, const std::string& layout) {
  if (layout == "BNSD") return t;
  if (layout == "BSND") return t.permute({0, 2, 1, 3});
  if (layout == "BSH") return t.permute({0, 2, 1, 3}).reshape({t.size(0), t.size(2), t.size(1) * t.size(3)});
  return t.permute({2, 0, 1, 3}).reshape({t.size(2), t.size(0), t.size(1) * t.size(3)});  // SBH
}

// Per-row dequantisation scales [B, N, S, 1] from per-block ones [B, N, blocks, 1]. The block length is the
// power of two that splits S into that many blocks (torch_npu's 128 / 256 / 512-row blocks).
at::Tensor rowScales(const char* op, const char* what, const at::Tensor& scale, int64_t b, int64_t n, int64_t s) {
  TORCH_CHECK(scale.dim() == 4 && scale.size(0) == b && scale.size(1) == n && scale.size(3) == 1 &&
                  scale.size(2) >= 1,
              op, ": ", what, " must be [", b, ", ", n, ", blocks, 1], got ", scale.sizes());
  TORCH_CHECK(scale.scalar_type() == at::kFloat, op, ": ", what, " must be float32, got ", scale.scalar_type());
  const int64_t blocks = scale.size(2);
  int64_t block = 1;
  while (block * blocks < s) block *= 2;
  TORCH_CHECK((s + block - 1) / block == blocks, op, ": ", what, " has ", blocks, " blocks, which no power-of-two ",
              "block length gives for ", s, " rows");
  return scale.repeat_interleave(block, 2).narrow(2, 0, s);
}

}  // namespace

// attentionOutOut = softmax(scale * (q * dScaleQ) (k * dScaleK)^T) (v * dScaleV), with the probabilities
// exp(s - max) rounded to float8_e4m3fn and their sum taken after rounding; softmaxMaxOut and
// softmaxSumOut [B, N, Sq, 1] hold max and sum. attenMask (bool / uint8, 1 = masked) broadcasts to
// [B, N, Sq, Sk]; preTokens / nextTokens keep keys j with i - preTokens <= j <= i + nextTokens (sparseMode 0).
// pScale quantises the probabilities of the chip's hifloat8 mode only, so float8 inputs do not read it.
extern "C" NOP_API aclnnStatus aclnnQuantFlashAttentionScoreGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* attenMaskOptional,
    const aclTensor* dScaleQ, const aclTensor* dScaleK, const aclTensor* dScaleV, const aclTensor* pScaleOptional,
    double scaleValue, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t sparseMode,
    aclTensor* softmaxMaxOut, aclTensor* softmaxSumOut, aclTensor* softmaxOutOut, aclTensor* attentionOutOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnQuantFlashAttentionScore", workspaceSize, executor, [&] {
    const char* op = "aclnnQuantFlashAttentionScore";
    at::Tensor q = requiredTensor(query, "query"), k = requiredTensor(key, "key"), v = requiredTensor(value, "value");
    at::Tensor dq = requiredTensor(dScaleQ, "dScaleQ"), dk = requiredTensor(dScaleK, "dScaleK");
    at::Tensor dv = requiredTensor(dScaleV, "dScaleV"), mask = hostTensor(attenMaskOptional);
    at::Tensor out = requiredTensor(attentionOutOut, "attentionOutOut");
    at::Tensor mx = requiredTensor(softmaxMaxOut, "softmaxMaxOut"), sm = requiredTensor(softmaxSumOut, "softmaxSumOut");
    (void)pScaleOptional;
    (void)softmaxOutOut;  // torch_npu returns it empty
    TORCH_CHECK(inputLayout != nullptr, op, ": inputLayout is NULL");
    std::string layout(inputLayout);
    for (char& c : layout) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    TORCH_CHECK(layout == "BNSD" || layout == "BSND" || layout == "BSH" || layout == "SBH", op,
                ": inputLayout must be BNSD, BSND, BSH or SBH, got ", inputLayout);
    TORCH_CHECK(q.scalar_type() == at::kHalf && k.scalar_type() == at::kHalf && v.scalar_type() == at::kHalf, op,
                ": query, key and value must be float16 holding float8 values, got ", q.scalar_type(), ", ",
                k.scalar_type(), " and ", v.scalar_type());
    TORCH_CHECK(sparseMode == 0, op, ": only sparseMode 0 (attenMask and the preTokens / nextTokens band) is ",
                "implemented, got ", sparseMode);
    TORCH_CHECK(headNum > 0, op, ": headNum must be positive, got ", headNum);
    const at::Tensor q4 = toBnsd(op, "query", q, layout, headNum);
    const int64_t b = q4.size(0), n = q4.size(1), s1 = q4.size(2), d = q4.size(3);
    // Key / value heads (grouped-query attention): from the hidden size in BSH / SBH, from the shape otherwise.
    const int64_t kv_heads = (layout == "BSH" || layout == "SBH") ? k.size(-1) / d : k.size(layout == "BNSD" ? 1 : 2);
    TORCH_CHECK(kv_heads > 0 && n % kv_heads == 0, op, ": query's ", n, " heads must be a multiple of key's ",
                kv_heads);
    const at::Tensor k4 = toBnsd(op, "key", k, layout, kv_heads), v4 = toBnsd(op, "value", v, layout, kv_heads);
    TORCH_CHECK(k4.size(0) == b && k4.size(3) == d, op, ": key ", k.sizes(), " must match query ", q.sizes(),
                " in batch and head_dim");
    TORCH_CHECK(v4.size(0) == b && v4.size(1) == kv_heads && v4.size(2) == k4.size(2), op, ": value ", v.sizes(),
                " must match key ", k.sizes(), " in batch, heads and sequence");
    const int64_t s2 = k4.size(2);
    TORCH_CHECK(mx.numel() == b * n * s1 && sm.numel() == b * n * s1, op, ": softmaxMaxOut and softmaxSumOut must ",
                "hold [", b, ", ", n, ", ", s1, ", 1] values");
    TORCH_CHECK(out.numel() == b * n * s1 * v4.size(3), op, ": attentionOutOut must hold the attention output (",
                b * n * s1 * v4.size(3), " values)");
    if (mask.defined()) {
      TORCH_CHECK(mask.scalar_type() == at::kBool || mask.scalar_type() == at::kByte, op,
                  ": attenMask must be bool or uint8 (1 = masked out), got ", mask.scalar_type());
      TORCH_CHECK(mask.dim() <= 4 && at::is_expandable_to(mask.sizes(), {b, n, s1, s2}), op, ": attenMask ",
                  mask.sizes(), " must broadcast to [", b, ", ", n, ", ", s1, ", ", s2, "]");
    }
    const at::Tensor rq = rowScales(op, "dScaleQ", dq, b, n, s1);
    const at::Tensor rk = rowScales(op, "dScaleK", dk, b, kv_heads, s2);
    const at::Tensor rv = rowScales(op, "dScaleV", dv, b, kv_heads, s2);
    return Prepared{{q, k, v, dq, dk, dv, mask}, [=]() mutable {
                      const int64_t group = n / kv_heads;
                      const at::Tensor qf = q4.to(at::kFloat) * rq;
                      const at::Tensor kf = (k4.to(at::kFloat) * rk).repeat_interleave(group, 1);
                      const at::Tensor vf = (v4.to(at::kFloat) * rv).repeat_interleave(group, 1);
                      at::Tensor scores = at::matmul(qf, kf.transpose(-2, -1)) * scaleValue;
                      const at::Tensor rows = at::arange(s1, scores.options().dtype(at::kLong)).unsqueeze(1);
                      const at::Tensor cols = at::arange(s2, scores.options().dtype(at::kLong)).unsqueeze(0);
                      at::Tensor masked = (cols < rows - preTokens).logical_or(cols > rows + nextTokens);
                      if (mask.defined()) masked = masked.logical_or(mask.to(at::kBool));
                      scores = scores.masked_fill(masked, -std::numeric_limits<float>::infinity());
                      at::Tensor row_max = std::get<0>(scores.max(-1, /*keepdim=*/true));
                      row_max = at::where(at::isinf(row_max), at::zeros_like(row_max), row_max);  // rows all masked
                      const at::Tensor probs = at::exp(scores - row_max).to(at::kFloat8_e4m3fn).to(at::kFloat);
                      const at::Tensor row_sum = probs.sum(-1, /*keepdim=*/true);
                      const at::Tensor safe_sum = at::where(row_sum > 0, row_sum, at::ones_like(row_sum));
                      const at::Tensor attn = at::matmul(probs, vf) / safe_sum;
                      mx.copy_(row_max.view(mx.sizes()));
                      sm.copy_(row_sum.view(sm.sizes()));
                      out.copy_(fromBnsd(attn, layout).reshape(out.sizes()));
                    },
                    {out, mx, sm}};
  });
}
NPU_ATEN_OP(QuantFlashAttentionScore,
            "query, key, value, attenMaskOptional, dScaleQ, dScaleK, dScaleV, pScaleOptional, scaleValue, preTokens, "
            "nextTokens, headNum, inputLayout, sparseMode, softmaxMaxOut, softmaxSumOut, softmaxOutOut, "
            "attentionOutOut");
