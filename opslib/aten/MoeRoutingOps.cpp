// MoeRoutingOps.cpp - MoE routing device ops: the gates (MoeGatingTopKSoftmax, MoeGatingTopK, MoeGatingTopKV2 and
// MoeGatingTopKBackward), token expansion by expert (MoeInitRouting, MoeInitRoutingV3 with drop / pad, active
// expert ranges and int8 quantization), MoeComputeExpertTokens and MoeReRouting (tokens from rank order into
// expert order).
//
// Orders are defined exactly, as torch_npu documents them: a top-k is stable and descending (of equal scores the
// lower expert or group index first); sorting by expert is stable and ascending over the flattened [tokens, k]
// positions (of equal experts the lower position first).
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <limits>
#include <tuple>
#include <vector>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

bool isFloating(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
}

bool isIndex(const at::Tensor& t) { return t.scalar_type() == at::kInt || t.scalar_type() == at::kLong; }

// Indices of each row's `k` largest values, stable: equal values keep the lower index first.
at::Tensor stableTopIndices(const at::Tensor& values, int64_t k) {
  return std::get<1>(values.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true)).narrow(-1, 0, k);
}

// The stable ascending order of a 1-D tensor (positions of equal values stay in position order).
at::Tensor stableAscendingOrder(const at::Tensor& values) {
  return std::get<1>(values.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
}

void checkRange(const char* op, const char* what, const at::Tensor& values, int64_t low, int64_t high) {
  if (values.numel() == 0) return;
  TORCH_CHECK(values.min().item<int64_t>() >= low && values.max().item<int64_t>() < high, op, ": ", what,
              " must be in [", low, ", ", high, ")");
}

// ------------------------------------------------------------------------------------------------ gating

// The gate's scores in float32: softmax (normType 0) or sigmoid (normType 1) over the experts.
at::Tensor gateScores(const at::Tensor& x, int64_t norm_type) {
  const at::Tensor xf = x.to(at::kFloat);
  return norm_type == 0 ? at::softmax(xf, -1) : at::sigmoid(xf);
}

// Group-limited top-k: groups ranked by their best score (mode 0) or the sum of their best two (mode 1), the
// k_group best kept, then the k best experts of the kept groups.
at::Tensor groupedTopK(const at::Tensor& select, int64_t k, int64_t k_group, int64_t group_count, int64_t mode) {
  if (group_count <= 1) return stableTopIndices(select, k);
  const int64_t tokens = select.size(0);
  const at::Tensor grouped = select.reshape({tokens, group_count, -1});
  const at::Tensor group_score = mode == 0 ? grouped.amax(-1) : std::get<0>(grouped.topk(2, -1)).sum(-1);
  const at::Tensor kept_groups = stableTopIndices(group_score, k_group);
  const at::Tensor kept = at::zeros({tokens, group_count}, select.options().dtype(at::kBool)).scatter_(1, kept_groups,
                                                                                                      true);
  const at::Tensor candidates = grouped.masked_fill(kept.logical_not().unsqueeze(-1),
                                                    -std::numeric_limits<float>::infinity());
  return stableTopIndices(candidates.reshape({tokens, -1}), k);
}

// The weights of the picked experts: their unbiased scores, renormalised for sigmoid, scaled.
at::Tensor gateWeights(const at::Tensor& scores, const at::Tensor& picks, int64_t norm_type, double scaling,
                       double eps) {
  at::Tensor weights = scores.gather(1, picks);
  if (norm_type == 1) weights = weights / (weights.sum(-1, /*keepdim=*/true) + eps);
  return weights * scaling;
}

struct GateArgs {
  int64_t k, k_group, group_count, group_select_mode, renorm, norm_type;
};

void checkGateArgs(const char* op, const at::Tensor& x, const at::Tensor& bias, const GateArgs& a, bool hashed) {
  TORCH_CHECK(x.dim() == 2 && isFloating(x), op, ": x must be a 2-D float tensor [tokens, experts], got ",
              x.scalar_type(), x.sizes());
  const int64_t experts = x.size(1);
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == experts), op, ": bias must be [", experts, "]");
  TORCH_CHECK(a.norm_type == 0 || a.norm_type == 1, op, ": normType must be 0 (softmax) or 1 (sigmoid), got ",
              a.norm_type);
  TORCH_CHECK(a.renorm == 0, op, ": renorm must be 0, got ", a.renorm);
  if (hashed) {
    TORCH_CHECK(a.k >= 1, op, ": k must be at least 1, got ", a.k);
    return;
  }
  TORCH_CHECK(a.group_count >= 1 && experts % a.group_count == 0, op, ": groupCount must divide the ", experts,
              " experts, got ", a.group_count);
  TORCH_CHECK(a.k_group >= 1 && a.k_group <= a.group_count, op, ": kGroup must be in [1, ", a.group_count, "], got ",
              a.k_group);
  TORCH_CHECK(a.group_select_mode == 0 || a.group_select_mode == 1, op, ": groupSelectMode must be 0 or 1, got ",
              a.group_select_mode);
  const int64_t group_size = experts / a.group_count;
  TORCH_CHECK(a.group_select_mode == 0 || a.group_count == 1 || group_size >= 2, op,
              ": groupSelectMode 1 needs groups of at least 2 experts");
  TORCH_CHECK(a.k >= 1 && a.k <= a.k_group * group_size, op, ": k must be in [1, ", a.k_group * group_size, "], got ",
              a.k);
}

void checkGateOutputs(const char* op, const at::Tensor& x, int64_t k, const at::Tensor& y, const at::Tensor& idx,
                      const at::Tensor& norm_out) {
  const std::vector<int64_t> picks{x.size(0), k};
  TORCH_CHECK(y.sizes().equals(picks) && idx.sizes().equals(picks) && norm_out.sizes().equals(x.sizes()), op,
              ": yOut and expertIdxOut must be [", x.size(0), ", ", k, "] and outOut ", x.sizes());
}

aclnnStatus prepareGate(const char* op, const aclTensor* x, const aclTensor* bias, const aclTensor* input_ids,
                        const aclTensor* tid2eid, GateArgs a, double scaling, double eps, aclTensor* y_out,
                        aclTensor* idx_out, aclTensor* norm_out, uint64_t* workspace_size, aclOpExecutor** executor) {
  return prepareOp(op, workspace_size, executor, [&] {
    at::Tensor xt = requiredTensor(x, "x"), b = hostTensor(bias), ids = hostTensor(input_ids),
               table = hostTensor(tid2eid);
    at::Tensor y = requiredTensor(y_out, "yOut"), idx = requiredTensor(idx_out, "expertIdxOut"),
               norm = requiredTensor(norm_out, "outOut");
    const bool hashed = ids.defined();
    checkGateArgs(op, xt, b, a, hashed);
    if (hashed) {
      TORCH_CHECK(isIndex(ids) && isIndex(table) && ids.dim() == 1 && ids.size(0) == xt.size(0) && table.dim() == 2 &&
                      table.size(1) == a.k,
                  op, ": inputIds must be integer [", xt.size(0), "] and tid2eid integer [ids, ", a.k, "]");
    }
    checkGateOutputs(op, xt, a.k, y, idx, norm);
    return Prepared{{xt, b, ids, table}, [=]() mutable {
                      const at::Tensor scores = gateScores(xt, a.norm_type);
                      at::Tensor picks;
                      if (hashed) {
                        const at::Tensor rows = ids.to(at::kLong);
                        checkRange(op, "inputIds", rows, 0, table.size(0));
                        picks = table.index_select(0, rows).to(at::kLong);
                        checkRange(op, "the experts tid2eid names", picks, 0, xt.size(1));
                      } else {
                        // The bias steers the choice only; the weights are the unbiased scores.
                        const at::Tensor select = b.defined() ? scores + b.to(at::kFloat) : scores;
                        picks = groupedTopK(select, a.k, a.k_group, a.group_count, a.group_select_mode);
                      }
                      y.copy_(gateWeights(scores, picks, a.norm_type, scaling, eps));
                      idx.copy_(picks);
                      norm.copy_(scores);
                    },
                    {y, idx, norm}};
  });
}

}  // namespace

// y = the k best softmax probabilities per token (float32, rounded once), expertIdx their experts (the number of
// experts for finished tokens), rowIdx[t, j] = j * tokens + t.
extern "C" NOP_API aclnnStatus aclnnMoeGatingTopKSoftmaxGetWorkspaceSize(const aclTensor* x,
                                                                        const aclTensor* finishedOptional, int64_t k,
                                                                        aclTensor* yOut, aclTensor* expertIdxOut,
                                                                        aclTensor* rowIdxOut, uint64_t* workspaceSize,
                                                                        aclOpExecutor** executor) {
  return prepareOp("aclnnMoeGatingTopKSoftmax", workspaceSize, executor, [&] {
    const char* op = "aclnnMoeGatingTopKSoftmax";
    at::Tensor xt = requiredTensor(x, "x"), finished = hostTensor(finishedOptional);
    at::Tensor y = requiredTensor(yOut, "yOut"), idx = requiredTensor(expertIdxOut, "expertIdxOut"),
               rows = requiredTensor(rowIdxOut, "rowIdxOut");
    TORCH_CHECK((xt.dim() == 2 || xt.dim() == 3) && isFloating(xt), op,
                ": x must be a 2-D or 3-D float tensor, got ", xt.scalar_type(), xt.sizes());
    const int64_t experts = xt.size(-1);
    TORCH_CHECK(k >= 1 && k <= experts, op, ": k must be in [1, ", experts, "], got ", k);
    const int64_t tokens = xt.numel() / experts;
    TORCH_CHECK(!finished.defined() || (finished.scalar_type() == at::kBool && finished.numel() == tokens), op,
                ": finished must be bool with one value per token (", tokens, ")");
    TORCH_CHECK(y.numel() == tokens * k && idx.numel() == tokens * k && rows.numel() == tokens * k, op,
                ": the outputs must hold [", tokens, ", ", k, "] values");
    return Prepared{{xt, finished}, [=]() mutable {
                      const at::Tensor probs = at::softmax(xt.reshape({tokens, experts}).to(at::kFloat), -1);
                      at::Tensor picks = stableTopIndices(probs, k);
                      const at::Tensor weights = probs.gather(1, picks);
                      if (finished.defined()) picks = picks.masked_fill(finished.reshape({tokens, 1}), experts);
                      const at::Tensor row_idx = at::arange(k * tokens, picks.options()).view({k, tokens}).t();
                      y.copy_(weights.reshape(y.sizes()));
                      idx.copy_(picks.reshape(idx.sizes()));
                      rows.copy_(row_idx.reshape(rows.sizes()));
                    },
                    {y, idx, rows}};
  });
}
NPU_ATEN_OP(MoeGatingTopKSoftmax, "x, finishedOptional, k, yOut, expertIdxOut, rowIdxOut");

// yOut = the picked experts' scores (renormalised with eps for sigmoid) * routedScalingFactor; outOut = the
// scores (softmax or sigmoid of x, float32), written whatever outFlag says (the backward reads them).
extern "C" NOP_API aclnnStatus aclnnMoeGatingTopKGetWorkspaceSize(
    const aclTensor* x, const aclTensor* biasOptional, int64_t k, int64_t kGroup, int64_t groupCount,
    int64_t groupSelectMode, int64_t renorm, int64_t normType, bool outFlag, double routedScalingFactor, double eps,
    aclTensor* yOut, aclTensor* expertIdxOut, aclTensor* outOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareGate("aclnnMoeGatingTopK", x, biasOptional, nullptr, nullptr,
                     GateArgs{k, kGroup, groupCount, groupSelectMode, renorm, normType}, routedScalingFactor, eps, yOut,
                     expertIdxOut, outOut, workspaceSize, executor);
}
NPU_ATEN_OP(MoeGatingTopK, "x, biasOptional, k, kGroup, groupCount, groupSelectMode, renorm, normType, outFlag, "
                           "routedScalingFactor, eps, yOut, expertIdxOut, outOut");

// Hash routing: token t's experts are tid2eid[inputIds[t]]; weights as MoeGatingTopK's.
extern "C" NOP_API aclnnStatus aclnnMoeGatingTopKV2GetWorkspaceSize(
    const aclTensor* x, const aclTensor* biasOptional, const aclTensor* inputIdsOptional,
    const aclTensor* tid2eidOptional, int64_t k, int64_t kGroup, int64_t groupCount, int64_t groupSelectMode,
    int64_t renorm, int64_t normType, bool outFlag, double routedScalingFactor, double eps, aclTensor* yOut,
    aclTensor* expertIdxOut, aclTensor* outOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareGate("aclnnMoeGatingTopKV2", x, biasOptional, inputIdsOptional, tid2eidOptional,
                     GateArgs{k, kGroup, groupCount, groupSelectMode, renorm, normType}, routedScalingFactor, eps, yOut,
                     expertIdxOut, outOut, workspaceSize, executor);
}
NPU_ATEN_OP(MoeGatingTopKV2, "x, biasOptional, inputIdsOptional, tid2eidOptional, k, kGroup, groupCount, "
                             "groupSelectMode, renorm, normType, outFlag, routedScalingFactor, eps, yOut, "
                             "expertIdxOut, outOut");

// The gradient of MoeGatingTopK's yOut with respect to x, from its scores xNorm and picks expertIdx: sigmoid
// scores through the renormalisation, softmax scores through the softmax (to every expert).
extern "C" NOP_API aclnnStatus aclnnMoeGatingTopKBackwardGetWorkspaceSize(
    const aclTensor* xNorm, const aclTensor* gradY, const aclTensor* expertIdx, int64_t renorm, int64_t normType,
    double routedScalingFactor, double eps, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMoeGatingTopKBackward", workspaceSize, executor, [&] {
    const char* op = "aclnnMoeGatingTopKBackward";
    at::Tensor scores = requiredTensor(xNorm, "xNorm"), grad = requiredTensor(gradY, "gradY"),
               picks = requiredTensor(expertIdx, "expertIdx"), o = requiredTensor(out, "out");
    TORCH_CHECK(scores.dim() == 2 && grad.dim() == 2 && grad.size(0) == scores.size(0) &&
                    picks.sizes().equals(grad.sizes()) && o.sizes().equals(scores.sizes()),
                op, ": xNorm / out must be [tokens, experts] and gradY / expertIdx [tokens, k]");
    TORCH_CHECK(isIndex(picks), op, ": expertIdx must be int32 or int64");
    TORCH_CHECK(normType == 0 || normType == 1, op, ": normType must be 0 or 1, got ", normType);
    TORCH_CHECK(renorm == 0, op, ": renorm must be 0, got ", renorm);
    return Prepared{{scores, grad, picks}, [=]() mutable {
                      const at::Tensor p = scores.to(at::kFloat), gy = grad.to(at::kFloat);
                      const at::Tensor experts = picks.to(at::kLong);
                      checkRange(op, "expertIdx", experts, 0, p.size(1));
                      at::Tensor grad_x;
                      if (normType == 1) {
                        // y_j = s * g_j / (sum g + eps), g = sigmoid(x) at the picks; dg/dx = g (1 - g).
                        const at::Tensor g = p.gather(1, experts);
                        const at::Tensor denom = g.sum(-1, /*keepdim=*/true) + eps;
                        const at::Tensor dg =
                            (gy / denom - (gy * g).sum(-1, /*keepdim=*/true) / (denom * denom)) * routedScalingFactor;
                        grad_x = at::zeros_like(p).scatter_add_(1, experts, dg * g * (1 - g));
                      } else {
                        // y_j = s * p_j with p = softmax(x): dx = p * (dp - sum(dp * p)).
                        const at::Tensor dp = at::zeros_like(p).scatter_add_(1, experts, gy * routedScalingFactor);
                        grad_x = p * (dp - (dp * p).sum(-1, /*keepdim=*/true));
                      }
                      o.copy_(grad_x);
                    },
                    {o}};
  });
}
NPU_ATEN_OP(MoeGatingTopKBackward, "xNorm, gradY, expertIdx, renorm, normType, routedScalingFactor, eps, out");

// ------------------------------------------------------------------------------------------ init routing

// Positions sorted by expert; expandedRowIdx[rowIdx[p_i]] = i; expandedX row i = x[rowIdx[p_i] % tokens] for the
// rows expandedX has (min(activeNum, tokens) * k); expandedExpertIdx the sorted experts.
extern "C" NOP_API aclnnStatus aclnnMoeInitRoutingGetWorkspaceSize(const aclTensor* x, const aclTensor* rowIdx,
                                                                  const aclTensor* expertIdx, int64_t activeNum,
                                                                  aclTensor* expandedXOut,
                                                                  aclTensor* expandedRowIdxOut,
                                                                  aclTensor* expandedExpertIdxOut,
                                                                  uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMoeInitRouting", workspaceSize, executor, [&] {
    const char* op = "aclnnMoeInitRouting";
    at::Tensor xt = requiredTensor(x, "x"), rows = requiredTensor(rowIdx, "rowIdx"),
               experts = requiredTensor(expertIdx, "expertIdx");
    at::Tensor ex = requiredTensor(expandedXOut, "expandedXOut"),
               erow = requiredTensor(expandedRowIdxOut, "expandedRowIdxOut"),
               eexp = requiredTensor(expandedExpertIdxOut, "expandedExpertIdxOut");
    TORCH_CHECK(xt.dim() == 2 && experts.dim() == 2 && rows.sizes().equals(experts.sizes()) &&
                    experts.size(0) == xt.size(0),
                op, ": x must be [tokens, H] and rowIdx / expertIdx [tokens, k]");
    TORCH_CHECK(isIndex(rows) && isIndex(experts), op, ": rowIdx and expertIdx must be integer tensors");
    TORCH_CHECK(activeNum >= 0, op, ": activeNum must be >= 0, got ", activeNum);
    const int64_t tokens = xt.size(0), nk = experts.numel();
    const int64_t active_rows = std::min(activeNum, tokens) * experts.size(1);
    TORCH_CHECK(ex.dim() == 2 && ex.size(0) == active_rows && ex.size(1) == xt.size(1) && erow.numel() == nk &&
                    eexp.numel() == nk,
                op, ": expandedXOut must be [", active_rows, ", ", xt.size(1), "] and the index outputs [", nk, "]");
    return Prepared{{xt, rows, experts}, [=]() mutable {
                      auto [sorted, order] = experts.reshape({-1}).to(at::kLong).sort(/*stable=*/true, 0, false);
                      const at::Tensor dst_to_src = rows.reshape({-1}).to(at::kLong).index_select(0, order);
                      checkRange(op, "rowIdx values", dst_to_src, 0, nk);
                      erow.copy_(at::zeros({nk}, dst_to_src.options())
                                     .scatter_(0, dst_to_src, at::arange(nk, dst_to_src.options())));
                      eexp.copy_(sorted);
                      if (active_rows > 0) {
                        ex.copy_(xt.index_select(0, dst_to_src.narrow(0, 0, active_rows).remainder(tokens)));
                      }
                    },
                    {ex, erow, eexp}};
  });
}
NPU_ATEN_OP(MoeInitRouting, "x, rowIdx, expertIdx, activeNum, expandedXOut, expandedRowIdxOut, expandedExpertIdxOut");

namespace {

struct RoutingV3 {
  int64_t active_num, capacity, expert_num, drop_pad, tokens_type, quant_mode, row_idx_type, start, end;
};

// Static quantization as defined: float16 arithmetic (x * scale + offset), round half to even, saturate.
at::Tensor staticQuant(const at::Tensor& rows, const at::Tensor& scale, const at::Tensor& offset) {
  at::Tensor v = rows.to(at::kHalf) * scale.reshape({-1}).narrow(0, 0, 1).to(at::kHalf);
  if (offset.defined()) v = v + offset.reshape({-1}).narrow(0, 0, 1).to(at::kHalf);
  return v.to(at::kFloat).round().clamp(-128, 127).to(at::kChar);
}

// Dynamic quantization of float32 rows: scale = max |row| / 127, q = round(row / scale) (0 for all-zero rows).
std::tuple<at::Tensor, at::Tensor> dynamicQuant(const at::Tensor& rows) {
  const at::Tensor scale = rows.abs().amax(-1) / 127;
  const at::Tensor safe = at::where(scale > 0, scale, at::ones_like(scale)).unsqueeze(-1);
  const at::Tensor q = at::where(scale.unsqueeze(-1) > 0, rows / safe, at::zeros_like(rows));
  return {q.round().clamp(-128, 127).to(at::kChar), scale};
}

// The expert-token statistics over the routed (in-range) experts: cumulative counts (0), counts (1) or
// (expert id, count) pairs of the experts that got tokens, in id order, zero rows after (2).
at::Tensor expertTokens(const at::Tensor& routed_experts, const RoutingV3& a, const at::Tensor& out) {
  const at::Tensor counts = (routed_experts - a.start).bincount({}, a.end - a.start);
  if (a.tokens_type == 0) return counts.cumsum(0);
  if (a.tokens_type == 1) return counts;
  const at::Tensor used = counts.nonzero().reshape({-1});
  at::Tensor pairs = at::zeros(out.sizes(), counts.options());
  pairs.narrow(0, 0, used.numel()).copy_(at::stack({used + a.start, counts.index_select(0, used)}, 1));
  return pairs;
}

void runInitRoutingV3(const at::Tensor& x, const at::Tensor& expert_idx, const at::Tensor& scale,
                      const at::Tensor& offset, const RoutingV3& a, at::Tensor& ex, at::Tensor& row_idx,
                      at::Tensor& tokens_out, at::Tensor& scale_out) {
  const int64_t k = expert_idx.size(1);
  const at::Tensor flat = expert_idx.reshape({-1}).to(at::kLong);
  // Experts below the range sort after all others; those at or above its end after the routed ones.
  const at::Tensor key = flat.masked_fill(flat < a.start, std::numeric_limits<int64_t>::max());
  const at::Tensor order = stableAscendingOrder(key);
  const int64_t routed = ((flat >= a.start) & (flat < a.end)).sum().item<int64_t>();
  const at::Tensor routed_pos = order.narrow(0, 0, routed);  // the routed positions, by expert
  const at::Tensor routed_experts = flat.index_select(0, routed_pos);
  tokens_out.copy_(expertTokens(routed_experts, a, tokens_out));

  at::Tensor slots, sources;  // expandedX rows and the positions they come from
  at::Tensor rows_idx = at::full({flat.numel()}, -1, flat.options());
  if (a.drop_pad == 0) {
    const int64_t used = a.active_num <= 0 ? routed : std::min(a.active_num, routed);
    slots = at::arange(used, flat.options());
    sources = routed_pos.narrow(0, 0, used);
    if (a.row_idx_type == 1) {
      rows_idx = order;  // scatter form: row i of the expansion came from position order[i]
    } else {
      rows_idx.scatter_(0, routed_pos, at::arange(routed, flat.options()));
    }
  } else {
    // Each expert keeps its first `capacity` tokens in sorted order, at (expert - start) * capacity + rank.
    const at::Tensor counts = (routed_experts - a.start).bincount({}, a.end - a.start);
    const at::Tensor first = counts.cumsum(0) - counts;
    const at::Tensor rank = at::arange(routed, flat.options()) - first.index_select(0, routed_experts - a.start);
    const at::Tensor keep = rank < a.capacity;
    slots = ((routed_experts - a.start) * a.capacity + rank).masked_select(keep);
    sources = routed_pos.masked_select(keep);
    rows_idx.scatter_(0, sources, slots);
  }
  row_idx.copy_(rows_idx);

  const at::Tensor src_rows = x.index_select(0, sources.div(k, "floor"));
  at::Tensor values = src_rows, row_scale;
  if (a.quant_mode == 0) {
    values = staticQuant(src_rows, scale, offset);
  } else if (a.quant_mode == 1) {
    at::Tensor v = src_rows.to(at::kFloat);
    if (scale.defined()) {
      // Smoothing scales: one row for all, or one row per routed expert.
      v = v * (scale.size(0) == 1 ? scale.to(at::kFloat)
                                  : scale.to(at::kFloat).index_select(0, flat.index_select(0, sources) - a.start));
    }
    std::tie(values, row_scale) = dynamicQuant(v);
  } else if (scale.defined()) {
    row_scale = scale.to(at::kFloat).index_select(0, sources.div(k, "floor"));
  }
  at::Tensor expanded = at::zeros({ex.numel() / std::max<int64_t>(x.size(1), 1), x.size(1)}, ex.options());
  expanded.index_copy_(0, slots, values.to(ex.scalar_type()));
  ex.copy_(expanded.view(ex.sizes()));
  at::Tensor scales = at::zeros({scale_out.numel()}, scale_out.options());
  if (row_scale.defined()) scales.index_copy_(0, slots, row_scale);
  scale_out.copy_(scales);
}

}  // namespace

// MoE routing with drop / pad, active expert ranges, expert-token statistics and int8 quantization (quantMode -1
// none, 0 static, 1 dynamic). Dropless: expandedX rows are the routed positions in expert order (the first
// activeNum when > 0); expandedRowIdx the gather (0) or scatter (1) indices. Drop / pad: [expertNum, capacity, H]
// with each expert's first `capacity` tokens, zeros elsewhere. Unused rows / scales / indices hold 0 / 0 / -1.
extern "C" NOP_API aclnnStatus aclnnMoeInitRoutingV3GetWorkspaceSize(
    const aclTensor* x, const aclTensor* expertIdx, const aclTensor* scaleOptional, const aclTensor* offsetOptional,
    int64_t activeNum, int64_t expertCapacity, int64_t expertNum, int64_t dropPadMode, int64_t expertTokensNumType,
    bool expertTokensNumFlag, int64_t quantMode, const aclIntArray* activeExpertRangeOptional, int64_t rowIdxType,
    aclTensor* expandedXOut, aclTensor* expandedRowIdxOut, aclTensor* expertTokensCountOrCumsumOut,
    aclTensor* expandedScaleOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMoeInitRoutingV3", workspaceSize, executor, [&] {
    const char* op = "aclnnMoeInitRoutingV3";
    at::Tensor xt = requiredTensor(x, "x"), experts = requiredTensor(expertIdx, "expertIdx");
    at::Tensor scale = hostTensor(scaleOptional), offset = hostTensor(offsetOptional);
    at::Tensor ex = requiredTensor(expandedXOut, "expandedXOut"),
               row_idx = requiredTensor(expandedRowIdxOut, "expandedRowIdxOut"),
               tokens_out = requiredTensor(expertTokensCountOrCumsumOut, "expertTokensCountOrCumsumOut"),
               scale_out = requiredTensor(expandedScaleOut, "expandedScaleOut");
    std::vector<int64_t> range = intArray(activeExpertRangeOptional);
    if (range.empty()) range = {0, expertNum};
    const RoutingV3 a{activeNum, expertCapacity, expertNum, dropPadMode, expertTokensNumType, quantMode,
                      rowIdxType, range.size() == 2 ? range[0] : 0, range.size() == 2 ? range[1] : 0};
    TORCH_CHECK(xt.dim() == 2 && experts.dim() == 2 && experts.size(0) == xt.size(0) && isIndex(experts), op,
                ": x must be [tokens, H] and expertIdx integer [tokens, k]");
    TORCH_CHECK(isFloating(xt) || xt.scalar_type() == at::kChar, op, ": x must be float16, bfloat16, float32 or int8");
    TORCH_CHECK(quantMode >= -1 && quantMode <= 1, op, ": quantMode must be -1, 0 or 1, got ", quantMode);
    TORCH_CHECK(dropPadMode == 0 || dropPadMode == 1, op, ": dropPadMode must be 0 or 1, got ", dropPadMode);
    TORCH_CHECK(expertTokensNumType >= 0 && expertTokensNumType <= 2, op, ": expertTokensNumType must be 0, 1 or 2");
    TORCH_CHECK(rowIdxType == 0 || rowIdxType == 1, op, ": rowIdxType must be 0 or 1, got ", rowIdxType);
    TORCH_CHECK(range.size() == 2 && a.start >= 0 && a.start < a.end && a.end <= expertNum, op,
                ": activeExpertRange must be [start, end) with 0 <= start < end <= expertNum (", expertNum, ")");
    TORCH_CHECK(dropPadMode == 0 || (expertCapacity >= 1 && rowIdxType == 0), op,
                ": drop / pad needs expertCapacity >= 1 and rowIdxType 0");
    TORCH_CHECK(quantMode != 0 || (scale.defined() && scale.numel() >= 1 && (!offset.defined() || offset.numel() >= 1)),
                op, ": static quantization (quantMode 0) needs scale (and takes offset) of shape [1]");
    TORCH_CHECK(!scale.defined() || quantMode != 1 || (scale.dim() == 2 && scale.size(1) == xt.size(1) &&
                                                       (scale.size(0) == 1 || scale.size(0) == a.end - a.start)),
                op, ": dynamic quantization's scale must be [1 or expert range, H]");
    TORCH_CHECK(!scale.defined() || quantMode != -1 || (scale.dim() == 1 && scale.size(0) == xt.size(0)), op,
                ": without quantization scale must be [tokens]");
    const int64_t h = xt.size(1), nk = experts.numel();
    const int64_t rows = dropPadMode == 1 ? expertNum * expertCapacity
                                          : (activeNum <= 0 ? nk : std::min(activeNum, nk));
    TORCH_CHECK(ex.numel() == rows * h && scale_out.numel() == rows && row_idx.numel() == nk, op,
                ": expandedXOut must hold ", rows, " rows of ", h, ", expandedScaleOut ", rows,
                " values and expandedRowIdxOut ", nk);
    TORCH_CHECK(tokens_out.numel() == (expertTokensNumType == 2 ? expertNum * 2 : a.end - a.start), op,
                ": expertTokensCountOrCumsumOut has the wrong size");
    return Prepared{{xt, experts, scale, offset}, [=]() mutable {
                      runInitRoutingV3(xt, experts, scale, offset, a, ex, row_idx, tokens_out, scale_out);
                    },
                    {ex, row_idx, tokens_out, scale_out}};
  });
}
NPU_ATEN_OP(MoeInitRoutingV3, "x, expertIdx, scaleOptional, offsetOptional, activeNum, expertCapacity, expertNum, "
                              "dropPadMode, expertTokensNumType, expertTokensNumFlag, quantMode, "
                              "activeExpertRangeOptional, rowIdxType, expandedXOut, expandedRowIdxOut, "
                              "expertTokensCountOrCumsumOut, expandedScaleOut");

// out[e] = the number of sorted expert ids <= e (one past the last row of expert e).
extern "C" NOP_API aclnnStatus aclnnMoeComputeExpertTokensGetWorkspaceSize(const aclTensor* sortedExperts,
                                                                          int64_t numExperts, aclTensor* out,
                                                                          uint64_t* workspaceSize,
                                                                          aclOpExecutor** executor) {
  return prepareOp("aclnnMoeComputeExpertTokens", workspaceSize, executor, [&] {
    const char* op = "aclnnMoeComputeExpertTokens";
    at::Tensor sorted = requiredTensor(sortedExperts, "sortedExperts"), o = requiredTensor(out, "out");
    TORCH_CHECK(sorted.dim() == 1 && isIndex(sorted), op, ": sortedExperts must be a 1-D integer tensor");
    TORCH_CHECK(numExperts >= 1 && o.numel() == numExperts, op, ": out must hold numExperts (", numExperts,
                ") values");
    return Prepared{{sorted}, [=]() mutable {
                      const at::Tensor ids = std::get<0>(sorted.to(at::kLong).sort());
                      o.copy_(at::searchsorted(ids, at::arange(numExperts, ids.options()), /*out_int32=*/false,
                                               /*right=*/true));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(MoeComputeExpertTokens, "sortedExperts, numExperts, out");

// ------------------------------------------------------------------------------------------- re-routing

namespace {

// Source rows in expert order: tokens arrive rank by rank, each rank's block expert by expert; the result holds
// expert by expert, each expert's block rank by rank.
at::Tensor reRoutingSources(const at::Tensor& counts) {
  const int64_t ranks = counts.size(0), experts = counts.size(1);
  const at::Tensor c = counts.to(at::kLong).contiguous();
  const int64_t* cp = c.const_data_ptr<int64_t>();
  std::vector<int64_t> start(ranks * experts);
  int64_t pos = 0;
  for (int64_t i = 0; i < ranks * experts; ++i) {
    start[i] = pos;
    pos += cp[i];
  }
  std::vector<int64_t> sources;
  sources.reserve(pos);
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t r = 0; r < ranks; ++r) {
      for (int64_t t = 0; t < cp[r * experts + e]; ++t) sources.push_back(start[r * experts + e] + t);
    }
  }
  return at::tensor(sources, c.options());
}

}  // namespace

// permuteTokens[d] = tokens[src(d)] in expert order; permuteTokenIdx the gather (idxType 0, src(d)) or scatter
// (idxType 1, d at src) indices; expertTokenNum the per-expert counts (type 1) or their cumulative sums (type 0).
// Counts that do not add up to the tokens leave rows zero and indices -1 where no source row exists.
extern "C" NOP_API aclnnStatus aclnnMoeReRoutingGetWorkspaceSize(
    const aclTensor* tokens, const aclTensor* expertTokenNumPerRank, const aclTensor* perTokenScalesOptional,
    int64_t expertTokenNumType, int64_t idxType, aclTensor* permuteTokensOut, aclTensor* permutePerTokenScalesOut,
    aclTensor* permuteTokenIdxOut, aclTensor* expertTokenNumOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMoeReRouting", workspaceSize, executor, [&] {
    const char* op = "aclnnMoeReRouting";
    at::Tensor t = requiredTensor(tokens, "tokens"), scales = hostTensor(perTokenScalesOptional);
    at::Tensor counts = requiredTensor(expertTokenNumPerRank, "expertTokenNumPerRank");
    at::Tensor pt = requiredTensor(permuteTokensOut, "permuteTokensOut"),
               ps = requiredTensor(permutePerTokenScalesOut, "permutePerTokenScalesOut"),
               pidx = requiredTensor(permuteTokenIdxOut, "permuteTokenIdxOut"),
               num = requiredTensor(expertTokenNumOut, "expertTokenNumOut");
    TORCH_CHECK(t.dim() >= 2 && counts.dim() == 2 && isIndex(counts), op,
                ": tokens must be [A, H] and expertTokenNumPerRank integer [ranks, experts]");
    const int64_t a = t.size(0);
    TORCH_CHECK(!scales.defined() || (scales.dim() >= 1 && scales.size(0) == a), op, ": perTokenScales must be [", a,
                "]");
    TORCH_CHECK(expertTokenNumType == 0 || expertTokenNumType == 1, op, ": expertTokenNumType must be 0 or 1");
    TORCH_CHECK(idxType == 0 || idxType == 1, op, ": idxType must be 0 or 1, got ", idxType);
    TORCH_CHECK(pt.sizes().equals(t.sizes()) && pidx.numel() == a && ps.size(0) == a && num.numel() == counts.size(1),
                op, ": outputs must be tokens-shaped, [A] and [experts]");
    return Prepared{{t, counts, scales}, [=]() mutable {
                      TORCH_CHECK(counts.numel() == 0 || counts.min().item<int64_t>() >= 0, op,
                                  ": expertTokenNumPerRank must not be negative");
                      const at::Tensor all = reRoutingSources(counts);
                      const at::Tensor src = all.narrow(0, 0, std::min<int64_t>(all.numel(), a));
                      const at::Tensor ok = src < a;
                      const at::Tensor dst = at::arange(src.numel(), src.options()).masked_select(ok);
                      const at::Tensor from = src.masked_select(ok);
                      at::Tensor moved = at::zeros(t.sizes(), t.options());
                      moved.index_copy_(0, dst, t.index_select(0, from));
                      pt.copy_(moved);
                      at::Tensor moved_scales = at::zeros(ps.sizes(), ps.options());
                      if (scales.defined()) {
                        moved_scales.index_copy_(0, dst, scales.index_select(0, from).to(ps.scalar_type()));
                      }
                      ps.copy_(moved_scales);
                      at::Tensor idx = at::full({a}, -1, src.options());
                      if (idxType == 0) {
                        idx.index_copy_(0, dst, from);
                      } else {
                        idx.index_copy_(0, from, dst);
                      }
                      pidx.copy_(idx);
                      const at::Tensor per_expert = counts.to(at::kLong).sum(0);
                      num.copy_(expertTokenNumType == 1 ? per_expert : per_expert.cumsum(0));
                    },
                    {pt, ps, pidx, num}};
  });
}
NPU_ATEN_OP(MoeReRouting, "tokens, expertTokenNumPerRank, perTokenScalesOptional, expertTokenNumType, idxType, "
                          "permuteTokensOut, permutePerTokenScalesOut, permuteTokenIdxOut, expertTokenNumOut");
