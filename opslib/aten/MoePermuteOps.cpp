// MoePermuteOps.cpp - MoE device ops that move expert rows back and forth: MoeFinalizeRoutingV2 (expert outputs
// weighted, biased and summed back per token), MoeTokenPermute / MoeTokenUnpermute (Megatron's permutation by
// expert and its weighted inverse) and their gradients MoeTokenPermuteGrad / MoeTokenUnpermuteGrad.
//
// Sums run in float32 and round once into the output's dtype. Unpadded permutation: sortedIndices[p] is the
// permuted row of flattened position p = token * topk + j (positions past the kept rows were dropped and add
// nothing); padded mode: sortedIndices[r] is the token id of permuted row r.
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>

#include <limits>
#include <vector>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

bool isFloating(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
}

bool isIndex(const at::Tensor& t) { return t.scalar_type() == at::kInt || t.scalar_type() == at::kLong; }

void checkRange(const char* op, const char* what, const at::Tensor& values, int64_t low, int64_t high) {
  if (values.numel() == 0) return;
  TORCH_CHECK(values.min().item<int64_t>() >= low && values.max().item<int64_t>() < high, op, ": ", what,
              " must be in [", low, ", ", high, ")");
}

// rows[idx] with zero rows where idx is out of [0, rows) (dropped), as float32; idx of any shape.
at::Tensor gatherKeptRows(const at::Tensor& rows, const at::Tensor& idx) {
  const int64_t n = rows.size(0);
  const at::Tensor kept = (idx >= 0) & (idx < n);
  at::Tensor out = at::zeros({idx.numel(), rows.size(1)}, rows.options().dtype(at::kFloat));
  if (n > 0) {
    const at::Tensor flat_kept = kept.reshape({-1});
    const at::Tensor where = at::arange(idx.numel(), idx.options()).masked_select(flat_kept);
    out.index_copy_(0, where, rows.to(at::kFloat).index_select(0, idx.reshape({-1}).masked_select(flat_kept)));
  }
  std::vector<int64_t> shape = idx.sizes().vec();
  shape.push_back(rows.size(1));
  return out.view(shape);
}

// The [tokens, topk] permuted-row indices of an unpadded permutation.
at::Tensor tokenRows(const at::Tensor& sorted_indices, int64_t tokens, int64_t topk) {
  return sorted_indices.to(at::kLong).reshape({tokens, topk});
}

}  // namespace

// out[t] = skip1[t] + skip2[t] + sum_j scales[t, j] * (rows[dst(t, j)] + bias[expert(t, j)]); dst(t, j) is read at
// j * tokens + t (dropPadMode 0, 1) or t * K + j (2, 3); -1 (dropped) reads a zero row, the bias still applies.
extern "C" NOP_API aclnnStatus aclnnMoeFinalizeRoutingV2GetWorkspaceSize(
    const aclTensor* expandedX, const aclTensor* expandedRowIdx, const aclTensor* x1Optional,
    const aclTensor* x2Optional, const aclTensor* biasOptional, const aclTensor* scalesOptional,
    const aclTensor* expertIdxOptional, int64_t dropPadMode, aclTensor* out, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnMoeFinalizeRoutingV2", workspaceSize, executor, [&] {
    const char* op = "aclnnMoeFinalizeRoutingV2";
    at::Tensor rows = requiredTensor(expandedX, "expandedX"), dst = requiredTensor(expandedRowIdx, "expandedRowIdx");
    at::Tensor skip1 = hostTensor(x1Optional), skip2 = hostTensor(x2Optional), bias = hostTensor(biasOptional),
               scales = hostTensor(scalesOptional), experts = hostTensor(expertIdxOptional);
    at::Tensor o = requiredTensor(out, "out");
    TORCH_CHECK(rows.dim() >= 2 && isFloating(rows), op, ": expandedX must be a float tensor [rows, H] or [E, C, H]");
    TORCH_CHECK(dst.dim() == 1 && isIndex(dst), op, ": expandedRowIdx must be a 1-D integer tensor");
    TORCH_CHECK(dropPadMode >= 0 && dropPadMode <= 3, op, ": dropPadMode must be in [0, 3], got ", dropPadMode);
    const int64_t h = rows.size(-1);
    TORCH_CHECK(o.dim() == 2 && o.size(1) == h && o.size(0) > 0 && dst.size(0) % o.size(0) == 0, op,
                ": out must be [tokens, H] with expandedRowIdx holding tokens * K indices");
    const int64_t tokens = o.size(0), k = dst.size(0) / tokens;
    TORCH_CHECK(!scales.defined() || (scales.dim() == 2 && scales.size(0) == tokens && scales.size(1) == k), op,
                ": scales must be [", tokens, ", ", k, "]");
    TORCH_CHECK(!bias.defined() || (bias.dim() == 2 && bias.size(1) == h && experts.defined()), op,
                ": bias must be [experts, H] and comes with expertIdx");
    TORCH_CHECK(!experts.defined() || (isIndex(experts) && experts.numel() == tokens * k), op,
                ": expertIdx must be integer [", tokens, ", ", k, "]");
    for (const at::Tensor& skip : {skip1, skip2}) {
      TORCH_CHECK(!skip.defined() || skip.sizes().equals(o.sizes()), op, ": x1 / x2 must be [", tokens, ", ", h, "]");
    }
    return Prepared{{rows, dst, skip1, skip2, bias, scales, experts}, [=]() mutable {
                      const at::Tensor flat_rows = rows.reshape({-1, h});
                      const at::Tensor d = dst.to(at::kLong);
                      checkRange(op, "expandedRowIdx", d, -1, flat_rows.size(0));
                      // [tokens, K] destination rows, by column (k-major) or by row (token-major).
                      const at::Tensor idx = dropPadMode <= 1 ? d.reshape({k, tokens}).t() : d.reshape({tokens, k});
                      at::Tensor picked = gatherKeptRows(flat_rows, idx);  // [tokens, K, H]
                      if (bias.defined()) {
                        const at::Tensor e = experts.to(at::kLong).reshape({tokens, k});
                        checkRange(op, "expertIdx", e, 0, bias.size(0));
                        picked = picked + bias.to(at::kFloat).index_select(0, e.reshape({-1})).view({tokens, k, h});
                      }
                      if (scales.defined()) picked = picked * scales.to(at::kFloat).unsqueeze(-1);
                      at::Tensor sum = picked.sum(1);
                      if (skip1.defined()) sum = sum + skip1.to(at::kFloat);
                      if (skip2.defined()) sum = sum + skip2.to(at::kFloat);
                      o.copy_(sum);
                    },
                    {o}};
  });
}
NPU_ATEN_OP(MoeFinalizeRoutingV2, "expandedX, expandedRowIdx, x1Optional, x2Optional, biasOptional, scalesOptional, "
                                  "expertIdxOptional, dropPadMode, out");

// Unpadded: positions p of indices in stable ascending expert order; sortedIndicesOut[p] = its rank; row r of
// permuteTokensOut is tokens[p_r / topk] for the rows it has. Padded: row r is tokens[indices[r]],
// sortedIndicesOut = indices.
extern "C" NOP_API aclnnStatus aclnnMoeTokenPermuteGetWorkspaceSize(const aclTensor* tokens, const aclTensor* indices,
                                                                   int64_t numOutTokens, bool paddedMode,
                                                                   aclTensor* permuteTokensOut,
                                                                   aclTensor* sortedIndicesOut,
                                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMoeTokenPermute", workspaceSize, executor, [&] {
    const char* op = "aclnnMoeTokenPermute";
    at::Tensor t = requiredTensor(tokens, "tokens"), ind = requiredTensor(indices, "indices");
    at::Tensor permuted = requiredTensor(permuteTokensOut, "permuteTokensOut"),
               sorted = requiredTensor(sortedIndicesOut, "sortedIndicesOut");
    TORCH_CHECK(t.dim() == 2 && (ind.dim() == 1 || ind.dim() == 2) && isIndex(ind), op,
                ": tokens must be [tokens, H] and indices integer [tokens] or [tokens, topk]");
    const int64_t n = ind.numel(), topk = ind.dim() == 1 ? 1 : ind.size(1);
    TORCH_CHECK(numOutTokens >= 0 && numOutTokens <= n && permuted.size(0) == numOutTokens &&
                    permuted.size(1) == t.size(1) && sorted.numel() == n,
                op, ": permuteTokensOut must be [numOutTokens <= ", n, ", H] and sortedIndicesOut [", n, "]");
    TORCH_CHECK(paddedMode || ind.size(0) == t.size(0), op, ": indices must have one row per token");
    return Prepared{{t, ind}, [=]() mutable {
                      const at::Tensor flat = ind.reshape({-1}).to(at::kLong);
                      at::Tensor sources;
                      if (paddedMode) {
                        sources = flat.narrow(0, 0, numOutTokens);
                        checkRange(op, "token ids (padded mode)", sources, 0, t.size(0));
                        sorted.copy_(flat);
                      } else {
                        const at::Tensor order = std::get<1>(flat.sort(/*stable=*/true, 0, false));
                        sorted.copy_(at::empty_like(order).scatter_(0, order, at::arange(n, order.options())));
                        sources = order.narrow(0, 0, numOutTokens).div(topk, "floor");
                      }
                      permuted.copy_(t.index_select(0, sources));
                    },
                    {permuted, sorted}};
  });
}
NPU_ATEN_OP(MoeTokenPermute, "tokens, indices, numOutTokens, paddedMode, permuteTokensOut, sortedIndicesOut");

// Unpadded: out[t] = sum_j probs[t, j] * permuted[sortedIndices[t * topk + j]] (probs 1, topk 1 when absent).
// Padded: out (restoreShape) += probs[r] * permuted[r] at row sortedIndices[r].
extern "C" NOP_API aclnnStatus aclnnMoeTokenUnpermuteGetWorkspaceSize(const aclTensor* permutedTokens,
                                                                     const aclTensor* sortedIndices,
                                                                     const aclTensor* probsOptional, bool paddedMode,
                                                                     const aclIntArray* restoreShapeOptional,
                                                                     aclTensor* out, uint64_t* workspaceSize,
                                                                     aclOpExecutor** executor) {
  return prepareOp("aclnnMoeTokenUnpermute", workspaceSize, executor, [&] {
    const char* op = "aclnnMoeTokenUnpermute";
    at::Tensor permuted = requiredTensor(permutedTokens, "permutedTokens"),
               sorted = requiredTensor(sortedIndices, "sortedIndices"), probs = hostTensor(probsOptional);
    at::Tensor o = requiredTensor(out, "out");
    TORCH_CHECK(permuted.dim() == 2 && sorted.dim() == 1 && isIndex(sorted), op,
                ": permutedTokens must be [rows, H] and sortedIndices a 1-D integer tensor");
    TORCH_CHECK(o.dim() == 2 && o.size(1) == permuted.size(1), op, ": out must be [tokens, ", permuted.size(1), "]");
    const int64_t tokens = o.size(0);
    TORCH_CHECK(!probs.defined() || paddedMode || probs.dim() == 2, op, ": probs must be [tokens, topk]");
    const int64_t topk = probs.defined() && !paddedMode ? probs.size(1) : 1;
    if (paddedMode) {
      TORCH_CHECK(sorted.numel() == permuted.size(0) && (!probs.defined() || probs.numel() == sorted.numel()), op,
                  ": padded mode takes one token id (and prob) per permuted row");
    } else {
      TORCH_CHECK(sorted.numel() == tokens * topk && (!probs.defined() || probs.size(0) == tokens), op,
                  ": sortedIndices must hold tokens * topk = ", tokens, " * ", topk, " positions");
    }
    return Prepared{{permuted, sorted, probs}, [=]() mutable {
                      at::Tensor result;
                      if (paddedMode) {
                        const at::Tensor ids = sorted.to(at::kLong);
                        checkRange(op, "token ids (padded mode)", ids, 0, tokens);
                        at::Tensor rows = permuted.to(at::kFloat);
                        if (probs.defined()) rows = rows * probs.to(at::kFloat).reshape({-1, 1});
                        result = at::zeros(o.sizes(), rows.options()).index_add_(0, ids, rows);
                      } else {
                        const at::Tensor idx = tokenRows(sorted, tokens, topk);
                        checkRange(op, "sortedIndices", idx, 0, std::numeric_limits<int64_t>::max());
                        at::Tensor rows = gatherKeptRows(permuted, idx);  // [tokens, topk, H]
                        if (probs.defined()) rows = rows * probs.to(at::kFloat).unsqueeze(-1);
                        result = rows.sum(1);
                      }
                      o.copy_(result);
                    },
                    {o}};
  });
}
NPU_ATEN_OP(MoeTokenUnpermute, "permutedTokens, sortedIndices, probsOptional, paddedMode, restoreShapeOptional, out");

// The gradient of MoeTokenPermute's rows onto the tokens: out[t] = sum of the gradients of the rows token t went
// to (unpadded: rows sortedIndices[t * numTopk + j] that were kept; padded: rows r with sortedIndices[r] = t).
extern "C" NOP_API aclnnStatus aclnnMoeTokenPermuteGradGetWorkspaceSize(const aclTensor* permutedTokensOutputGrad,
                                                                       const aclTensor* sortedIndices,
                                                                       int64_t numTopk, bool paddedMode,
                                                                       aclTensor* out, uint64_t* workspaceSize,
                                                                       aclOpExecutor** executor) {
  return prepareOp("aclnnMoeTokenPermuteGrad", workspaceSize, executor, [&] {
    const char* op = "aclnnMoeTokenPermuteGrad";
    at::Tensor grad = requiredTensor(permutedTokensOutputGrad, "permutedTokensOutputGrad"),
               sorted = requiredTensor(sortedIndices, "sortedIndices"), o = requiredTensor(out, "out");
    TORCH_CHECK(grad.dim() == 2 && sorted.dim() == 1 && isIndex(sorted), op,
                ": the gradient must be [rows, H] and sortedIndices a 1-D integer tensor");
    TORCH_CHECK(o.dim() == 2 && o.size(1) == grad.size(1) && numTopk >= 1, op,
                ": out must be [tokens, H] and numTopk >= 1");
    const int64_t tokens = o.size(0);
    TORCH_CHECK(paddedMode || sorted.numel() == tokens * numTopk, op, ": sortedIndices must hold tokens * topk = ",
                tokens, " * ", numTopk, " positions");
    TORCH_CHECK(!paddedMode || sorted.numel() >= grad.size(0), op, ": padded mode needs a token id per row");
    return Prepared{{grad, sorted}, [=]() mutable {
                      at::Tensor result;
                      if (paddedMode) {
                        const at::Tensor ids = sorted.to(at::kLong).narrow(0, 0, grad.size(0));
                        checkRange(op, "token ids (padded mode)", ids, 0, tokens);
                        result = at::zeros(o.sizes(), grad.options().dtype(at::kFloat))
                                     .index_add_(0, ids, grad.to(at::kFloat));
                      } else {
                        const at::Tensor idx = tokenRows(sorted, tokens, numTopk);
                        checkRange(op, "sortedIndices", idx, 0, std::numeric_limits<int64_t>::max());
                        result = gatherKeptRows(grad, idx).sum(1);
                      }
                      o.copy_(result);
                    },
                    {o}};
  });
}
NPU_ATEN_OP(MoeTokenPermuteGrad, "permutedTokensOutputGrad, sortedIndices, numTopk, paddedMode, out");

// The gradients of MoeTokenUnpermute: unpadded, row sortedIndices[t * topk + j] gets probs[t, j] * grad[t] and
// probs[t, j] gets <grad[t], permuted[that row]>; padded, row r gets probs[r] * grad[sortedIndices[r]] and probs[r]
// <grad[sortedIndices[r]], permuted[r]>. permutedTokens may be NULL without probs; probsGradOut is a placeholder
// (written 0) then.
extern "C" NOP_API aclnnStatus aclnnMoeTokenUnpermuteGradGetWorkspaceSize(
    const aclTensor* permutedTokens, const aclTensor* unpermutedTokensGrad, const aclTensor* sortedIndices,
    const aclTensor* probsOptional, bool paddedMode, const aclIntArray* restoreShapeOptional,
    aclTensor* permutedTokensGradOut, aclTensor* probsGradOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMoeTokenUnpermuteGrad", workspaceSize, executor, [&] {
    const char* op = "aclnnMoeTokenUnpermuteGrad";
    at::Tensor permuted = hostTensor(permutedTokens), probs = hostTensor(probsOptional);
    at::Tensor grad = requiredTensor(unpermutedTokensGrad, "unpermutedTokensGrad"),
               sorted = requiredTensor(sortedIndices, "sortedIndices");
    at::Tensor grad_rows = requiredTensor(permutedTokensGradOut, "permutedTokensGradOut"),
               grad_probs = requiredTensor(probsGradOut, "probsGradOut");
    TORCH_CHECK(grad.dim() == 2 && sorted.dim() == 1 && isIndex(sorted), op,
                ": unpermutedTokensGrad must be [tokens, H] and sortedIndices a 1-D integer tensor");
    TORCH_CHECK(grad_rows.dim() == 2 && grad_rows.size(1) == grad.size(1), op,
                ": permutedTokensGradOut must be [rows, ", grad.size(1), "]");
    TORCH_CHECK(!probs.defined() || (permuted.defined() && permuted.sizes().equals(grad_rows.sizes()) &&
                                     grad_probs.sizes().equals(probs.sizes())),
                op, ": with probs, permutedTokens must be given ([rows, H]) and probsGradOut have probs' shape");
    TORCH_CHECK(!probs.defined() || paddedMode || probs.dim() == 2, op, ": probs must be [tokens, topk]");
    const int64_t tokens = grad.size(0), rows = grad_rows.size(0);
    const int64_t topk = probs.defined() && !paddedMode ? probs.size(1) : 1;
    TORCH_CHECK(paddedMode ? sorted.numel() == rows : sorted.numel() == tokens * topk, op,
                ": sortedIndices must hold ", paddedMode ? "one token id per permuted row" : "tokens * topk positions");
    return Prepared{{permuted, grad, sorted, probs}, [=]() mutable {
                      const at::Tensor g = grad.to(at::kFloat);
                      at::Tensor rows_grad = at::zeros(grad_rows.sizes(), g.options());
                      at::Tensor probs_grad = at::zeros(grad_probs.sizes(), g.options());
                      if (paddedMode) {
                        const at::Tensor ids = sorted.to(at::kLong);
                        checkRange(op, "token ids (padded mode)", ids, 0, tokens);
                        const at::Tensor g_rows = g.index_select(0, ids);  // [rows, H]
                        rows_grad = probs.defined() ? g_rows * probs.to(at::kFloat).reshape({-1, 1}) : g_rows;
                        if (probs.defined()) {
                          probs_grad = (g_rows * permuted.to(at::kFloat)).sum(-1).view(grad_probs.sizes());
                        }
                      } else {
                        const at::Tensor idx = tokenRows(sorted, tokens, topk);  // [tokens, topk]
                        checkRange(op, "sortedIndices", idx, 0, std::numeric_limits<int64_t>::max());
                        const at::Tensor weight = probs.defined() ? probs.to(at::kFloat) : at::ones({tokens, topk});
                        const at::Tensor kept = idx < rows;
                        const at::Tensor contrib = (g.unsqueeze(1) * weight.unsqueeze(-1)).reshape({-1, g.size(1)});
                        const at::Tensor flat_kept = kept.reshape({-1});
                        rows_grad.index_add_(0, idx.reshape({-1}).masked_select(flat_kept),
                                             contrib.index_select(0, at::arange(contrib.size(0), idx.options())
                                                                         .masked_select(flat_kept)));
                        if (probs.defined()) {
                          probs_grad = (gatherKeptRows(permuted, idx) * g.unsqueeze(1)).sum(-1);
                        }
                      }
                      grad_rows.copy_(rows_grad);
                      grad_probs.copy_(probs_grad);
                    },
                    {grad_rows, grad_probs}};
  });
}
NPU_ATEN_OP(MoeTokenUnpermuteGrad, "permutedTokens, unpermutedTokensGrad, sortedIndices, probsOptional, paddedMode, "
                                   "restoreShapeOptional, permutedTokensGradOut, probsGradOut");
