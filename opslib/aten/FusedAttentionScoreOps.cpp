// FusedAttentionScoreOps.cpp - classic (non-flash) fused attention device ops: MultiHeadAttention / its Grad
// (projections, softmax, bit-mask dropout, output projection) and AttentionScore / its Grad (BERT attention score
// with a byte-mask dropout). torch_npu runs these as aclops; the names here are "aclnn" + the aclop name.
#include <ATen/ExpandUtils.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sum.h>

#include <algorithm>
#include <cmath>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

// Float32 working copy (no copy for float32), so half / bfloat16 inputs accumulate in float32.
at::Tensor f32(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }

bool isAttentionFloat(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
}

// Keep flags (float 0 / 1) of `numel` elements from torch_npu's bit mask: element i in bit i % 8 of byte i / 8.
// A small local copy of what the DropoutDoMask kernel does, so this file depends on no other op file.
at::Tensor keepFromBits(const at::Tensor& bits, int64_t numel) {
  const at::Tensor bytes = bits.narrow(0, 0, (numel + 7) / 8).to(at::kInt);
  const at::Tensor shifts = at::arange(8, bytes.options());
  return bytes.unsqueeze(1).bitwise_right_shift(shifts).bitwise_and(1).flatten().narrow(0, 0, numel)
      .to(at::kFloat);
}

// Softmax backward from the saved probabilities p: (g - sum(g * p)) * p along the last dimension.
at::Tensor softmaxGrad(const at::Tensor& g, const at::Tensor& p) {
  return (g - at::sum(g * p, {-1}, /*keepdim=*/true)) * p;
}

// [B * S, H * D] rows -> [B, H, S, D] heads, and back.
at::Tensor toHeads(const at::Tensor& rows, int64_t batch, int64_t seq, int64_t heads, int64_t dim) {
  return rows.reshape({batch, seq, heads, dim}).permute({0, 2, 1, 3});
}
at::Tensor toRows(const at::Tensor& t) {
  return t.permute({0, 2, 1, 3}).reshape({t.size(0) * t.size(2), t.size(1) * t.size(3)});
}

// The shape facts shared by MultiHeadAttention and its Grad; throws with the reason.
void checkMhaShapes(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    int64_t heads, int64_t dim, int64_t src, int64_t tgt) {
  TORCH_CHECK(heads > 0 && dim > 0 && src > 0 && tgt > 0, op,
              ": attnHeadNum, attnDimPerHead, srcLen and tgtLen must be positive");
  const int64_t cols = heads * dim;
  TORCH_CHECK(q.dim() == 2 && q.size(1) == cols && q.size(0) % tgt == 0, op, ": query must be [B * tgtLen, ", cols,
              "], got ", q.sizes());
  const int64_t batch = q.size(0) / tgt;
  TORCH_CHECK(k.dim() == 2 && k.size(0) == batch * src && k.size(1) == cols, op, ": key must be [", batch * src,
              ", ", cols, "], got ", k.sizes());
  TORCH_CHECK(v.sizes() == k.sizes(), op, ": value must be [", batch * src, ", ", cols, "], got ", v.sizes());
  for (const at::Tensor& t : {q, k, v}) {
    TORCH_CHECK(isAttentionFloat(t), op, ": query, key and value must be float32, float16 or bfloat16");
  }
}

}  // namespace

// y = (softmax(q k^T + attnMask) [dropout]) v projected by outProjWeight, with q = (query Wq^T + bq) / sqrt(D),
// k = key Wk^T + bk, v = value Wv^T + bv split into heads. dropoutMask (optional input, torch_npu's bit mask)
// is applied when keepProb < 1 and copied to dropoutMaskOut (all kept when keepProb = 1).
extern "C" NOP_API aclnnStatus aclnnMultiHeadAttentionGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* queryWeight,
    const aclTensor* keyWeight, const aclTensor* valueWeight, const aclTensor* attnMask,
    const aclTensor* outProjWeight, const aclTensor* queryBias, const aclTensor* keyBias, const aclTensor* valueBias,
    const aclTensor* outProjBias, const aclTensor* dropoutMask, int64_t attnHeadNum, int64_t attnDimPerHead,
    int64_t srcLen, int64_t tgtLen, double keepProb, bool softmaxUseFloat, aclTensor* yOut,
    aclTensor* dropoutMaskOut, aclTensor* queryResOut, aclTensor* keyResOut, aclTensor* valueResOut,
    aclTensor* attnScoresOut, aclTensor* attnResOut, aclTensor* contextOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnMultiHeadAttention", workspaceSize, executor, [&] {
    const char* op = "aclnnMultiHeadAttention";
    at::Tensor q = requiredTensor(query, "query"), k = requiredTensor(key, "key"), v = requiredTensor(value, "value");
    at::Tensor wq = requiredTensor(queryWeight, "queryWeight"), wk = requiredTensor(keyWeight, "keyWeight");
    at::Tensor wv = requiredTensor(valueWeight, "valueWeight"), wo = requiredTensor(outProjWeight, "outProjWeight");
    at::Tensor am = requiredTensor(attnMask, "attnMask");
    at::Tensor bq = hostTensor(queryBias), bk = hostTensor(keyBias), bv = hostTensor(valueBias);
    at::Tensor bo = hostTensor(outProjBias), dm = hostTensor(dropoutMask);
    at::Tensor y = requiredTensor(yOut, "yOut"), dmo = requiredTensor(dropoutMaskOut, "dropoutMaskOut");
    at::Tensor qr = requiredTensor(queryResOut, "queryResOut"), kr = requiredTensor(keyResOut, "keyResOut");
    at::Tensor vr = requiredTensor(valueResOut, "valueResOut"), as = requiredTensor(attnScoresOut, "attnScoresOut");
    at::Tensor ar = requiredTensor(attnResOut, "attnResOut"), ctx = requiredTensor(contextOut, "contextOut");
    checkMhaShapes(op, q, k, v, attnHeadNum, attnDimPerHead, srcLen, tgtLen);
    const int64_t cols = attnHeadNum * attnDimPerHead, batch = q.size(0) / tgtLen;
    const int64_t scores = batch * attnHeadNum * tgtLen * srcLen;
    for (const at::Tensor& w : {wq, wk, wv, wo}) {
      TORCH_CHECK(w.dim() == 2 && w.size(0) == cols && w.size(1) == cols, op, ": the weights must be [", cols, ", ",
                  cols, "], got ", w.sizes());
    }
    for (const at::Tensor& b : {bq, bk, bv, bo}) {
      TORCH_CHECK(!b.defined() || b.numel() == cols, op, ": a bias must hold ", cols, " values, got ", b.sizes());
    }
    const std::vector<int64_t> score_shape{batch, attnHeadNum, tgtLen, srcLen};
    TORCH_CHECK(am.dim() <= 4 && at::is_expandable_to(am.sizes(), score_shape), op,
                ": attnMask must broadcast to [", batch, ", ", attnHeadNum, ", ", tgtLen, ", ", srcLen, "], got ",
                am.sizes());
    TORCH_CHECK(keepProb > 0.0 && keepProb <= 1.0, op, ": keepProb must be in (0, 1], got ", keepProb);
    TORCH_CHECK(keepProb == 1.0 || dm.defined(), op, ": keepProb < 1 needs dropoutMask");
    TORCH_CHECK(!dm.defined() || (dm.scalar_type() == at::kByte && dm.numel() * 8 >= scores), op,
                ": dropoutMask must be uint8 with a bit for each of the ", scores, " scores");
    TORCH_CHECK(as.scalar_type() == (softmaxUseFloat ? at::kFloat : q.scalar_type()), op,
                ": attnScoresOut must be float32 with softmaxUseFloat, else query's dtype");
    TORCH_CHECK(dmo.scalar_type() == at::kByte && dmo.numel() * 8 >= scores, op,
                ": dropoutMaskOut must be uint8 with a bit for each of the ", scores, " scores");
    std::vector<at::Tensor> ins{q, k, v, wq, wk, wv, am, wo};
    if (dm.defined()) ins.push_back(dm);
    return Prepared{ins, [=]() mutable {
                      const auto project = [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
                        at::Tensor r = at::matmul(f32(x), f32(w).t());
                        return b.defined() ? r + f32(b).reshape({-1}) : r;
                      };
                      const at::Tensor qh = toHeads(project(q, wq, bq) * (1.0 / std::sqrt(double(attnDimPerHead))),
                                                    batch, tgtLen, attnHeadNum, attnDimPerHead);
                      const at::Tensor kh = toHeads(project(k, wk, bk), batch, srcLen, attnHeadNum, attnDimPerHead);
                      const at::Tensor vh = toHeads(project(v, wv, bv), batch, srcLen, attnHeadNum, attnDimPerHead);
                      const at::Tensor probs = at::softmax(at::matmul(qh, kh.transpose(-2, -1)) + f32(am), -1);
                      at::Tensor dropped = probs;
                      if (keepProb < 1.0) {
                        dropped = probs * keepFromBits(dm, scores).view(probs.sizes()) * (1.0 / keepProb);
                        // The mask used is returned; bytes past the caller's mask (padding) read as kept.
                        const int64_t n = std::min(dm.numel(), dmo.numel());
                        dmo.fill_(0xFF);
                        dmo.narrow(0, 0, n).copy_(dm.narrow(0, 0, n));
                      } else {
                        dmo.fill_(0xFF);  // nothing dropped
                      }
                      const at::Tensor context = toRows(at::matmul(dropped, vh));
                      y.copy_(project(context, wo, bo));
                      qr.copy_(qh);
                      kr.copy_(kh);
                      vr.copy_(vh);
                      as.copy_(probs);
                      ar.copy_(dropped);
                      ctx.copy_(context);
                    },
                    {y, dmo, qr, kr, vr, as, ar, ctx}};
  });
}
NPU_ATEN_OP(MultiHeadAttention,
            "query, key, value, queryWeight, keyWeight, valueWeight, attnMask, outProjWeight, queryBias, keyBias, "
            "valueBias, outProjBias, dropoutMask, attnHeadNum, attnDimPerHead, srcLen, tgtLen, keepProb, "
            "softmaxUseFloat, yOut, dropoutMaskOut, queryResOut, keyResOut, valueResOut, attnScoresOut, attnResOut, "
            "contextOut");

// The gradient of MultiHeadAttention from its saved results (queryRes is the scaled q, attnScores the softmax,
// attnRes the dropped probabilities); bias gradients are row sums ([1, H * D]) whether or not a bias was given.
extern "C" NOP_API aclnnStatus aclnnMultiHeadAttentionGradGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* queryWeight,
    const aclTensor* keyWeight, const aclTensor* valueWeight, const aclTensor* outProjWeight,
    const aclTensor* queryRes, const aclTensor* keyRes, const aclTensor* valueRes, const aclTensor* attnScores,
    const aclTensor* attnRes, const aclTensor* context, const aclTensor* yGrad, const aclTensor* dropoutMask,
    int64_t attnHeadNum, int64_t attnDimPerHead, int64_t srcLen, int64_t tgtLen, double keepProb,
    bool softmaxUseFloat, aclTensor* queryWeightGrad, aclTensor* keyWeightGrad, aclTensor* valueWeightGrad,
    aclTensor* outProjWeightGrad, aclTensor* queryGrad, aclTensor* keyGrad, aclTensor* valueGrad,
    aclTensor* queryBiasGrad, aclTensor* keyBiasGrad, aclTensor* valueBiasGrad, aclTensor* outProjBiasGrad,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMultiHeadAttentionGrad", workspaceSize, executor, [&] {
    const char* op = "aclnnMultiHeadAttentionGrad";
    at::Tensor q = requiredTensor(query, "query"), k = requiredTensor(key, "key"), v = requiredTensor(value, "value");
    at::Tensor wq = requiredTensor(queryWeight, "queryWeight"), wk = requiredTensor(keyWeight, "keyWeight");
    at::Tensor wv = requiredTensor(valueWeight, "valueWeight"), wo = requiredTensor(outProjWeight, "outProjWeight");
    at::Tensor qr = requiredTensor(queryRes, "queryRes"), kr = requiredTensor(keyRes, "keyRes");
    at::Tensor vr = requiredTensor(valueRes, "valueRes"), as = requiredTensor(attnScores, "attnScores");
    at::Tensor ar = requiredTensor(attnRes, "attnRes"), ctx = requiredTensor(context, "context");
    at::Tensor gy = requiredTensor(yGrad, "yGrad"), dm = hostTensor(dropoutMask);
    at::Tensor gwq = requiredTensor(queryWeightGrad, "queryWeightGrad"), gwk = requiredTensor(keyWeightGrad, "keyWeightGrad");
    at::Tensor gwv = requiredTensor(valueWeightGrad, "valueWeightGrad");
    at::Tensor gwo = requiredTensor(outProjWeightGrad, "outProjWeightGrad");
    at::Tensor gq = requiredTensor(queryGrad, "queryGrad"), gk = requiredTensor(keyGrad, "keyGrad");
    at::Tensor gv = requiredTensor(valueGrad, "valueGrad");
    at::Tensor gbq = requiredTensor(queryBiasGrad, "queryBiasGrad"), gbk = requiredTensor(keyBiasGrad, "keyBiasGrad");
    at::Tensor gbv = requiredTensor(valueBiasGrad, "valueBiasGrad");
    at::Tensor gbo = requiredTensor(outProjBiasGrad, "outProjBiasGrad");
    checkMhaShapes(op, q, k, v, attnHeadNum, attnDimPerHead, srcLen, tgtLen);
    const int64_t cols = attnHeadNum * attnDimPerHead, batch = q.size(0) / tgtLen;
    const int64_t scores = batch * attnHeadNum * tgtLen * srcLen;
    const std::vector<int64_t> score_shape{batch, attnHeadNum, tgtLen, srcLen};
    TORCH_CHECK(as.sizes() == at::IntArrayRef(score_shape) && ar.sizes() == at::IntArrayRef(score_shape), op,
                ": attnScores and attnRes must be ", at::IntArrayRef(score_shape));
    TORCH_CHECK(qr.numel() == q.numel() && kr.numel() == k.numel() && vr.numel() == v.numel(), op,
                ": queryRes / keyRes / valueRes must be the forward's [B, H, S, D] results");
    TORCH_CHECK(as.scalar_type() == (softmaxUseFloat ? at::kFloat : q.scalar_type()), op,
                ": attnScores must be float32 with softmaxUseFloat, else query's dtype (the forward's)");
    TORCH_CHECK(gy.sizes() == q.sizes() && ctx.sizes() == q.sizes(), op, ": yGrad and context must be [",
                q.size(0), ", ", cols, "]");
    TORCH_CHECK(keepProb > 0.0 && keepProb <= 1.0, op, ": keepProb must be in (0, 1], got ", keepProb);
    TORCH_CHECK(keepProb == 1.0 || (dm.defined() && dm.scalar_type() == at::kByte && dm.numel() * 8 >= scores), op,
                ": keepProb < 1 needs the forward's uint8 dropoutMask (a bit for each of the ", scores, " scores)");
    std::vector<at::Tensor> ins{q, k, v, wq, wk, wv, wo, qr, kr, vr, as, ar, ctx, gy};
    if (dm.defined()) ins.push_back(dm);
    return Prepared{ins, [=]() mutable {
                      const at::Tensor g = f32(gy);
                      gwo.copy_(at::matmul(g.t(), f32(ctx)));
                      gbo.copy_(at::sum(g, {0}, true));
                      const at::Tensor gctx = toHeads(at::matmul(g, f32(wo)), batch, tgtLen, attnHeadNum,
                                                      attnDimPerHead);
                      const at::Tensor qh = f32(qr).view({batch, attnHeadNum, tgtLen, attnDimPerHead});
                      const at::Tensor kh = f32(kr).view({batch, attnHeadNum, srcLen, attnDimPerHead});
                      const at::Tensor vh = f32(vr).view({batch, attnHeadNum, srcLen, attnDimPerHead});
                      const at::Tensor gvh = at::matmul(f32(ar).transpose(-2, -1), gctx);
                      at::Tensor gprobs = at::matmul(gctx, vh.transpose(-2, -1));
                      if (keepProb < 1.0) {
                        gprobs = gprobs * keepFromBits(dm, scores).view(gprobs.sizes()) * (1.0 / keepProb);
                      }
                      const at::Tensor gs = softmaxGrad(gprobs, f32(as));
                      const double scale = 1.0 / std::sqrt(double(attnDimPerHead));
                      // q was scaled after its projection: the projection's gradient carries the scale.
                      const at::Tensor gql = toRows(at::matmul(gs, kh)) * scale;
                      const at::Tensor gkl = toRows(at::matmul(gs.transpose(-2, -1), qh));
                      const at::Tensor gvl = toRows(gvh);
                      const auto back = [](const at::Tensor& gl, const at::Tensor& x, const at::Tensor& w,
                                           at::Tensor& gw, at::Tensor& gx, at::Tensor& gb) {
                        gw.copy_(at::matmul(gl.t(), f32(x)));
                        gx.copy_(at::matmul(gl, f32(w)));
                        gb.copy_(at::sum(gl, {0}, true));
                      };
                      back(gql, q, wq, gwq, gq, gbq);
                      back(gkl, k, wk, gwk, gk, gbk);
                      back(gvl, v, wv, gwv, gv, gbv);
                    },
                    {gwq, gwk, gwv, gwo, gq, gk, gv, gbq, gbk, gbv, gbo}};
  });
}
NPU_ATEN_OP(MultiHeadAttentionGrad,
            "query, key, value, queryWeight, keyWeight, valueWeight, outProjWeight, queryRes, keyRes, valueRes, "
            "attnScores, attnRes, context, yGrad, dropoutMask, attnHeadNum, attnDimPerHead, srcLen, tgtLen, keepProb, "
            "softmaxUseFloat, queryWeightGrad, keyWeightGrad, valueWeightGrad, outProjWeightGrad, queryGrad, keyGrad, "
            "valueGrad, queryBiasGrad, keyBiasGrad, valueBiasGrad, outProjBiasGrad");

namespace {

// The software NPU implements AttentionScore's default layout only (see the adapter for why).
void checkDefaultLayout(const char* op, bool a, bool b, bool c, bool d) {
  TORCH_CHECK(!a && !b && !c && !d, op, ": only the default layout (every transpose flag false) is implemented");
}

void checkScoreInputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op, ": query, key and value must be [B, N, S, D]");
  TORCH_CHECK(k.size(0) == q.size(0) && k.size(1) == q.size(1) && k.size(3) == q.size(3), op, ": key ", k.sizes(),
              " must match query ", q.sizes(), " in B, N and D");
  TORCH_CHECK(v.size(0) == q.size(0) && v.size(1) == q.size(1) && v.size(2) == k.size(2), op, ": value ",
              v.sizes(), " must match key ", k.sizes(), " in B, N and S");
  for (const at::Tensor& t : {q, k, v}) {
    TORCH_CHECK(isAttentionFloat(t), op, ": query, key and value must be float32, float16 or bfloat16");
  }
}

}  // namespace

// attentionScoreOut [B * Sq, N * Dv] = permute(dropout(softmax(scale * q k^T + mask)) v) and softmaxOut
// [B, N, Sq, Sk] (before dropout); dropMask holds one uint8 per score (1 = kept).
extern "C" NOP_API aclnnStatus aclnnAttentionScoreGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* attentionMask,
    const aclScalar* scale, const aclTensor* dropMask, double keepProb, bool queryTranspose, bool keyTranspose,
    bool bmmScoreTransposeA, bool bmmScoreTransposeB, aclTensor* attentionScoreOut, aclTensor* softmaxOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAttentionScore", workspaceSize, executor, [&] {
    const char* op = "aclnnAttentionScore";
    at::Tensor q = requiredTensor(query, "query"), k = requiredTensor(key, "key"), v = requiredTensor(value, "value");
    at::Tensor am = requiredTensor(attentionMask, "attentionMask"), dm = requiredTensor(dropMask, "dropMask");
    at::Tensor out = requiredTensor(attentionScoreOut, "attentionScoreOut");
    at::Tensor sm = requiredTensor(softmaxOut, "softmaxOut");
    const double sc = hostScalar(scale).toDouble();
    checkDefaultLayout(op, queryTranspose, keyTranspose, bmmScoreTransposeA, bmmScoreTransposeB);
    checkScoreInputs(op, q, k, v);
    const std::vector<int64_t> score_shape{q.size(0), q.size(1), q.size(2), k.size(2)};
    TORCH_CHECK(sm.sizes() == at::IntArrayRef(score_shape), op, ": softmaxOut must be ", at::IntArrayRef(score_shape));
    TORCH_CHECK(am.dim() <= 4 && at::is_expandable_to(am.sizes(), score_shape), op,
                ": attentionMask must broadcast to ", at::IntArrayRef(score_shape), ", got ", am.sizes());
    TORCH_CHECK(out.numel() == q.size(0) * q.size(1) * q.size(2) * v.size(3), op,
                ": attentionScoreOut must hold [B * Sq, N * Dv] values");
    TORCH_CHECK(dm.scalar_type() == at::kByte && dm.numel() == sm.numel(), op,
                ": dropMask must be uint8 with one byte per score (", sm.numel(), ")");
    TORCH_CHECK(keepProb > 0.0 && keepProb <= 1.0, op, ": keepProb must be in (0, 1], got ", keepProb);
    return Prepared{{q, k, v, am, dm}, [=]() mutable {
                      const at::Tensor probs =
                          at::softmax(at::matmul(f32(q), f32(k).transpose(-2, -1)) * sc + f32(am), -1);
                      sm.copy_(probs);
                      const at::Tensor dropped = probs * dm.view(probs.sizes()).to(at::kFloat) * (1.0 / keepProb);
                      out.copy_(toRows(at::matmul(dropped, f32(v))).view(out.sizes()));
                    },
                    {out, sm}};
  });
}
NPU_ATEN_OP(AttentionScore,
            "query, key, value, attentionMask, scale, dropMask, keepProb, queryTranspose, keyTranspose, "
            "bmmScoreTransposeA, bmmScoreTransposeB, attentionScoreOut, softmaxOut");

// The gradient of AttentionScore from its softmax output and byte mask. gradOutput is the forward's
// [B * Sq, N * Dv] result layout. Each gradient is written in its output's layout: a 4-D output gets
// [B, N, S, D], a 2-D one the [B * S, N * D] rows of the forward's result layout.
extern "C" NOP_API aclnnStatus aclnnAttentionScoreGradGetWorkspaceSize(
    const aclTensor* softmaxOutput, const aclTensor* gradOutput, const aclTensor* value, const aclTensor* key,
    const aclTensor* query, const aclScalar* scale, const aclTensor* dropMask, double keepProb, bool queryTranspose,
    bool keyTranspose, bool valueTranspose, bool dxTranspose, aclTensor* valueDw, aclTensor* queryDx,
    aclTensor* keyDw, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAttentionScoreGrad", workspaceSize, executor, [&] {
    const char* op = "aclnnAttentionScoreGrad";
    at::Tensor p = requiredTensor(softmaxOutput, "softmaxOutput"), g = requiredTensor(gradOutput, "gradOutput");
    at::Tensor q = requiredTensor(query, "query"), k = requiredTensor(key, "key"), v = requiredTensor(value, "value");
    at::Tensor dm = requiredTensor(dropMask, "dropMask");
    at::Tensor gv = requiredTensor(valueDw, "valueDw"), gq = requiredTensor(queryDx, "queryDx");
    at::Tensor gk = requiredTensor(keyDw, "keyDw");
    const double sc = hostScalar(scale).toDouble();
    checkDefaultLayout(op, queryTranspose, keyTranspose, valueTranspose, dxTranspose);
    checkScoreInputs(op, q, k, v);
    const std::vector<int64_t> score_shape{q.size(0), q.size(1), q.size(2), k.size(2)};
    TORCH_CHECK(p.sizes() == at::IntArrayRef(score_shape), op, ": softmaxOutput must be ",
                at::IntArrayRef(score_shape), ", got ", p.sizes());
    TORCH_CHECK(g.numel() == q.size(0) * q.size(1) * q.size(2) * v.size(3), op,
                ": gradOutput must hold the forward's [B * Sq, N * Dv] values, got ", g.sizes());
    TORCH_CHECK(dm.scalar_type() == at::kByte && dm.numel() == p.numel(), op,
                ": dropMask must be uint8 with one byte per score (", p.numel(), ")");
    TORCH_CHECK(keepProb > 0.0 && keepProb <= 1.0, op, ": keepProb must be in (0, 1], got ", keepProb);
    for (const auto& [out, like] : {std::make_pair(gq, q), std::make_pair(gk, k), std::make_pair(gv, v)}) {
      TORCH_CHECK(out.numel() == like.numel() && (out.dim() == 4 || out.dim() == 2), op,
                  ": each gradient must be [B, N, S, D] or [B * S, N * D] of its input");
    }
    return Prepared{{p, g, v, k, q, dm}, [=]() mutable {
                      const at::Tensor gh = f32(g).reshape({q.size(0), q.size(2), q.size(1), v.size(3)})
                                                .permute({0, 2, 1, 3});
                      const at::Tensor keep = dm.view(p.sizes()).to(at::kFloat) * (1.0 / keepProb);
                      const at::Tensor pf = f32(p);
                      const at::Tensor gprobs = at::matmul(gh, f32(v).transpose(-2, -1)) * keep;
                      const at::Tensor gs = softmaxGrad(gprobs, pf) * sc;
                      const auto put = [](at::Tensor& out, const at::Tensor& grad) {
                        out.copy_(out.dim() == 4 ? grad : toRows(grad).view(out.sizes()));
                      };
                      put(gv, at::matmul((pf * keep).transpose(-2, -1), gh));
                      put(gq, at::matmul(gs, f32(k)));
                      put(gk, at::matmul(gs.transpose(-2, -1), f32(q)));
                    },
                    {gv, gq, gk}};
  });
}
NPU_ATEN_OP(AttentionScoreGrad,
            "softmaxOutput, gradOutput, value, key, query, scale, dropMask, keepProb, queryTranspose, keyTranspose, "
            "valueTranspose, dxTranspose, valueDw, queryDx, keyDw");
