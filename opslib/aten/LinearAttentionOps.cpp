// LinearAttentionOps.cpp - device ops of Qwen3-Next style linear attention: aclnnRecurrentGatedDeltaRule (the
// gated delta rule, token by token, over short packed sequences with a state cache), aclnnFusedCausalConv1d (the
// depthwise causal conv1d with a conv-state cache, prefix caching and speculative decoding) and
// aclnnMaskedCausalConv1d / aclnnMaskedCausalConv1dBackward (a masked depthwise causal conv1d and its gradients).
// Everything is computed in float32; cached states keep their own dtype between calls.
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <vector>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

// The values of a small host index tensor (lengths, offsets, indices) as int64.
std::vector<int64_t> indexValues(const at::Tensor& t) {
  const at::Tensor v = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(v.const_data_ptr<int64_t>(), v.const_data_ptr<int64_t>() + v.numel());
}

at::Tensor floatCopy(const at::Tensor& t) { return t.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true); }

}  // namespace

// For each sequence b (lengths actualSeqLengths, default one token each) starting at token t0: S = state[idx[t0 +
// accepted_b - 1]] (idx = ssmStateIndices, default t; accepted default 1); then for each token t:
//   S = S * e^g[t] (per value head) * e^gk[t] (per key column);  S += beta_t (v_t - S k_t) k_t^T;
//   out_t = S (scale q_t);  state[idx[t]] = S.
// Value head h reads key head h / (Nv / Nk). S stays float32 along a sequence and the states read by later
// sequences are the float32 ones; state is written back in its dtype at the end.
extern "C" NOP_API aclnnStatus aclnnRecurrentGatedDeltaRuleGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* betaOptional,
    aclTensor* stateRef, const aclTensor* actualSeqLengthsOptional, const aclTensor* ssmStateIndicesOptional,
    const aclTensor* gOptional, const aclTensor* gkOptional, const aclTensor* numAcceptedTokensOptional,
    float scaleValue, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnRecurrentGatedDeltaRule", workspaceSize, executor, [&] {
    const char* op = "aclnnRecurrentGatedDeltaRule";
    at::Tensor q = requiredTensor(query, "query"), k = requiredTensor(key, "key"), v = requiredTensor(value, "value");
    at::Tensor beta = hostTensor(betaOptional), state = requiredTensor(stateRef, "stateRef");
    at::Tensor lengths = hostTensor(actualSeqLengthsOptional), slots = hostTensor(ssmStateIndicesOptional);
    at::Tensor g = hostTensor(gOptional), gk = hostTensor(gkOptional);
    at::Tensor accepted = hostTensor(numAcceptedTokensOptional), o = requiredTensor(out, "out");
    TORCH_CHECK(q.dim() == 3 && k.sizes() == q.sizes() && v.dim() == 3 && v.size(0) == q.size(0), op,
                ": query / key must be (T, Nk, Dk) and value (T, Nv, Dv), got ", q.sizes(), ", ", k.sizes(), " and ",
                v.sizes());
    const int64_t tokens = v.size(0), nv = v.size(1), dv = v.size(2), nk = q.size(1), dk = q.size(2);
    TORCH_CHECK(nk > 0 && nv % nk == 0, op, ": Nv (", nv, ") must be a multiple of Nk (", nk, ")");
    TORCH_CHECK(state.dim() == 4 && state.size(1) == nv && state.size(2) == dv && state.size(3) == dk, op,
                ": stateRef must be (BlockNum, Nv, Dv, Dk), got ", state.sizes());
    TORCH_CHECK(!beta.defined() || beta.sizes() == at::IntArrayRef({tokens, nv}), op, ": beta must be (T, Nv)");
    TORCH_CHECK(!g.defined() || g.sizes() == at::IntArrayRef({tokens, nv}), op, ": g must be (T, Nv)");
    TORCH_CHECK(!gk.defined() || gk.sizes() == at::IntArrayRef({tokens, nv, dk}), op, ": gk must be (T, Nv, Dk)");
    TORCH_CHECK(!slots.defined() || slots.numel() == tokens, op, ": ssmStateIndices must hold T = ", tokens,
                " entries");
    TORCH_CHECK(o.sizes() == v.sizes(), op, ": out must be (T, Nv, Dv) = ", v.sizes());
    return Prepared{{q, k, v, beta, state, lengths, slots, g, gk, accepted}, [=]() mutable {
                      const std::vector<int64_t> lens =
                          lengths.defined() ? indexValues(lengths) : std::vector<int64_t>(tokens, 1);
                      std::vector<int64_t> idx(tokens);
                      if (slots.defined()) {
                        idx = indexValues(slots);
                      } else {
                        for (int64_t t = 0; t < tokens; ++t) idx[t] = t;
                      }
                      const std::vector<int64_t> first_accepted =
                          accepted.defined() ? indexValues(accepted) : std::vector<int64_t>(lens.size(), 1);
                      TORCH_CHECK(first_accepted.size() == lens.size(), op,
                                  ": numAcceptedTokens must have one entry per sequence");
                      const int64_t blocks = state.size(0);
                      for (int64_t i : idx) {
                        TORCH_CHECK(i >= 0 && i < blocks, op, ": ssmStateIndices entry ", i, " is outside [0, ",
                                    blocks, ")");
                      }
                      const int64_t group = nv / nk;
                      const double scale = scaleValue;
                      const at::Tensor qf = q.to(at::kFloat).repeat_interleave(group, 1) * scale;
                      const at::Tensor kf = k.to(at::kFloat).repeat_interleave(group, 1);
                      const at::Tensor vf = v.to(at::kFloat);
                      const at::Tensor bf = beta.defined() ? beta.to(at::kFloat) : at::ones({tokens, nv});
                      const at::Tensor decay = g.defined() ? g.to(at::kFloat).exp() : at::ones({tokens, nv});
                      const at::Tensor key_decay = gk.defined() ? gk.to(at::kFloat).exp() : at::Tensor();
                      at::Tensor work = floatCopy(state);
                      std::vector<bool> touched(blocks, false);
                      at::Tensor result = at::empty({tokens, nv, dv}, at::TensorOptions().dtype(at::kFloat));
                      int64_t start = 0;
                      for (size_t b = 0; b < lens.size(); ++b) {
                        const int64_t len = lens[b];
                        TORCH_CHECK(len >= 0 && start + len <= tokens, op, ": actualSeqLengths add up past T = ",
                                    tokens);
                        if (len == 0) continue;
                        TORCH_CHECK(first_accepted[b] >= 1 && first_accepted[b] <= len, op,
                                    ": numAcceptedTokens[", b, "] must be in [1, ", len, "], got ", first_accepted[b]);
                        at::Tensor s = work.select(0, idx[start + first_accepted[b] - 1]).clone();  // (Nv, Dv, Dk)
                        for (int64_t t = start; t < start + len; ++t) {
                          s = s * decay.select(0, t).view({nv, 1, 1});
                          if (key_decay.defined()) s = s * key_decay.select(0, t).unsqueeze(1);
                          const at::Tensor kt = kf.select(0, t).unsqueeze(1);  // (Nv, 1, Dk)
                          const at::Tensor recalled = (s * kt).sum(-1);          // S k: (Nv, Dv)
                          const at::Tensor delta = (vf.select(0, t) - recalled) * bf.select(0, t).unsqueeze(1);
                          s = s + delta.unsqueeze(-1) * kt;
                          work.select(0, idx[t]).copy_(s);
                          touched[idx[t]] = true;
                          result.select(0, t).copy_((s * qf.select(0, t).unsqueeze(1)).sum(-1));
                        }
                        start += len;
                      }
                      TORCH_CHECK(start == tokens, op, ": actualSeqLengths add up to ", start, ", not T = ", tokens);
                      o.copy_(result);
                      for (int64_t i = 0; i < blocks; ++i) {
                        if (touched[i]) state.select(0, i).copy_(work.select(0, i));
                      }
                    },
                    {state, o}};
  });
}
NPU_ATEN_OP(RecurrentGatedDeltaRule, "query, key, value, betaOptional, stateRef, actualSeqLengthsOptional, "
                                     "ssmStateIndicesOptional, gOptional, gkOptional, numAcceptedTokensOptional, "
                                     "scaleValue, out");

namespace {

// Python's a % b for b > 0 (the documented index arithmetic).
int64_t floorMod(int64_t a, int64_t b) { return ((a % b) + b) % b; }

struct CausalConvSequence {
  int64_t start = 0, length = 0;
  int64_t read_line = 0, write_line = 0;
  bool has_computed = false, has_accepted = false;
  int64_t computed = 0, accepted = 1;
  std::vector<int64_t> prefix_lines;  // with prefix caching: the cache lines of the blocks to fill, in order
};

struct CausalConvOptions {
  int64_t block_size = 128;
  bool pangu = false, residual = false;
};

// One sequence of the fused causal conv1d: reads its cached prefix, refreshes the cache, fills the prefix-cache
// blocks this chunk completes, and returns its outputs (float32, (length, dim)). `states` is updated in place.
at::Tensor causalConvSequence(const char* op, const CausalConvSequence& seq, const at::Tensor& x, const at::Tensor& w,
                              at::Tensor& states, const CausalConvOptions& opt) {
  const int64_t width = w.size(0), capacity = states.size(1), dim = x.size(1);
  const at::Tensor tokens = x.narrow(0, seq.start, seq.length);
  int64_t offset = 0;
  at::Tensor cached;
  if (seq.has_computed && seq.computed == 0) {  // a first chunk: nothing cached yet
    cached = at::zeros({width - 1, dim}, at::TensorOptions().dtype(at::kFloat));
  } else {
    offset = seq.has_accepted ? seq.accepted - 1 : capacity - (width - 1);
    TORCH_CHECK(offset >= 0 && offset + width - 1 <= capacity, op, ": num_accepted_tokens (", seq.accepted,
                ") reads past the cached state of ", capacity, " tokens");
    // A copy: the cache line may be rewritten below before the taps read it.
    cached = floatCopy(states.select(0, seq.read_line).narrow(0, 0, offset + width - 1));
  }
  const at::Tensor padded = at::cat({cached, tokens}, 0);
  const int64_t total = padded.size(0), kept = std::min(capacity, total);
  states.select(0, seq.write_line).narrow(0, capacity - kept, kept).copy_(padded.narrow(0, total - kept, kept));
  const at::Tensor window = padded.narrow(0, offset, total - offset);  // K - 1 + length rows
  if (!seq.prefix_lines.empty()) {
    // Each block this chunk completes keeps the K - 1 inputs before its boundary.
    const int64_t done = seq.computed % opt.block_size;
    const int64_t tail = floorMod(seq.length - (opt.block_size - done), opt.block_size);
    const int64_t last_full = seq.length - tail - (tail == 0 ? opt.block_size : 0);
    const int64_t fills = static_cast<int64_t>(seq.prefix_lines.size());
    for (int64_t chunk = 0; chunk < fills; ++chunk) {
      const int64_t edge = last_full - (fills - chunk - 1) * opt.block_size;
      TORCH_CHECK(edge >= 0 && edge + width - 1 <= window.size(0), op, ": ", fills, " prefix-cache blocks do not "
                  "fit a chunk of ", seq.length, " tokens after ", seq.computed, " computed ones");
      states.select(0, seq.prefix_lines[chunk]).narrow(0, capacity - (width - 1), width - 1)
          .copy_(window.narrow(0, edge, width - 1));
    }
  }
  at::Tensor y = at::zeros({seq.length, dim}, at::TensorOptions().dtype(at::kFloat));
  for (int64_t j = 0; j < width; ++j) y = y + window.narrow(0, j, seq.length) * w.select(0, j);
  if (opt.pangu) {  // outputs whose taps reach before the sequence's first token are zero
    const int64_t reset = std::min(std::max<int64_t>(width - 1 - seq.computed, 0), seq.length);
    y.narrow(0, 0, reset).zero_();
  }
  return opt.residual ? y + tokens : y;
}

}  // namespace

// For each sequence b of x (query_start_loc, or the rows of a 3-D x), with K taps and a cache line of C inputs:
//   read line: cacheIndices[b, initialStateIdx[b]] with prefix caching, cacheIndices[b], or b; pad_slot_id skips b;
//   prefix: K - 1 zeros if numComputedTokens[b] == 0, else the line's first offset + K - 1 inputs with offset =
//           numAcceptedTokens[b] - 1 (speculative) or C - (K - 1);
//   the line (cacheIndices[b, blockIdxLast[b]] with prefix caching) keeps the last C inputs of prefix + tokens;
//   y[i] = sum_j w[j] * (prefix + tokens)[offset + i + j]; Pangu zeroes the first K - 1 - computed outputs;
//   residual adds x. activationMode, runMode, maxQueryLen, initialStateMode and bias have no effect (as documented).
extern "C" NOP_API aclnnStatus aclnnFusedCausalConv1dGetWorkspaceSize(
    const aclTensor* x, const aclTensor* weight, aclTensor* convStates, const aclTensor* queryStartLocOptional,
    const aclTensor* cacheIndicesOptional, const aclTensor* initialStateModeOptional, const aclTensor* biasOptional,
    const aclTensor* numAcceptedTokensOptional, const aclTensor* numComputedTokensOptional,
    const aclTensor* blockIdxFirstScheduledTokenOptional, const aclTensor* blockIdxLastScheduledTokenOptional,
    const aclTensor* initialStateIdxOptional, int64_t activationMode, int64_t padSlotId, int64_t runMode,
    int64_t maxQueryLen, int64_t residualConnection, int64_t blockSize, int64_t convMode, aclTensor* y,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnFusedCausalConv1d", workspaceSize, executor, [&] {
    const char* op = "aclnnFusedCausalConv1d";
    at::Tensor xt = requiredTensor(x, "x"), w = requiredTensor(weight, "weight");
    at::Tensor states = requiredTensor(convStates, "convStates"), out = requiredTensor(y, "y");
    at::Tensor starts = hostTensor(queryStartLocOptional), lines = hostTensor(cacheIndicesOptional);
    at::Tensor accepted = hostTensor(numAcceptedTokensOptional), computed = hostTensor(numComputedTokensOptional);
    at::Tensor first_block = hostTensor(blockIdxFirstScheduledTokenOptional);
    at::Tensor last_block = hostTensor(blockIdxLastScheduledTokenOptional);
    at::Tensor initial = hostTensor(initialStateIdxOptional);
    TORCH_CHECK(xt.dim() == 2 || xt.dim() == 3, op, ": x must be 2-D or 3-D, got ", xt.sizes());
    TORCH_CHECK(xt.dim() == 3 || starts.defined(), op, ": a 2-D x needs queryStartLoc");
    const int64_t dim = xt.size(-1);
    TORCH_CHECK(w.dim() == 2 && w.size(1) == dim && w.size(0) >= 1, op, ": weight must be (K, dim), got ", w.sizes());
    TORCH_CHECK(states.dim() == 3 && states.size(2) == dim && states.size(1) >= w.size(0) - 1, op,
                ": convStates must be (slots, >= K - 1, dim), got ", states.sizes());
    TORCH_CHECK(out.sizes() == xt.sizes(), op, ": y must have x's shape ", xt.sizes());
    TORCH_CHECK(convMode == 0 || convMode == 1, op, ": convMode must be 0 (default) or 1 (pangu), got ", convMode);
    TORCH_CHECK(convMode == 0 || computed.defined(), op, ": the pangu mode needs numComputedTokens");
    const bool apc = last_block.defined();
    TORCH_CHECK(!apc || (lines.defined() && lines.dim() == 2 && first_block.defined() && initial.defined() &&
                         computed.defined() && blockSize >= 2),
                op, ": prefix caching needs 2-D cacheIndices, blockIdxFirst/LastScheduledToken, initialStateIdx, "
                "numComputedTokens and blockSize >= 2");
    const CausalConvOptions opt{blockSize, convMode == 1, residualConnection != 0};
    return Prepared{{xt, w, states, starts, lines, accepted, computed, first_block, last_block, initial},
                    [=]() mutable {
                      const at::Tensor flat = xt.reshape({-1, dim}).to(at::kFloat);
                      const at::Tensor wf = w.to(at::kFloat);
                      std::vector<int64_t> bounds;
                      if (starts.defined()) {
                        bounds = indexValues(starts);
                      } else {
                        for (int64_t b = 0; b <= xt.size(0); ++b) bounds.push_back(b * xt.size(1));
                      }
                      const int64_t batch = static_cast<int64_t>(bounds.size()) - 1;
                      auto values = [](const at::Tensor& t) {
                        return t.defined() ? indexValues(t) : std::vector<int64_t>();
                      };
                      const std::vector<int64_t> line_table = values(lines);
                      const int64_t row = lines.defined() && lines.dim() == 2 ? lines.size(1) : 1;
                      const std::vector<int64_t> acc = values(accepted), comp = values(computed);
                      const std::vector<int64_t> firsts = values(first_block), lasts = values(last_block);
                      const std::vector<int64_t> inits = values(initial);
                      const auto per_sequence = [&](const std::vector<int64_t>& v, bool given, const char* what) {
                        TORCH_CHECK(!given || static_cast<int64_t>(v.size()) >= batch, op, ": ", what,
                                    " needs one entry per sequence (", batch, ")");
                      };
                      per_sequence(acc, accepted.defined(), "numAcceptedTokens");
                      per_sequence(comp, computed.defined(), "numComputedTokens");
                      per_sequence(firsts, apc, "blockIdxFirstScheduledToken");
                      per_sequence(lasts, apc, "blockIdxLastScheduledToken");
                      per_sequence(inits, apc, "initialStateIdx");
                      TORCH_CHECK(!lines.defined() || lines.size(0) >= batch, op,
                                  ": cacheIndices needs one row per sequence (", batch, ")");
                      at::Tensor result = at::zeros({flat.size(0), dim}, at::TensorOptions().dtype(at::kFloat));
                      for (int64_t b = 0; b < batch; ++b) {
                        CausalConvSequence seq;
                        seq.start = bounds[b];
                        seq.length = bounds[b + 1] - bounds[b];
                        TORCH_CHECK(seq.start >= 0 && seq.length >= 0 && bounds[b + 1] <= flat.size(0), op,
                                    ": queryStartLoc must be non-decreasing offsets into x's ", flat.size(0), " rows");
                        if (apc) {
                          TORCH_CHECK(inits[b] >= 0 && inits[b] < row && lasts[b] >= firsts[b] && lasts[b] < row &&
                                          firsts[b] >= 0,
                                      op, ": block indices of sequence ", b, " fall outside cacheIndices' ", row,
                                      " columns");
                          seq.read_line = line_table[b * row + inits[b]];
                          seq.write_line = line_table[b * row + lasts[b]];
                          for (int64_t blk = firsts[b]; blk < lasts[b]; ++blk) {
                            seq.prefix_lines.push_back(line_table[b * row + blk]);
                          }
                        } else {
                          seq.read_line = seq.write_line = lines.defined() ? line_table[b] : b;
                        }
                        if (seq.read_line == padSlotId) continue;
                        for (int64_t line : {seq.read_line, seq.write_line}) {
                          TORCH_CHECK(line >= 0 && line < states.size(0), op, ": cache line ", line,
                                      " is outside convStates' ", states.size(0), " slots");
                        }
                        for (int64_t line : seq.prefix_lines) {
                          TORCH_CHECK(line >= 0 && line < states.size(0), op, ": cache line ", line,
                                      " is outside convStates' ", states.size(0), " slots");
                        }
                        seq.has_computed = computed.defined();
                        seq.computed = seq.has_computed ? comp[b] : 0;
                        seq.has_accepted = accepted.defined();
                        seq.accepted = seq.has_accepted ? acc[b] : 1;
                        result.narrow(0, seq.start, seq.length)
                            .copy_(causalConvSequence(op, seq, flat, wf, states, opt));
                      }
                      out.copy_(result.view(out.sizes()));
                    },
                    {states, out}};
  });
}
NPU_ATEN_OP(FusedCausalConv1d, "x, weight, convStates, queryStartLocOptional, cacheIndicesOptional, "
                               "initialStateModeOptional, biasOptional, numAcceptedTokensOptional, "
                               "numComputedTokensOptional, blockIdxFirstScheduledTokenOptional, "
                               "blockIdxLastScheduledTokenOptional, initialStateIdxOptional, activationMode, "
                               "padSlotId, runMode, maxQueryLen, residualConnection, blockSize, convMode, y");

namespace {

// Where mask[b, s] is False (mask (B, S)), the (S, B, H) tensor's row is zeroed.
at::Tensor applyOutputMask(const at::Tensor& t, const at::Tensor& mask) {
  return mask.defined() ? t.masked_fill(mask.logical_not().t().unsqueeze(-1), 0.0) : t;
}

}  // namespace

// out[s, b, h] = sum_k weight[k, h] * input[s - (W - 1 - k), b, h] (zeros before s = 0), zero where mask is False.
extern "C" NOP_API aclnnStatus aclnnMaskedCausalConv1dGetWorkspaceSize(const aclTensor* input, const aclTensor* weight,
                                                                      const aclTensor* maskOptional, aclTensor* out,
                                                                      uint64_t* workspaceSize,
                                                                      aclOpExecutor** executor) {
  return prepareOp("aclnnMaskedCausalConv1d", workspaceSize, executor, [&] {
    const char* op = "aclnnMaskedCausalConv1d";
    at::Tensor x = requiredTensor(input, "input"), w = requiredTensor(weight, "weight");
    at::Tensor mask = hostTensor(maskOptional), o = requiredTensor(out, "out");
    TORCH_CHECK(x.dim() == 3 && w.dim() == 2 && w.size(1) == x.size(2) && o.sizes() == x.sizes(), op,
                ": input must be (S, B, H), weight (W, H) and out input's shape, got ", x.sizes(), ", ", w.sizes(),
                " and ", o.sizes());
    TORCH_CHECK(!mask.defined() || (mask.scalar_type() == at::kBool && mask.sizes() ==
                                                                           at::IntArrayRef({x.size(1), x.size(0)})),
                op, ": mask must be bool (B, S)");
    return Prepared{{x, w, mask}, [=]() mutable {
                      const int64_t len = x.size(0), width = w.size(0);
                      const at::Tensor xf = x.to(at::kFloat), wf = w.to(at::kFloat);
                      at::Tensor r = at::zeros(xf.sizes(), xf.options());
                      for (int64_t k = 0; k < width; ++k) {
                        const int64_t shift = width - 1 - k;
                        if (shift >= len) continue;
                        r.narrow(0, shift, len - shift).add_(xf.narrow(0, 0, len - shift) * wf.select(0, k));
                      }
                      o.copy_(applyOutputMask(r, mask));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(MaskedCausalConv1d, "input, weight, maskOptional, out");

// gradInput[s] = sum_k weight[k] * g[s + (W - 1 - k)], gradWeight[k] = sum_{s, b} g[s] * input[s - (W - 1 - k)],
// with g the output gradient zeroed where mask is False. Sums in float32, rounded once.
extern "C" NOP_API aclnnStatus aclnnMaskedCausalConv1dBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* input, const aclTensor* weight, const aclTensor* maskOptional,
    aclTensor* gradInput, aclTensor* gradWeight, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMaskedCausalConv1dBackward", workspaceSize, executor, [&] {
    const char* op = "aclnnMaskedCausalConv1dBackward";
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), x = requiredTensor(input, "input");
    at::Tensor w = requiredTensor(weight, "weight"), mask = hostTensor(maskOptional);
    at::Tensor gi = requiredTensor(gradInput, "gradInput"), gw = requiredTensor(gradWeight, "gradWeight");
    TORCH_CHECK(x.dim() == 3 && g.sizes() == x.sizes() && w.dim() == 2 && w.size(1) == x.size(2) &&
                    gi.sizes() == x.sizes() && gw.sizes() == w.sizes(),
                op, ": gradOutput / input must be (S, B, H), weight (W, H), got ", g.sizes(), ", ", x.sizes(), " and ",
                w.sizes());
    TORCH_CHECK(!mask.defined() || (mask.scalar_type() == at::kBool && mask.sizes() ==
                                                                           at::IntArrayRef({x.size(1), x.size(0)})),
                op, ": mask must be bool (B, S)");
    return Prepared{{g, x, w, mask}, [=]() mutable {
                      const int64_t len = x.size(0), width = w.size(0);
                      const at::Tensor gf = applyOutputMask(g.to(at::kFloat), mask);
                      const at::Tensor xf = x.to(at::kFloat), wf = w.to(at::kFloat);
                      at::Tensor grad_in = at::zeros(xf.sizes(), xf.options());
                      at::Tensor grad_w = at::zeros(wf.sizes(), wf.options());
                      for (int64_t k = 0; k < width; ++k) {
                        const int64_t shift = width - 1 - k;
                        if (shift >= len) continue;
                        const at::Tensor later = gf.narrow(0, shift, len - shift);
                        grad_in.narrow(0, 0, len - shift).add_(later * wf.select(0, k));
                        grad_w.select(0, k).copy_((later * xf.narrow(0, 0, len - shift)).sum(at::IntArrayRef{0, 1}));
                      }
                      gi.copy_(grad_in);
                      gw.copy_(grad_w);
                    },
                    {gi, gw}};
  });
}
NPU_ATEN_OP(MaskedCausalConv1dBackward, "gradOutput, input, weight, maskOptional, gradInput, gradWeight");
