// MoeRoutingMapOps.cpp - MoE routing device ops: MoeUpdateExpert (expert placement balancing and pruning) and
// MoeTokenPermuteWithRoutingMap(Grad) / MoeTokenUnpermuteWithRoutingMap(Grad) (tokens grouped by expert from a
// routing mask and summed back).
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>

#include <algorithm>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

// balanced[i][j] = table[e][1 + place] for e = ids[i][j], where place picks one of the table[e][0] deployed copies:
// by rank group (mode 0: ranks are split into count groups of ceil(world / count)) or by token (mode 1: i % count).
at::Tensor balanceExperts(const char* op, const at::Tensor& ids, const at::Tensor& table, int64_t rank, int64_t world,
                          int64_t mode) {
  const at::Tensor id64 = ids.to(at::kLong).contiguous(), tab = table.to(at::kLong).contiguous();
  at::Tensor out = at::empty_like(id64);
  const int64_t rows = id64.size(0), k = id64.size(1), experts = tab.size(0), f = tab.size(1);
  const int64_t* in = id64.const_data_ptr<int64_t>();
  const int64_t* t = tab.const_data_ptr<int64_t>();
  int64_t* o = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = in[i * k + j];
      TORCH_CHECK(e >= 0 && e < experts, op, ": expert id ", e, " is outside eplb_table's ", experts, " rows");
      const int64_t count = t[e * f];
      TORCH_CHECK(count >= 1 && count < f, op, ": eplb_table row ", e, " deploys ", count, " copies, must be in [1, ",
                  f - 1, "]");
      const int64_t place = mode == 0 ? rank / ((world + count - 1) / count) : i % count;
      TORCH_CHECK(place < count, op, ": local_rank_id ", rank, " maps past expert ", e, "'s ", count, " copies");
      o[i * k + j] = t[e * f + 1 + place];
    }
  }
  return out;
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnMoeUpdateExpertGetWorkspaceSize(
    const aclTensor* expertIds, const aclTensor* eplbTable, const aclTensor* expertScalesOptional,
    const aclTensor* pruningThresholdOptional, const aclTensor* activeMaskOptional, int64_t localRankId,
    int64_t worldSize, int64_t balanceMode, aclTensor* balancedExpertIds, aclTensor* balancedActiveMask,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  const char* op = "aclnnMoeUpdateExpert";
  return prepareOp(op, workspaceSize, executor, [&] {
    at::Tensor ids = requiredTensor(expertIds, "expertIds"), table = requiredTensor(eplbTable, "eplbTable");
    at::Tensor scales = hostTensor(expertScalesOptional), threshold = hostTensor(pruningThresholdOptional);
    at::Tensor active = hostTensor(activeMaskOptional);
    at::Tensor out_ids = requiredTensor(balancedExpertIds, "balancedExpertIds");
    at::Tensor out_mask = requiredTensor(balancedActiveMask, "balancedActiveMask");
    TORCH_CHECK(ids.dim() == 2 && table.dim() == 2 && out_ids.sizes() == ids.sizes() &&
                    out_mask.sizes() == ids.sizes(),
                op, ": expertIds must be [BS, K] with outputs of its shape and eplbTable 2-D, got ", ids.sizes(),
                ", ", table.sizes());
    TORCH_CHECK(balanceMode == 0 || balanceMode == 1, op, ": balanceMode must be 0 or 1, got ", balanceMode);
    TORCH_CHECK(scales.defined() == threshold.defined(), op, ": expertScales and pruningThreshold go together");
    const int64_t rank = localRankId, world = worldSize, mode = balanceMode;
    return Prepared{{ids, table, scales, threshold, active}, [=]() mutable {
                      out_ids.copy_(balanceExperts(op, ids, table, rank, world, mode));
                      if (!scales.defined()) {
                        out_mask.fill_(true);  // nothing to prune: every top-k expert stays active
                        return;
                      }
                      // Pruned: scale below threshold[j] times the token's scale sum, or the token inactive.
                      const at::Tensor s = scales.to(at::kFloat);
                      const at::Tensor token_sum = s.sum({-1}, /*keepdim=*/true);
                      const at::Tensor limit = token_sum * threshold.to(at::kFloat).reshape({1, -1});
                      at::Tensor keep = s >= limit;
                      if (active.defined()) keep = keep.logical_and(active.reshape({-1, 1}));
                      out_mask.copy_(keep);
                    },
                    {out_ids, out_mask}};
  });
}
NPU_ATEN_OP(MoeUpdateExpert, "expertIds, eplbTable, expertScalesOptional, pruningThresholdOptional, activeMaskOptional, localRankId, worldSize, balanceMode, balancedExpertIds, balancedActiveMask");

namespace {

// Dropless routing: the token ids of the routed (token, expert) pairs, expert by expert, tokens ascending.
at::Tensor routedTokenIds(const at::Tensor& routing_map) {
  const at::Tensor by_expert = routing_map.to(at::kBool).t();  // [E, T]
  const at::Tensor ids = at::arange(routing_map.size(0), routing_map.options().dtype(at::kLong));
  return ids.unsqueeze(0).expand(by_expert.sizes()).masked_select(by_expert);
}

// Padded routing: per expert the first `capacity` tokens routed to it (token order), topped up with unrouted
// tokens in token order; [E, capacity] token ids.
at::Tensor paddedTokenIds(const at::Tensor& routing_map, int64_t capacity) {
  const at::Tensor by_expert = routing_map.to(at::kChar).t().contiguous();
  const at::Tensor order = std::get<1>(by_expert.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true));
  return order.narrow(1, 0, capacity);
}

// Flat positions in a [E, T] grid of the padded picks [E, capacity].
at::Tensor paddedFlatPositions(const at::Tensor& picks, int64_t tokens) {
  const at::Tensor experts = at::arange(picks.size(0), picks.options()).unsqueeze(1);
  return (experts * tokens + picks).reshape({-1});
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnMoeTokenPermuteWithRoutingMapGetWorkspaceSize(
    const aclTensor* tokens, const aclTensor* routingMap, const aclTensor* probsOptional, int64_t numOutTokens,
    bool dropAndPad, aclTensor* permuteTokensOut, aclTensor* permuteProbsOutOptional, aclTensor* sortedIndicesOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  const char* op = "aclnnMoeTokenPermuteWithRoutingMap";
  return prepareOp(op, workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(tokens, "tokens"), map = requiredTensor(routingMap, "routingMap");
    at::Tensor probs = hostTensor(probsOptional), out = requiredTensor(permuteTokensOut, "permuteTokensOut");
    at::Tensor probs_out = hostTensor(permuteProbsOutOptional);
    at::Tensor sorted = requiredTensor(sortedIndicesOut, "sortedIndicesOut");
    TORCH_CHECK(x.dim() == 2 && map.dim() == 2 && map.size(0) == x.size(0), op,
                ": tokens must be [T, H] and routingMap [T, E], got ", x.sizes(), " and ", map.sizes());
    const int64_t experts = map.size(1), num_out = numOutTokens;
    const bool pad = dropAndPad;
    TORCH_CHECK(!pad || num_out / experts <= x.size(0), op, ": the capacity ", num_out / experts,
                " exceeds the ", x.size(0), " tokens");
    return Prepared{{x, map, probs}, [=]() mutable {
                      const int64_t rows = out.size(0);
                      const bool want_probs = probs.defined() && probs_out.defined() && probs_out.numel() > 0;
                      if (pad) {
                        const at::Tensor picks = paddedTokenIds(map, num_out / experts);  // [E, cap]
                        const at::Tensor ids = picks.reshape({-1});
                        out.copy_(x.index_select(0, ids));
                        sorted.copy_(ids);
                        if (want_probs) {
                          const at::Tensor flat = probs.t().contiguous().reshape({-1});
                          probs_out.copy_(flat.index_select(0, paddedFlatPositions(picks, x.size(0))));
                        }
                        return;
                      }
                      const at::Tensor ids = routedTokenIds(map);
                      const int64_t n = std::min(rows, ids.numel());
                      out.zero_();
                      out.narrow(0, 0, n).copy_(x.index_select(0, ids.narrow(0, 0, n)));
                      // Row j of the token-ordered view is permuted row sorted[j] (a stable argsort of the ids).
                      const at::Tensor order = std::get<1>(ids.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
                      sorted.zero_();
                      sorted.narrow(0, 0, n).copy_(order.narrow(0, 0, n));
                      if (want_probs) {
                        probs_out.zero_();
                        const at::Tensor picked = probs.t().masked_select(map.to(at::kBool).t());
                        probs_out.narrow(0, 0, n).copy_(picked.narrow(0, 0, n));
                      }
                    },
                    {out, probs_out, sorted}};
  });
}
NPU_ATEN_OP(MoeTokenPermuteWithRoutingMap, "tokens, routingMap, probsOptional, numOutTokens, dropAndPad, permuteTokensOut, permuteProbsOutOptional, sortedIndicesOut");

// The gradient of the permutation: every permuted row's gradient added back to its token; permuted probs'
// gradients put back at their (token, expert).
extern "C" NOP_API aclnnStatus aclnnMoeTokenPermuteWithRoutingMapGradGetWorkspaceSize(
    const aclTensor* permutedTokenOutputGrad, const aclTensor* permutedProbsOutputGradOptional,
    const aclTensor* sortedIndices, const aclTensor* routingMapOptional, int64_t numExperts, int64_t tokensNum,
    bool dropAndPad, aclTensor* tokensGradOut, aclTensor* probsGradOutOptional, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  const char* op = "aclnnMoeTokenPermuteWithRoutingMapGrad";
  return prepareOp(op, workspaceSize, executor, [&] {
    at::Tensor grad = requiredTensor(permutedTokenOutputGrad, "permutedTokenOutputGrad");
    at::Tensor probs_grad = hostTensor(permutedProbsOutputGradOptional);
    at::Tensor sorted = requiredTensor(sortedIndices, "sortedIndices");
    at::Tensor map = requiredTensor(routingMapOptional, "routingMap");
    at::Tensor tokens_grad = requiredTensor(tokensGradOut, "tokensGradOut");
    at::Tensor probs_grad_out = hostTensor(probsGradOutOptional);
    TORCH_CHECK(map.dim() == 2 && map.size(0) == tokensNum && map.size(1) == numExperts && grad.dim() == 2 &&
                    sorted.numel() == grad.size(0),
                op, ": routingMap must be [tokensNum, numExperts] and sortedIndices hold one id per gradient row");
    const bool pad = dropAndPad;
    const int64_t tokens = tokensNum, experts = numExperts;
    return Prepared{{grad, probs_grad, sorted, map}, [=]() mutable {
                      const int64_t rows = grad.size(0);
                      const bool want_probs = probs_grad.defined() && probs_grad.numel() > 0 &&
                                              probs_grad_out.defined() && probs_grad_out.numel() > 0;
                      at::Tensor acc = at::zeros({tokens, grad.size(1)}, grad.options().dtype(at::kFloat));
                      at::Tensor probs_acc = at::zeros({experts * tokens}, grad.options().dtype(at::kFloat));
                      if (pad) {
                        const at::Tensor ids = sorted.to(at::kLong).reshape({-1});
                        acc.index_add_(0, ids, grad.to(at::kFloat));
                        if (want_probs) {
                          const at::Tensor picks = ids.view({experts, rows / experts});
                          probs_acc.index_add_(0, paddedFlatPositions(picks, tokens),
                                               probs_grad.to(at::kFloat).reshape({-1}));
                        }
                      } else {
                        const at::Tensor ids = routedTokenIds(map);
                        const int64_t n = std::min(rows, ids.numel());
                        acc.index_add_(0, ids.narrow(0, 0, n), grad.narrow(0, 0, n).to(at::kFloat));
                        if (want_probs) {
                          const at::Tensor where = map.to(at::kBool).t().reshape({-1}).nonzero().squeeze(1);
                          probs_acc.index_add_(0, where.narrow(0, 0, n),
                                               probs_grad.to(at::kFloat).reshape({-1}).narrow(0, 0, n));
                        }
                      }
                      tokens_grad.copy_(acc);
                      if (want_probs) probs_grad_out.copy_(probs_acc.view({experts, tokens}).t());
                    },
                    {tokens_grad, probs_grad_out}};
  });
}
NPU_ATEN_OP(MoeTokenPermuteWithRoutingMapGrad, "permutedTokenOutputGrad, permutedProbsOutputGradOptional, sortedIndices, routingMapOptional, numExperts, tokensNum, dropAndPad, tokensGradOut, probsGradOutOptional");

namespace {

// Per permuted row: its token, and its prob (1 without probs), in float32.
struct RowRouting {
  at::Tensor rows, tokens, probs;  // [n] row ids, [n] token ids, [n] probs
  at::Tensor prob_flat_pos;        // [n] positions in probs.flatten() (undefined without probs)
};

// Dropless: position j of the token-ordered rows is row sorted[j] of token j / topk, whose prob is the j-th routed
// (token, expert) pair in token-major order. Padded: row r belongs to token tokenIds[r] and expert r / capacity.
RowRouting rowRouting(const char* op, const at::Tensor& rows, const at::Tensor& token_ids, const at::Tensor& map,
                      const at::Tensor& probs, bool pad, int64_t tokens, int64_t total_rows) {
  RowRouting r;
  r.rows = rows.to(at::kLong).reshape({-1});
  if (pad) {
    r.tokens = token_ids.to(at::kLong).reshape({-1});
  } else {
    TORCH_CHECK(total_rows % tokens == 0, op, ": dropless rows (", total_rows, ") must be tokens * topk");
    r.tokens = at::arange(total_rows, r.rows.options()).div(total_rows / tokens, "floor");
  }
  if (!probs.defined()) {
    r.probs = at::ones({r.rows.numel()}, r.rows.options().dtype(at::kFloat));
    return r;
  }
  const int64_t experts = probs.size(1);
  if (pad) {
    TORCH_CHECK(total_rows % experts == 0, op, ": padded rows (", total_rows, ") must be experts * capacity");
    const at::Tensor expert = r.rows.div(total_rows / experts, "floor");
    r.prob_flat_pos = r.tokens * experts + expert;
  } else {
    r.prob_flat_pos = map.to(at::kBool).reshape({-1}).nonzero().squeeze(1);
    TORCH_CHECK(r.prob_flat_pos.numel() == total_rows, op, ": routing_map routes ", r.prob_flat_pos.numel(),
                " pairs for ", total_rows, " rows");
  }
  r.probs = probs.to(at::kFloat).reshape({-1}).index_select(0, r.prob_flat_pos);
  return r;
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnMoeTokenUnpermuteWithRoutingMapGetWorkspaceSize(
    const aclTensor* permutedTokens, const aclTensor* sortedIndices, const aclTensor* routingMapOptional,
    const aclTensor* probsOptional, bool paddedMode, const aclIntArray* restoreShapeOptional,
    aclTensor* unpermutedTokens, aclTensor* outIndex, aclTensor* permuteTokenId, aclTensor* permuteProbsOptional,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  const char* op = "aclnnMoeTokenUnpermuteWithRoutingMap";
  return prepareOp(op, workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(permutedTokens, "permutedTokens"), sorted = requiredTensor(sortedIndices, "sorted");
    at::Tensor map = hostTensor(routingMapOptional), probs = hostTensor(probsOptional);
    at::Tensor out = requiredTensor(unpermutedTokens, "unpermutedTokens");
    at::Tensor out_index = requiredTensor(outIndex, "outIndex"), token_id = requiredTensor(permuteTokenId, "tokenId");
    at::Tensor probs_out = hostTensor(permuteProbsOptional);
    TORCH_CHECK(x.dim() == 2 && out.dim() == 2 && sorted.numel() == x.size(0), op,
                ": permutedTokens must be [rows, H] with one sorted index per row");
    TORCH_CHECK(!probs.defined() || map.defined(), op, ": probs needs routingMap");
    const bool pad = paddedMode;
    return Prepared{{x, sorted, map, probs}, [=]() mutable {
                      const int64_t rows = x.size(0), tokens = out.size(0);
                      // Padded: rows in their own order; dropless: the token-ordered positions of sorted.
                      const at::Tensor row_ids = pad ? at::arange(rows, sorted.options().dtype(at::kLong)) : sorted;
                      const RowRouting r = rowRouting(op, row_ids, sorted, map, probs, pad, tokens, rows);
                      at::Tensor acc = at::zeros({tokens, x.size(1)}, x.options().dtype(at::kFloat));
                      acc.index_add_(0, r.tokens, x.to(at::kFloat).index_select(0, r.rows) * r.probs.unsqueeze(1));
                      out.copy_(acc);
                      if (pad) {  // torch_npu's bookkeeping: the stable token order of the rows and their tokens
                        auto sorted_tokens = sorted.to(at::kLong).sort(/*stable=*/true, /*dim=*/0, false);
                        out_index.copy_(std::get<1>(sorted_tokens));
                        token_id.copy_(std::get<0>(sorted_tokens));
                      } else {
                        out_index.copy_(sorted);
                        token_id.copy_(sorted);
                      }
                      if (probs_out.defined() && probs_out.numel() == r.probs.numel()) probs_out.copy_(r.probs);
                    },
                    {out, out_index, token_id, probs_out}};
  });
}
NPU_ATEN_OP(MoeTokenUnpermuteWithRoutingMap, "permutedTokens, sortedIndices, routingMapOptional, probsOptional, paddedMode, restoreShapeOptional, unpermutedTokens, outIndex, permuteTokenId, permuteProbsOptional");

extern "C" NOP_API aclnnStatus aclnnMoeTokenUnpermuteWithRoutingMapGradGetWorkspaceSize(
    const aclTensor* unpermutedTokensGrad, const aclTensor* outIndex, const aclTensor* permuteTokenId,
    const aclTensor* routingMapOptional, const aclTensor* permutedTokensOptional, const aclTensor* probsOptional,
    bool paddedMode, const aclIntArray* restoreShapeOptional, aclTensor* permutedTokensGradOut,
    aclTensor* probsGradOutOptional, uint64_t* workspaceSize, aclOpExecutor** executor) {
  const char* op = "aclnnMoeTokenUnpermuteWithRoutingMapGrad";
  return prepareOp(op, workspaceSize, executor, [&] {
    at::Tensor grad = requiredTensor(unpermutedTokensGrad, "unpermutedTokensGrad");
    at::Tensor out_index = requiredTensor(outIndex, "outIndex"), token_id = requiredTensor(permuteTokenId, "tokenId");
    at::Tensor map = hostTensor(routingMapOptional), x = requiredTensor(permutedTokensOptional, "permutedTokens");
    at::Tensor probs = hostTensor(probsOptional);
    at::Tensor rows_grad = requiredTensor(permutedTokensGradOut, "permutedTokensGradOut");
    at::Tensor probs_grad = hostTensor(probsGradOutOptional);
    TORCH_CHECK(grad.dim() == 2 && x.dim() == 2 && out_index.numel() == x.size(0) && token_id.numel() == x.size(0),
                op, ": outIndex / permuteTokenId need one entry per permuted row");
    TORCH_CHECK(!probs.defined() || map.defined(), op, ": probs needs routingMap");
    const bool pad = paddedMode;
    return Prepared{{grad, out_index, token_id, map, x, probs}, [=]() mutable {
                      const int64_t rows = x.size(0), tokens = grad.size(0);
                      const RowRouting r = rowRouting(op, out_index, token_id, map, probs, pad, tokens, rows);
                      const at::Tensor g = grad.to(at::kFloat).index_select(0, r.tokens);  // [n, H]
                      at::Tensor acc = at::zeros({rows, x.size(1)}, grad.options().dtype(at::kFloat));
                      acc.index_add_(0, r.rows, g * r.probs.unsqueeze(1));
                      rows_grad.copy_(acc);
                      if (probs.defined() && probs_grad.defined() && probs_grad.numel() > 0) {
                        const at::Tensor dots = (g * x.to(at::kFloat).index_select(0, r.rows)).sum({-1});
                        at::Tensor pacc = at::zeros({probs.numel()}, grad.options().dtype(at::kFloat));
                        pacc.index_add_(0, r.prob_flat_pos, dots);
                        probs_grad.copy_(pacc.view(probs.sizes()));
                      }
                    },
                    {rows_grad, probs_grad}};
  });
}
NPU_ATEN_OP(MoeTokenUnpermuteWithRoutingMapGrad, "unpermutedTokensGrad, outIndex, permuteTokenId, routingMapOptional, permutedTokensOptional, probsOptional, paddedMode, restoreShapeOptional, permutedTokensGradOut, probsGradOutOptional");
