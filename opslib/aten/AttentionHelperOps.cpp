// AttentionHelperOps.cpp - small device ops around attention in LLM serving and context parallelism:
// aclnnRingAttentionUpdateV2 (merge two partial attention results by their softmax max / sum),
// aclnnAttentionUpdate (merge SP partial results by their log-sum-exps), aclnnAdvanceStep / aclnnAdvanceStepV2
// (vLLM's advance_step_flashattn, plain and speculative) and aclnnScatterList (per-sequence window writes into a
// list of KV cache tensors). Softmax statistics and merges are computed in float32.
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/stack.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "AtenOpSupport.h"
// aclTensorList's entries: ScatterList writes the tensors of its list and marks them written (as hostTensor does
// for an aclTensor* operand), so that private-format stand-ins are converted back.
#include "../src/Descriptors.h"

using namespace npu::opslib::aten;

namespace {

// The values of a small host index tensor (sequence lengths, indices) as int64.
std::vector<int64_t> hostValues(const at::Tensor& t) {
  const at::Tensor v = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(v.const_data_ptr<int64_t>(), v.const_data_ptr<int64_t>() + v.numel());
}

// Sequence boundaries [0, e1, ..., T] from cumulative ends given with or without the leading 0.
std::vector<int64_t> sequenceBounds(const char* op, const at::Tensor& cumulative, int64_t total) {
  std::vector<int64_t> bounds = hostValues(cumulative);
  if (bounds.empty() || bounds.front() != 0) bounds.insert(bounds.begin(), 0);
  for (size_t i = 1; i < bounds.size(); ++i) {
    TORCH_CHECK(bounds[i] >= bounds[i - 1], op, ": actual_seq_qlen must be non-decreasing cumulative lengths");
  }
  TORCH_CHECK(bounds.back() == total, op, ": actual_seq_qlen must end at T = ", total, ", got ", bounds.back());
  return bounds;
}

// (T, N) token-major values of a TND statistic kept sequence by sequence as (N, S_b) blocks (the layout
// RingAttentionUpdate reads when the softmax layout is not "TND").
at::Tensor tokenMajor(const at::Tensor& per_sequence, const std::vector<int64_t>& bounds, int64_t heads) {
  const at::Tensor flat = per_sequence.contiguous().view({-1});
  std::vector<at::Tensor> parts;
  for (size_t b = 0; b + 1 < bounds.size(); ++b) {
    const int64_t len = bounds[b + 1] - bounds[b];
    parts.push_back(flat.narrow(0, bounds[b] * heads, len * heads).view({heads, len}).t());
  }
  return at::cat(parts, 0);
}

}  // namespace

// max = max(m1, m2); sum = s1 e^(m1 - max) + s2 e^(m2 - max); out = o1 s1 e^(m1 - max) / sum + o2 s2 e^(m2 - max) /
// sum. SBH: out (S, B, N * D), stats (B, N, S, 8). TND: out (T, N, D), stats (T, N, 8), token by token with
// inputSoftmaxLayout "TND", otherwise sequence by sequence (actualSeqQlen) as (N, S_b, 8) blocks.
extern "C" NOP_API aclnnStatus aclnnRingAttentionUpdateV2GetWorkspaceSize(
    const aclTensor* prevAttnOut, const aclTensor* prevSoftmaxMax, const aclTensor* prevSoftmaxSum,
    const aclTensor* curAttnOut, const aclTensor* curSoftmaxMax, const aclTensor* curSoftmaxSum,
    const aclTensor* actualSeqQlenOptional, char* inputLayoutOptional, char* inputSoftmaxLayoutOptional,
    aclTensor* attnOut, aclTensor* softmaxMax, aclTensor* softmaxSum, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnRingAttentionUpdateV2", workspaceSize, executor, [&] {
    const char* op = "aclnnRingAttentionUpdateV2";
    at::Tensor o1 = requiredTensor(prevAttnOut, "prevAttnOut"), o2 = requiredTensor(curAttnOut, "curAttnOut");
    at::Tensor m1 = requiredTensor(prevSoftmaxMax, "prevSoftmaxMax");
    at::Tensor m2 = requiredTensor(curSoftmaxMax, "curSoftmaxMax");
    at::Tensor s1 = requiredTensor(prevSoftmaxSum, "prevSoftmaxSum");
    at::Tensor s2 = requiredTensor(curSoftmaxSum, "curSoftmaxSum");
    at::Tensor qlen = hostTensor(actualSeqQlenOptional);
    at::Tensor out = requiredTensor(attnOut, "attnOut"), max_out = requiredTensor(softmaxMax, "softmaxMax");
    at::Tensor sum_out = requiredTensor(softmaxSum, "softmaxSum");
    const std::string layout = inputLayoutOptional == nullptr ? "SBH" : inputLayoutOptional;
    const std::string softmax_layout = inputSoftmaxLayoutOptional == nullptr ? "" : inputSoftmaxLayoutOptional;
    TORCH_CHECK(layout == "SBH" || layout == "TND", op, ": inputLayout must be 'SBH' or 'TND', got '", layout, "'");
    TORCH_CHECK(o1.dim() == 3 && o1.sizes() == o2.sizes() && out.sizes() == o1.sizes(), op,
                ": the attention outputs must be 3-D of one shape, got ", o1.sizes(), " and ", o2.sizes());
    TORCH_CHECK(m1.sizes() == m2.sizes() && m1.sizes() == s1.sizes() && m1.sizes() == s2.sizes() &&
                    max_out.sizes() == m1.sizes() && sum_out.sizes() == m1.sizes() && m1.dim() > 0 &&
                    m1.size(-1) == 8,
                op, ": the softmax statistics must share one shape ending in 8, got ", m1.sizes());
    const bool sbh = layout == "SBH";
    const bool per_sequence = !sbh && softmax_layout != "TND";
    if (sbh) {
      TORCH_CHECK(m1.dim() == 4 && m1.size(0) == o1.size(1) && m1.size(2) == o1.size(0) && m1.size(1) > 0 &&
                      o1.size(2) % m1.size(1) == 0,
                  op, ": SBH needs statistics (B, N, S, 8) for outputs (S, B, N * D), got ", m1.sizes(), " and ",
                  o1.sizes());
    } else {
      TORCH_CHECK(m1.dim() == 3 && m1.size(0) == o1.size(0) && m1.size(1) == o1.size(1), op,
                  ": TND needs statistics (T, N, 8) for outputs (T, N, D), got ", m1.sizes(), " and ", o1.sizes());
      TORCH_CHECK(!per_sequence || qlen.defined(), op, ": TND with per-sequence statistics needs actualSeqQlen");
    }
    return Prepared{{o1, m1, s1, o2, m2, s2, qlen}, [=]() mutable {
                      const at::Tensor pm = m1.to(at::kFloat), cm = m2.to(at::kFloat);
                      const at::Tensor new_max = at::maximum(pm, cm);
                      const at::Tensor w1 = s1.to(at::kFloat) * at::exp(pm - new_max);
                      const at::Tensor w2 = s2.to(at::kFloat) * at::exp(cm - new_max);
                      const at::Tensor new_sum = w1 + w2;
                      // The 8 lanes are equal: lane 0 scales the outputs.
                      at::Tensor f1 = (w1 / new_sum).select(-1, 0), f2 = (w2 / new_sum).select(-1, 0);
                      at::Tensor merged;
                      if (sbh) {
                        const int64_t s = o1.size(0), b = o1.size(1), h = o1.size(2), n = m1.size(1);
                        f1 = f1.permute({2, 0, 1}).unsqueeze(-1);  // (S, B, N, 1)
                        f2 = f2.permute({2, 0, 1}).unsqueeze(-1);
                        merged = (o1.to(at::kFloat).reshape({s, b, n, h / n}) * f1 +
                                  o2.to(at::kFloat).reshape({s, b, n, h / n}) * f2)
                                     .reshape({s, b, h});
                      } else {
                        if (per_sequence) {
                          const std::vector<int64_t> bounds = sequenceBounds(op, qlen, o1.size(0));
                          f1 = tokenMajor(f1, bounds, o1.size(1));
                          f2 = tokenMajor(f2, bounds, o1.size(1));
                        }
                        merged = o1.to(at::kFloat) * f1.unsqueeze(-1) + o2.to(at::kFloat) * f2.unsqueeze(-1);
                      }
                      out.copy_(merged);
                      max_out.copy_(new_max);
                      sum_out.copy_(new_sum);
                    },
                    {out, max_out, sum_out}};
  });
}
NPU_ATEN_OP(RingAttentionUpdateV2, "prevAttnOut, prevSoftmaxMax, prevSoftmaxSum, curAttnOut, curSoftmaxMax, "
                                   "curSoftmaxSum, actualSeqQlenOptional, inputLayoutOptional, "
                                   "inputSoftmaxLayoutOptional, attnOut, softmaxMax, softmaxSum");

// lse_m = max_i lse_i + log(sum_i exp(lse_i - max) + 1e-20); out = sum_i localOut_i exp(lse_i - lse_m).
// lseOut (optional) receives lse_m.
extern "C" NOP_API aclnnStatus aclnnAttentionUpdateGetWorkspaceSize(const aclTensorList* lse,
                                                                   const aclTensorList* localOut, int64_t updateType,
                                                                   aclTensor* out, aclTensor* lseOut,
                                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAttentionUpdate", workspaceSize, executor, [&] {
    const char* op = "aclnnAttentionUpdate";
    const std::vector<at::Tensor> lses = hostTensors(lse), outs = hostTensors(localOut);
    at::Tensor o = requiredTensor(out, "out"), lo = hostTensor(lseOut);
    TORCH_CHECK(updateType == 0 || updateType == 1, op, ": updateType must be 0 or 1, got ", updateType);
    TORCH_CHECK(!lses.empty() && lses.size() == outs.size(), op, ": lse and localOut must be non-empty lists of one "
                "length");
    for (size_t i = 0; i < lses.size(); ++i) {
      TORCH_CHECK(lses[i].sizes() == lses[0].sizes() && outs[i].sizes() == outs[0].sizes() &&
                      lses[i].scalar_type() == at::kFloat,
                  op, ": entry ", i, " must match entry 0 (float32 lse ", lses[0].sizes(), ", localOut ",
                  outs[0].sizes(), ")");
    }
    TORCH_CHECK(outs[0].dim() == lses[0].dim() + 1 && o.sizes() == outs[0].sizes() &&
                    (!lo.defined() || lo.sizes() == lses[0].sizes()),
                op, ": localOut entries must be lse's shape plus head_dim, out localOut's shape and lseOut lse's");
    std::vector<at::Tensor> inputs(lses);
    inputs.insert(inputs.end(), outs.begin(), outs.end());
    return Prepared{inputs, [=]() mutable {
                      std::vector<at::Tensor> wide_lse, wide_out;
                      for (const at::Tensor& t : lses) wide_lse.push_back(t.to(at::kFloat));
                      for (const at::Tensor& t : outs) wide_out.push_back(t.to(at::kFloat));
                      const at::Tensor l = at::stack(wide_lse, 0), v = at::stack(wide_out, 0);
                      const at::Tensor top = std::get<0>(l.max(0));
                      const at::Tensor lse_m = top + (at::exp(l - top).sum(0) + 1e-20).log();
                      o.copy_((v * at::exp(l - lse_m).unsqueeze(-1)).sum(0));
                      if (lo.defined()) lo.copy_(lse_m);
                    },
                    {o, lo}};
  });
}
NPU_ATEN_OP(AttentionUpdate, "lse, localOut, updateType, out, lseOut");

namespace {

// Rows [q, numSeqs) of a padded decode batch: no token (0), position 0, no slot (-1), as vLLM pads.
void padSequences(at::Tensor& tokens, at::Tensor& positions, at::Tensor& slots, int64_t from, int64_t to) {
  if (to <= from) return;
  tokens.narrow(0, from, to - from).fill_(0);
  positions.narrow(0, from, to - from).fill_(0);
  slots.narrow(0, from, to - from).fill_(-1);
}

// block_tables[row, pos / blockSize] * blockSize + pos % blockSize, with the block index checked.
at::Tensor slotsOf(const char* op, const at::Tensor& tables, const at::Tensor& rows, const at::Tensor& pos,
                   int64_t block_size) {
  const at::Tensor block = pos.div(block_size, "floor");
  TORCH_CHECK(pos.numel() == 0 || (pos.min().item<int64_t>() >= 0 && block.max().item<int64_t>() < tables.size(1)),
              op, ": a position falls outside block_tables (", tables.size(1), " blocks of ", block_size, ")");
  const at::Tensor numbers = tables.to(at::kLong).index_select(0, rows).gather(1, block.unsqueeze(1)).squeeze(1);
  return numbers * block_size + pos.remainder(block_size);
}

}  // namespace

// For each query q < numQueries: inputTokens[q] = sampledTokenIds[q, 0]; inputPositions[q] = seqLens[q];
// seqLens[q] += 1; slotMapping[q] = the slot of position seqLens[q] - 1. Padded sequences get token 0, position 0
// and slot -1 (seqLens unchanged).
extern "C" NOP_API aclnnStatus aclnnAdvanceStepGetWorkspaceSize(
    aclTensor* inputTokens, const aclTensor* sampledTokenIds, aclTensor* inputPositions, aclTensor* seqLens,
    aclTensor* slotMapping, const aclTensor* blockTables, int64_t numSeqs, int64_t numQueries, int64_t blockSize,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAdvanceStep", workspaceSize, executor, [&] {
    const char* op = "aclnnAdvanceStep";
    at::Tensor tokens = requiredTensor(inputTokens, "inputTokens");
    at::Tensor sampled = requiredTensor(sampledTokenIds, "sampledTokenIds");
    at::Tensor positions = requiredTensor(inputPositions, "inputPositions"), lens = requiredTensor(seqLens, "seqLens");
    at::Tensor slots = requiredTensor(slotMapping, "slotMapping"), tables = requiredTensor(blockTables, "blockTables");
    TORCH_CHECK(numQueries > 0 && numQueries <= numSeqs && blockSize > 0, op, ": need 0 < numQueries <= numSeqs and "
                "blockSize > 0, got ", numQueries, ", ", numSeqs, " and ", blockSize);
    TORCH_CHECK(tokens.dim() == 1 && positions.dim() == 1 && lens.dim() == 1 && slots.dim() == 1 &&
                    tokens.size(0) >= numSeqs && positions.size(0) >= numSeqs && lens.size(0) >= numSeqs &&
                    slots.size(0) >= numSeqs,
                op, ": inputTokens, inputPositions, seqLens and slotMapping must be 1-D with numSeqs entries");
    TORCH_CHECK(sampled.dim() == 2 && sampled.size(0) >= numQueries && tables.dim() == 2 &&
                    tables.size(0) >= numSeqs,
                op, ": sampledTokenIds must be [numQueries, 1] and blockTables [numSeqs, blocks]");
    return Prepared{{sampled, tables, lens}, [=]() mutable {
                      const at::Tensor old_len = lens.narrow(0, 0, numQueries).to(at::kLong, false, /*copy=*/true);
                      const at::Tensor rows = at::arange(numQueries, at::TensorOptions().dtype(at::kLong));
                      const at::Tensor new_slots = slotsOf(op, tables, rows, old_len, blockSize);
                      tokens.narrow(0, 0, numQueries).copy_(sampled.narrow(0, 0, numQueries).select(1, 0));
                      positions.narrow(0, 0, numQueries).copy_(old_len);
                      lens.narrow(0, 0, numQueries).copy_(old_len + 1);
                      slots.narrow(0, 0, numQueries).copy_(new_slots);
                      padSequences(tokens, positions, slots, numQueries, numSeqs);
                    },
                    {tokens, positions, lens, slots}};
  });
}
NPU_ATEN_OP(AdvanceStep, "inputTokens, sampledTokenIds, inputPositions, seqLens, slotMapping, blockTables, numSeqs, "
                         "numQueries, blockSize");

// Speculative form: each request owns 1 + spec_num consecutive entries. Every entry's position moves
// 1 + acceptedNum[request] forward and its length becomes position + 1; a request's first token becomes its last
// accepted sampled token (the one before the first -1 of its row), the others its specToken row; slots follow the
// new positions through the request's block table.
extern "C" NOP_API aclnnStatus aclnnAdvanceStepV2GetWorkspaceSize(
    aclTensor* inputTokens, const aclTensor* sampledTokenIds, aclTensor* inputPositions, aclTensor* seqLens,
    aclTensor* slotMapping, const aclTensor* blockTables, const aclTensor* specToken, const aclTensor* acceptedNum,
    int64_t numSeqs, int64_t numQueries, int64_t blockSize, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAdvanceStepV2", workspaceSize, executor, [&] {
    const char* op = "aclnnAdvanceStepV2";
    at::Tensor tokens = requiredTensor(inputTokens, "inputTokens");
    at::Tensor sampled = requiredTensor(sampledTokenIds, "sampledTokenIds");
    at::Tensor positions = requiredTensor(inputPositions, "inputPositions"), lens = requiredTensor(seqLens, "seqLens");
    at::Tensor slots = requiredTensor(slotMapping, "slotMapping"), tables = requiredTensor(blockTables, "blockTables");
    at::Tensor spec = requiredTensor(specToken, "specToken"), accepted = requiredTensor(acceptedNum, "acceptedNum");
    TORCH_CHECK(numSeqs > 0 && numQueries == numSeqs && blockSize > 0, op, ": need numQueries == numSeqs > 0 and "
                "blockSize > 0, got ", numQueries, ", ", numSeqs, " and ", blockSize);
    TORCH_CHECK(spec.dim() == 2 && spec.size(0) == numSeqs && accepted.dim() == 1 && accepted.size(0) == numSeqs, op,
                ": specToken must be [numSeqs, spec_num] and acceptedNum [numSeqs]");
    const int64_t per_request = spec.size(1) + 1, entries = numSeqs * per_request;
    TORCH_CHECK(sampled.dim() == 2 && sampled.size(0) == numSeqs && sampled.size(1) == per_request, op,
                ": sampledTokenIds must be [numSeqs, 1 + spec_num] = [", numSeqs, ", ", per_request, "], got ",
                sampled.sizes());
    TORCH_CHECK(tokens.dim() == 1 && tokens.size(0) == entries && positions.sizes() == tokens.sizes() &&
                    lens.sizes() == tokens.sizes() && slots.sizes() == tokens.sizes(),
                op, ": the per-token tensors must be 1-D with numSeqs * (1 + spec_num) = ", entries, " entries");
    TORCH_CHECK(tables.dim() == 2 && tables.size(0) >= numSeqs, op, ": blockTables must be [numSeqs, blocks]");
    return Prepared{{sampled, tables, spec, accepted, positions}, [=]() mutable {
                      const at::Tensor moved = positions.to(at::kLong) +
                                               accepted.to(at::kLong).repeat_interleave(per_request) + 1;
                      // The last accepted token: the one before the first -1 (Python-style wrap when the row starts
                      // with -1), found as the first minimum of the row with a -1 appended.
                      const at::Tensor ids = sampled.to(at::kLong);
                      const at::Tensor stop = at::cat({ids, at::full_like(ids.narrow(1, 0, 1), -1)}, 1).argmin(1);
                      const at::Tensor last_col = (stop - 1).remainder(per_request);
                      const at::Tensor last = ids.gather(1, last_col.unsqueeze(1));
                      const at::Tensor requests =
                          at::arange(entries, at::TensorOptions().dtype(at::kLong)).div(per_request, "floor");
                      const at::Tensor new_slots = slotsOf(op, tables, requests, moved, blockSize);
                      at::Tensor token_rows = tokens.view({numSeqs, per_request});
                      token_rows.narrow(1, 0, 1).copy_(last);
                      token_rows.narrow(1, 1, per_request - 1).copy_(spec);
                      positions.copy_(moved);
                      lens.copy_(moved + 1);
                      slots.copy_(new_slots);
                    },
                    {tokens, positions, lens, slots}};
  });
}
NPU_ATEN_OP(AdvanceStepV2, "inputTokens, sampledTokenIds, inputPositions, seqLens, slotMapping, blockTables, "
                           "specToken, acceptedNum, numSeqs, numQueries, blockSize");

// varRef[i] along axis (of updates, whose dimension 0 is the list index) from start indice[i] (or indice[i][0],
// with length min(indice[i][1], updates' axis size)) takes updates[i]; maskOptional[i] == 0 skips entry i.
extern "C" NOP_API aclnnStatus aclnnScatterListGetWorkspaceSize(aclTensorList* varRef, const aclTensor* indice,
                                                               const aclTensor* updates,
                                                               const aclTensor* maskOptional, char* reduceOptional,
                                                               int64_t axis, uint64_t* workspaceSize,
                                                               aclOpExecutor** executor) {
  return prepareOp("aclnnScatterList", workspaceSize, executor, [&] {
    const char* op = "aclnnScatterList";
    TORCH_CHECK(varRef != nullptr, op, ": varRef is NULL");
    std::vector<at::Tensor> vars;
    for (const aclTensor* entry : varRef->tensors) {
      vars.push_back(requiredTensor(const_cast<aclTensor*>(entry), "varRef entry"));  // written: marks it
    }
    at::Tensor idx = requiredTensor(indice, "indice"), upd = requiredTensor(updates, "updates");
    at::Tensor mask = hostTensor(maskOptional);
    const std::string reduce = reduceOptional == nullptr ? "update" : reduceOptional;
    TORCH_CHECK(reduce == "update", op, ": reduce only supports 'update', got '", reduce, "'");
    const int64_t batch = static_cast<int64_t>(vars.size());
    TORCH_CHECK(batch > 0 && upd.dim() >= 2 && upd.size(0) == batch, op, ": updates must be [", batch, ", ...], got ",
                upd.sizes());
    const int64_t ax = axis < 0 ? axis + upd.dim() : axis;
    TORCH_CHECK(ax > 0 && ax < upd.dim(), op, ": axis ", axis, " must name a dimension of updates other than 0");
    for (const at::Tensor& v : vars) {
      TORCH_CHECK(v.dim() == upd.dim() - 1 && v.scalar_type() == upd.scalar_type(), op,
                  ": varRef tensors must have updates' dtype and one dimension less, got ", v.sizes());
      for (int64_t d = 1; d < upd.dim(); ++d) {
        TORCH_CHECK(d == ax ? upd.size(d) <= v.size(d - 1) : upd.size(d) == v.size(d - 1), op, ": updates ",
                    upd.sizes(), " does not fit varRef tensor ", v.sizes());
      }
    }
    TORCH_CHECK((idx.dim() == 1 || (idx.dim() == 2 && idx.size(1) == 2)) && idx.size(0) == batch, op,
                ": indice must be [", batch, "] or [", batch, ", 2], got ", idx.sizes());
    TORCH_CHECK(!mask.defined() || mask.numel() == batch, op, ": maskOptional must hold ", batch, " values");
    std::vector<at::Tensor> inputs{idx, upd, mask};
    return Prepared{inputs, [=]() mutable {
                      const std::vector<int64_t> starts = hostValues(idx.dim() == 2 ? idx.select(1, 0) : idx);
                      const std::vector<int64_t> lengths =
                          idx.dim() == 2 ? hostValues(idx.select(1, 1)) : std::vector<int64_t>(batch, upd.size(ax));
                      const std::vector<int64_t> gates =
                          mask.defined() ? hostValues(mask) : std::vector<int64_t>(batch, 1);
                      for (int64_t i = 0; i < batch; ++i) {
                        const int64_t len = std::min(lengths[i], upd.size(ax));
                        if (gates[i] == 0 || len <= 0) continue;
                        TORCH_CHECK(starts[i] >= 0 && starts[i] + len <= vars[i].size(ax - 1), op, ": entry ", i,
                                    " writes [", starts[i], ", ", starts[i] + len, ") outside its axis of ",
                                    vars[i].size(ax - 1));
                        at::Tensor target = vars[i];
                        target.narrow(ax - 1, starts[i], len).copy_(upd.select(0, i).narrow(ax - 1, 0, len));
                      }
                    },
                    vars};
  });
}
NPU_ATEN_OP(ScatterList, "varRef, indice, updates, maskOptional, reduceOptional, axis");
