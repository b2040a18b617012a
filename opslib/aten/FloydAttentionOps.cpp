// FloydAttentionOps.cpp - FusedFloydAttention and its Grad: attention over pairs of graph nodes, where query row
// (i, k) scores every pivot j through two keys, key_ij[i, j] and key_jk[j, k], and gathers two values alike.
// Scores accumulate in float32; masked pivots take torch_npu's additive -4e9 before the scaling.
#include <ATen/TensorOperators.h>
#include <ATen/ops/einsum.h>
#include <ATen/ops/exp.h>

#include <tuple>
#include <vector>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

constexpr double kMaskedScore = -4000000000.0;
constexpr int64_t kStatsWidth = 8;  // max / sum broadcast over 8 lanes, as torch_npu keeps them

at::Tensor f32(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }

// Checks the five inputs' shapes and dtypes: query [B, H, N, M, D], key_ij / value_ij [B, H, N, K, D],
// key_jk / value_jk [B, H, K, M, D], the mask [B, 1, N, 1, K].
void checkFloyd(const char* op, const at::Tensor& q, const at::Tensor& k1, const at::Tensor& v1, const at::Tensor& k2,
                const at::Tensor& v2, const at::Tensor& mask) {
  TORCH_CHECK(q.dim() == 5 && k1.dim() == 5 && k2.dim() == 5, op,
              ": query, keys and values must be 5-D ([B, H, N, M, D], [B, H, N, K, D], [B, H, K, M, D])");
  const at::ScalarType t = q.scalar_type();
  TORCH_CHECK(t == at::kHalf || t == at::kBFloat16 || t == at::kFloat, op,
              ": inputs must be float16, bfloat16 or float32, got ", t);
  for (const at::Tensor& x : {k1, v1, k2, v2}) {
    TORCH_CHECK(x.scalar_type() == t, op, ": every input must have query's dtype ", t, ", got ", x.scalar_type());
  }
  const int64_t b = q.size(0), h = q.size(1), n = q.size(2), m = q.size(3), d = q.size(4), kk = k1.size(3);
  TORCH_CHECK(k1.sizes() == at::IntArrayRef({b, h, n, kk, d}), op, ": key_ij must be [B, H, N, K, D] = [", b, ", ",
              h, ", ", n, ", K, ", d, "], got ", k1.sizes());
  TORCH_CHECK(v1.sizes() == k1.sizes(), op, ": value_ij must have key_ij's shape ", k1.sizes(), ", got ", v1.sizes());
  TORCH_CHECK(k2.sizes() == at::IntArrayRef({b, h, kk, m, d}), op, ": key_jk must be [B, H, K, M, D] = [", b, ", ",
              h, ", ", kk, ", ", m, ", ", d, "], got ", k2.sizes());
  TORCH_CHECK(v2.sizes() == k2.sizes(), op, ": value_jk must have key_jk's shape ", k2.sizes(), ", got ", v2.sizes());
  if (mask.defined()) {
    TORCH_CHECK(mask.scalar_type() == at::kBool || mask.scalar_type() == at::kByte, op,
                ": attenMask must be bool or uint8 (1 = not attended), got ", mask.scalar_type());
    TORCH_CHECK(mask.sizes() == at::IntArrayRef({b, 1, n, 1, kk}), op, ": attenMask must be [B, 1, N, 1, K] = [", b,
                ", 1, ", n, ", 1, ", kk, "], got ", mask.sizes());
  }
}

// Scaled scores [B, H, N, M, K]: scale * (q . key_ij + q . key_jk + mask * -4e9).
at::Tensor floydScores(const at::Tensor& q, const at::Tensor& k1, const at::Tensor& k2, const at::Tensor& mask,
                       double scale) {
  at::Tensor s = at::einsum("bhikc,bhijc->bhikj", {q, k1}) + at::einsum("bhikc,bhjkc->bhikj", {q, k2});
  if (mask.defined()) s = s + mask.to(at::kFloat) * kMaskedScore;
  return s * scale;
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnFusedFloydAttentionGetWorkspaceSize(
    const aclTensor* queryIk, const aclTensor* keyIj, const aclTensor* valueIj, const aclTensor* keyJk,
    const aclTensor* valueJk, const aclTensor* attenMaskOptional, double scaleValue, aclTensor* softmaxMaxOut,
    aclTensor* softmaxSumOut, aclTensor* attentionOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnFusedFloydAttention", workspaceSize, executor, [&] {
    const char* op = "aclnnFusedFloydAttention";
    at::Tensor q = requiredTensor(queryIk, "queryIk"), k1 = requiredTensor(keyIj, "keyIj");
    at::Tensor v1 = requiredTensor(valueIj, "valueIj"), k2 = requiredTensor(keyJk, "keyJk");
    at::Tensor v2 = requiredTensor(valueJk, "valueJk"), mask = hostTensor(attenMaskOptional);
    at::Tensor mx = requiredTensor(softmaxMaxOut, "softmaxMaxOut"), sm = requiredTensor(softmaxSumOut, "softmaxSumOut");
    at::Tensor out = requiredTensor(attentionOut, "attentionOut");
    checkFloyd(op, q, k1, v1, k2, v2, mask);
    const std::vector<int64_t> stats{q.size(0), q.size(1), q.size(2), q.size(3), kStatsWidth};
    TORCH_CHECK(mx.sizes() == at::IntArrayRef(stats) && sm.sizes() == at::IntArrayRef(stats), op,
                ": softmaxMaxOut and softmaxSumOut must be [B, H, N, M, 8] = ", at::IntArrayRef(stats));
    TORCH_CHECK(out.sizes() == q.sizes(), op, ": attentionOut must have query's shape ", q.sizes());
    return Prepared{{q, k1, v1, k2, v2, mask}, [=]() mutable {
                      const at::Tensor s = floydScores(f32(q), f32(k1), f32(k2), mask, scaleValue);
                      const at::Tensor row_max = std::get<0>(s.max(-1, /*keepdim=*/true));
                      const at::Tensor e = at::exp(s - row_max);
                      const at::Tensor row_sum = e.sum(-1, /*keepdim=*/true);
                      const at::Tensor p = e / row_sum;
                      out.copy_(at::einsum("bhikj,bhijc->bhikc", {p, f32(v1)}) +
                                at::einsum("bhikj,bhjkc->bhikc", {p, f32(v2)}));
                      mx.copy_(row_max.expand(mx.sizes()));
                      sm.copy_(row_sum.expand(sm.sizes()));
                    },
                    {mx, sm, out}};
  });
}
NPU_ATEN_OP(FusedFloydAttention,
            "queryIk, keyIj, valueIj, keyJk, valueJk, attenMaskOptional, scaleValue, softmaxMaxOut, softmaxSumOut, "
            "attentionOut");

// The gradients of FusedFloydAttention from its saved max / sum (the probabilities are recomputed) and output.
extern "C" NOP_API aclnnStatus aclnnFusedFloydAttentionGradGetWorkspaceSize(
    const aclTensor* queryIk, const aclTensor* keyIj, const aclTensor* valueIj, const aclTensor* keyJk,
    const aclTensor* valueJk, const aclTensor* attentionOutGrad, const aclTensor* attenMaskOptional,
    const aclTensor* softmaxMax, const aclTensor* softmaxSum, const aclTensor* attentionIn, double scaleValue,
    aclTensor* queryIkGradOut, aclTensor* keyIjGradOut, aclTensor* valueIjGradOut, aclTensor* keyJkGradOut,
    aclTensor* valueJkGradOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnFusedFloydAttentionGrad", workspaceSize, executor, [&] {
    const char* op = "aclnnFusedFloydAttentionGrad";
    at::Tensor q = requiredTensor(queryIk, "queryIk"), k1 = requiredTensor(keyIj, "keyIj");
    at::Tensor v1 = requiredTensor(valueIj, "valueIj"), k2 = requiredTensor(keyJk, "keyJk");
    at::Tensor v2 = requiredTensor(valueJk, "valueJk"), mask = hostTensor(attenMaskOptional);
    at::Tensor g = requiredTensor(attentionOutGrad, "attentionOutGrad"), o = requiredTensor(attentionIn, "attentionIn");
    at::Tensor mx = requiredTensor(softmaxMax, "softmaxMax"), sm = requiredTensor(softmaxSum, "softmaxSum");
    at::Tensor dq = requiredTensor(queryIkGradOut, "queryIkGradOut"), dk1 = requiredTensor(keyIjGradOut, "keyIjGradOut");
    at::Tensor dv1 = requiredTensor(valueIjGradOut, "valueIjGradOut"), dk2 = requiredTensor(keyJkGradOut, "keyJkGradOut");
    at::Tensor dv2 = requiredTensor(valueJkGradOut, "valueJkGradOut");
    checkFloyd(op, q, k1, v1, k2, v2, mask);
    TORCH_CHECK(g.sizes() == q.sizes() && o.sizes() == q.sizes(), op,
                ": attentionOutGrad and attentionIn must have query's shape ", q.sizes());
    const std::vector<int64_t> stats{q.size(0), q.size(1), q.size(2), q.size(3), kStatsWidth};
    TORCH_CHECK(mx.sizes() == at::IntArrayRef(stats) && sm.sizes() == at::IntArrayRef(stats), op,
                ": softmaxMax and softmaxSum must be [B, H, N, M, 8] = ", at::IntArrayRef(stats));
    TORCH_CHECK(dq.sizes() == q.sizes() && dk1.sizes() == k1.sizes() && dv1.sizes() == v1.sizes() &&
                    dk2.sizes() == k2.sizes() && dv2.sizes() == v2.sizes(),
                op, ": each gradient output must have its input's shape");
    return Prepared{{q, k1, v1, k2, v2, g, mask, mx, sm, o}, [=]() mutable {
                      const at::Tensor qf = f32(q), gf = f32(g);
                      const at::Tensor s = floydScores(qf, f32(k1), f32(k2), mask, scaleValue);
                      const at::Tensor p = at::exp(s - mx.narrow(-1, 0, 1)) / sm.narrow(-1, 0, 1);
                      const at::Tensor dp = at::einsum("bhikc,bhijc->bhikj", {gf, f32(v1)}) +
                                            at::einsum("bhikc,bhjkc->bhikj", {gf, f32(v2)});
                      const at::Tensor ds = p * (dp - (gf * f32(o)).sum(-1, /*keepdim=*/true)) * scaleValue;
                      dq.copy_(at::einsum("bhikj,bhijc->bhikc", {ds, f32(k1)}) +
                               at::einsum("bhikj,bhjkc->bhikc", {ds, f32(k2)}));
                      dk1.copy_(at::einsum("bhikj,bhikc->bhijc", {ds, qf}));
                      dk2.copy_(at::einsum("bhikj,bhikc->bhjkc", {ds, qf}));
                      dv1.copy_(at::einsum("bhikj,bhikc->bhijc", {p, gf}));
                      dv2.copy_(at::einsum("bhikj,bhikc->bhjkc", {p, gf}));
                    },
                    {dq, dk1, dv1, dk2, dv2}};
  });
}
NPU_ATEN_OP(FusedFloydAttentionGrad,
            "queryIk, keyIj, valueIj, keyJk, valueJk, attentionOutGrad, attenMaskOptional, softmaxMax, softmaxSum, "
            "attentionIn, scaleValue, queryIkGradOut, keyIjGradOut, valueIjGradOut, keyJkGradOut, valueJkGradOut");
