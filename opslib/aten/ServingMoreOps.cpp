// ServingMoreOps.cpp - device ops of the serving / linear-attention leftovers: aclnnTopKTopPSampleV2 (top-k, top-p,
// min-p filtering and q / argmax sampling of logits), aclnnMultinomial (seeded multinomial draws),
// aclnnInplaceFusedCausalConv1d (the fused causal conv1d writing its outputs over x), aclnnMhcPreV2 /
// aclnnMhcPreBackward (mHC pre-projection and its gradients) and aclnnNsaCompressWithCache (NSA compression of the
// last window of each paged sequence into a cache). Everything is computed in float32.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/bitwise_left_shift.h>
#include <ATen/ops/bitwise_right_shift.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/full.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "AtenOpSupport.h"
#include "npu/graph.h"

using namespace npu::opslib::aten;

namespace {

// The values of a small host index tensor as int64 (a local helper: this family's file shares nothing).
std::vector<int64_t> longValues(const at::Tensor& t) {
  if (!t.defined()) return {};
  const at::Tensor v = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(v.const_data_ptr<int64_t>(), v.const_data_ptr<int64_t>() + v.numel());
}

bool isFloating16or32(at::ScalarType t) { return t == at::kFloat || t == at::kHalf || t == at::kBFloat16; }

}  // namespace

// ---- TopKTopPSampleV2 --------------------------------------------------------------------------------------------

namespace {

// What one row keeps after top-k, top-p and min-p: the candidates' vocabulary indices and their probabilities
// (softmax of the logits, or the inputs themselves when they already are probabilities), in kept order.
struct SampleRow {
  at::Tensor indices;  // long
  at::Tensor probs;    // float
};

SampleRow filterRow(const at::Tensor& row, int64_t k, double p, double min_p, int64_t k_limit, bool input_is_logits) {
  const int64_t vocab = row.size(0);
  const bool use_k = k >= 1 && k <= std::min(k_limit, vocab);
  const bool use_p = p < 1.0;
  auto [sorted, order] = row.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true);
  at::Tensor idx = use_k ? order.narrow(0, 0, k) : order;
  at::Tensor vals = use_k ? sorted.narrow(0, 0, k) : sorted;
  at::Tensor probs = input_is_logits ? at::softmax(vals, 0) : vals;
  if (use_p) {
    // The sorted prefix whose mass before each token is still below p; p <= 0 keeps the single best token.
    int64_t kept = 1;
    if (p > 0) kept = ((probs.cumsum(0) - probs) < p).sum().item<int64_t>();
    kept = std::max<int64_t>(kept, 1);
    idx = idx.narrow(0, 0, kept);
    probs = probs.narrow(0, 0, kept).clone();
    if (p <= 0 && input_is_logits) probs.fill_(1.0);  // the only token is certain
  }
  if (!use_k && !use_p && min_p < 1.0) {  // nothing was filtered: the row stays in vocabulary order
    idx = at::arange(vocab, at::TensorOptions().dtype(at::kLong));
    probs = input_is_logits ? at::softmax(row, 0) : row;
  }
  if (min_p >= 1.0) {
    idx = idx.narrow(0, 0, 1);
    probs = probs.narrow(0, 0, 1);
  } else if (min_p > 0.0) {
    const at::Tensor keep = probs >= probs.max() * min_p;
    idx = idx.masked_select(keep);
    probs = probs.masked_select(keep);
  }
  return {idx, probs};
}

}  // namespace

// Per row b of logits (batch, vocab), in float32:
//   top-k when 1 <= topK[b] <= min(ksMax rounded up to 8 (at most 1024), vocab): the k largest (stable order);
//   probabilities: softmax of the candidates (inputIsLogits) or the candidates themselves;
//   top-p when topP[b] < 1: the sorted prefix whose preceding mass is < p (p <= 0: the best token, probability 1);
//   min-p in (0, 1): tokens with prob >= max prob * min_p; min-p >= 1: the best token only;
//   without any sampling step the row stays in vocabulary order.
// Then logitsSelectIdx[b] = the kept index maximising prob / (|q[b, j]| + eps) (q given) or prob (no q), unless
// isNeedSampleResult: then logitsIdx / logitsSortMasked hold the kept indices / probs (zero padded) for a
// multinomial draw. logitsTopKpSelect[b] holds the kept logits, -inf (0 for probabilities) elsewhere.
extern "C" NOP_API aclnnStatus aclnnTopKTopPSampleV2GetWorkspaceSize(
    const aclTensor* logits, const aclTensor* topK, const aclTensor* topP, const aclTensor* q, const aclTensor* minPs,
    double eps, bool isNeedLogits, int64_t topKGuess, int64_t ksMax, bool inputIsLogits, bool isNeedSampleResult,
    aclTensor* logitsSelectIdx, aclTensor* logitsTopKpSelect, aclTensor* logitsIdx, aclTensor* logitsSortMasked,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnTopKTopPSampleV2", workspaceSize, executor, [&] {
    const char* op = "aclnnTopKTopPSampleV2";
    at::Tensor x = requiredTensor(logits, "logits"), kt = requiredTensor(topK, "topK"), pt = requiredTensor(topP, "topP");
    at::Tensor qt = hostTensor(q), mp = hostTensor(minPs);
    at::Tensor sel = requiredTensor(logitsSelectIdx, "logitsSelectIdx");
    at::Tensor kept_logits = hostTensor(logitsTopKpSelect), sort_idx = hostTensor(logitsIdx);
    at::Tensor sort_masked = hostTensor(logitsSortMasked);
    TORCH_CHECK(x.dim() == 2 && x.numel() > 0 && isFloating16or32(x.scalar_type()), op,
                ": logits must be a non-empty 2-D (batch, vocab) float32 / float16 / bfloat16 tensor, got ",
                describeTensors({x}));
    const int64_t batch = x.size(0), vocab = x.size(1);
    TORCH_CHECK(kt.dim() == 1 && kt.size(0) == batch && kt.scalar_type() == at::kInt, op, ": topK must be int32 [",
                batch, "], got ", describeTensors({kt}));
    TORCH_CHECK(pt.dim() == 1 && pt.size(0) == batch && isFloating16or32(pt.scalar_type()), op,
                ": topP must be floating [", batch, "], got ", describeTensors({pt}));
    TORCH_CHECK(!mp.defined() || (mp.dim() == 1 && mp.size(0) == batch), op, ": minPs must be [", batch, "]");
    TORCH_CHECK(isNeedSampleResult || !qt.defined() || qt.sizes().equals(x.sizes()), op, ": q must be logits' shape ",
                x.sizes(), ", got ", qt.sizes());
    TORCH_CHECK(ksMax >= 1, op, ": ksMax must be a positive integer, got ", ksMax);
    TORCH_CHECK(sel.numel() == batch && sel.scalar_type() == at::kLong, op, ": logitsSelectIdx must hold ", batch,
                " int64 values");
    TORCH_CHECK(!isNeedSampleResult || (sort_idx.defined() && sort_masked.defined()), op,
                ": isNeedSampleResult needs logitsIdx and logitsSortMasked");
    // ksMax is rounded up to a multiple of 8 and capped at 1024, the widest top-k the chip sorts.
    const int64_t k_limit = std::min<int64_t>((std::min<int64_t>(ksMax, 1024) + 7) / 8 * 8, 1024);
    return Prepared{{x, kt, pt, qt, mp}, [=]() mutable {
                      const at::Tensor xf = x.to(at::kFloat);
                      const std::vector<int64_t> ks = longValues(kt);
                      const at::Tensor pf = pt.to(at::kDouble), mf = mp.defined() ? mp.to(at::kDouble) : at::Tensor();
                      const float def_logit = inputIsLogits ? -std::numeric_limits<float>::infinity() : 0.0f;
                      at::Tensor picks = at::zeros({batch}, at::TensorOptions().dtype(at::kLong));
                      at::Tensor kept_out = at::full({batch, vocab}, def_logit, at::TensorOptions().dtype(at::kFloat));
                      at::Tensor idx_out = at::zeros({batch, vocab}, at::TensorOptions().dtype(at::kLong));
                      at::Tensor prob_out = at::zeros({batch, vocab}, at::TensorOptions().dtype(at::kFloat));
                      for (int64_t b = 0; b < batch; ++b) {
                        const at::Tensor row = xf.select(0, b);
                        const double min_p = mf.defined() ? mf[b].item<double>() : -1.0;
                        const SampleRow r = filterRow(row, ks[b], pf[b].item<double>(), min_p, k_limit, inputIsLogits);
                        const int64_t n = r.indices.numel();
                        if (isNeedSampleResult) {
                          idx_out[b].narrow(0, 0, n).copy_(r.indices);
                          prob_out[b].narrow(0, 0, n).copy_(r.probs);
                        } else {
                          at::Tensor score = r.probs;
                          if (qt.defined()) {  // exponential-race sampling: the q draws are the caller's
                            score = r.probs / (qt[b].narrow(0, 0, n).to(at::kFloat).abs() + eps);
                          }
                          picks[b] = r.indices[score.argmax().item<int64_t>()];
                        }
                        kept_out[b].index_copy_(0, r.indices, row.index_select(0, r.indices));
                      }
                      if (!isNeedSampleResult) sel.copy_(picks.view(sel.sizes()));
                      if (kept_logits.defined()) kept_logits.copy_(kept_out.to(kept_logits.scalar_type()));
                      if (sort_idx.defined()) sort_idx.copy_(idx_out);
                      if (sort_masked.defined()) sort_masked.copy_(prob_out.to(sort_masked.scalar_type()));
                    },
                    {sel, kept_logits, sort_idx, sort_masked}};
  });
}
NPU_ATEN_OP(TopKTopPSampleV2, "logits, topK, topP, q, minPs, eps, isNeedLogits, topKGuess, ksMax, inputIsLogits, "
                              "isNeedSampleResult, logitsSelectIdx, logitsTopKpSelect, logitsIdx, logitsSortMasked");

// ---- Multinomial -------------------------------------------------------------------------------------------------

// out[b, :] = numsamples draws from the categorical distribution of self[b, :] (non-negative weights), with or
// without replacement, from a host engine seeded by (seed, offset) - the npu generator's draw at launch.
extern "C" NOP_API aclnnStatus aclnnMultinomialGetWorkspaceSize(const aclTensor* self, int64_t numsamples,
                                                                bool replacement, int64_t seed, int64_t offset,
                                                                aclTensor* out, uint64_t* workspaceSize,
                                                                aclOpExecutor** executor) {
  return prepareOp("aclnnMultinomial", workspaceSize, executor, [&] {
    const char* op = "aclnnMultinomial";
    at::Tensor w = requiredTensor(self, "self"), o = requiredTensor(out, "out");
    TORCH_CHECK((w.dim() == 1 || w.dim() == 2) && isFloating16or32(w.scalar_type()), op,
                ": self must be 1-D or 2-D float weights, got ", describeTensors({w}));
    TORCH_CHECK(numsamples >= 1 && (replacement || numsamples <= w.size(-1)), op, ": cannot draw ", numsamples,
                " samples from ", w.size(-1), " categories", replacement ? "" : " without replacement");
    TORCH_CHECK(o.scalar_type() == at::kLong && o.dim() == w.dim() && o.size(-1) == numsamples &&
                    (w.dim() == 1 || o.size(0) == w.size(0)),
                op, ": out must be int64 with self's rows and numsamples columns, got ", describeTensors({o}));
    return Prepared{{w}, [=]() mutable {
                      // A graph replay mixes its own seed in (npu/graph.h), so each replay draws afresh.
                      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(
                          nrtReplaySeeded(static_cast<uint64_t>(seed)) +
                          0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(offset));
                      o.copy_(at::multinomial(w.to(at::kFloat), numsamples, replacement, gen));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(Multinomial, "self, numsamples, replacement, seed, offset, out");

// ---- InplaceFusedCausalConv1d ------------------------------------------------------------------------------------

namespace {

struct ConvSequence {
  int64_t start = 0, length = 0;
  int64_t read_line = 0, write_line = 0;
  bool fresh = false;      // numComputedTokens[b] == 0: no cached prefix yet
  int64_t computed = 0;
  bool has_accepted = false;
  int64_t accepted = 1;
  std::vector<int64_t> block_lines;  // prefix caching: cache lines of the blocks this chunk completes
};

// One sequence: its outputs (float32, (length, dim)); `states` (the conv cache) is updated in place.
at::Tensor convOneSequence(const char* op, const ConvSequence& s, const at::Tensor& tokens, const at::Tensor& w,
                           at::Tensor& states, int64_t block_size, bool pangu, bool residual) {
  const int64_t width = w.size(0), capacity = states.size(1), dim = tokens.size(1);
  int64_t offset = 0;
  at::Tensor prefix;
  if (s.fresh) {
    prefix = at::zeros({width - 1, dim}, at::TensorOptions().dtype(at::kFloat));
  } else {
    offset = s.has_accepted ? s.accepted - 1 : capacity - (width - 1);
    TORCH_CHECK(offset >= 0 && offset + width - 1 <= capacity, op, ": num_accepted_tokens ", s.accepted,
                " reads past the ", capacity, " cached inputs");
    prefix = states[s.read_line].narrow(0, 0, offset + width - 1).to(at::kFloat, false, /*copy=*/true);
  }
  const at::Tensor padded = at::cat({prefix, tokens}, 0);
  const int64_t total = padded.size(0), keep = std::min(capacity, total);
  states[s.write_line].narrow(0, capacity - keep, keep).copy_(padded.narrow(0, total - keep, keep));
  const at::Tensor window = padded.narrow(0, offset, total - offset);
  if (!s.block_lines.empty()) {
    // A completed block's line keeps the K - 1 inputs that precede its end.
    const int64_t into_block = block_size - s.computed % block_size;
    const int64_t tail = ((s.length - into_block) % block_size + block_size) % block_size;
    const int64_t last_full = s.length - tail - (tail == 0 ? block_size : 0);
    const int64_t count = static_cast<int64_t>(s.block_lines.size());
    for (int64_t c = 0; c < count; ++c) {
      const int64_t edge = last_full - (count - 1 - c) * block_size;
      TORCH_CHECK(edge >= 0 && edge + width - 1 <= window.size(0), op, ": ", count,
                  " completed prefix-cache blocks do not fit a chunk of ", s.length, " tokens");
      states[s.block_lines[c]].narrow(0, capacity - (width - 1), width - 1).copy_(window.narrow(0, edge, width - 1));
    }
  }
  at::Tensor y = at::zeros({s.length, dim}, at::TensorOptions().dtype(at::kFloat));
  for (int64_t j = 0; j < width; ++j) y += window.narrow(0, j, s.length) * w[j];
  if (pangu) {  // outputs whose taps reach before the sequence's first token are zero
    y.narrow(0, 0, std::min(std::max<int64_t>(width - 1 - s.computed, 0), s.length)).zero_();
  }
  return residual ? y + tokens : y;
}

}  // namespace

// The fused causal conv1d of torch_npu (see aclnnFusedCausalConv1d) with its outputs written over x: sequences of
// query_start_loc (or the rows of a 3-D x), K taps, the conv cache read at cacheIndices[b] (or
// cacheIndices[b, initialStateIdx[b]] with prefix caching) and refreshed at cacheIndices[b] (or [b, lastBlock]);
// a read line equal to padSlotId skips the sequence (its rows of x stay as they are). activationMode, runMode,
// maxQueryLen, initialStateMode and bias have no effect, as torch_npu documents for the fused conv.
extern "C" NOP_API aclnnStatus aclnnInplaceFusedCausalConv1dGetWorkspaceSize(
    aclTensor* x, const aclTensor* weight, aclTensor* convStates, const aclTensor* queryStartLocOptional,
    const aclTensor* cacheIndicesOptional, const aclTensor* initialStateModeOptional, const aclTensor* biasOptional,
    const aclTensor* numAcceptedTokensOptional, const aclTensor* numComputedTokensOptional,
    const aclTensor* blockIdxFirstScheduledTokenOptional, const aclTensor* blockIdxLastScheduledTokenOptional,
    const aclTensor* initialStateIdxOptional, int64_t activationMode, int64_t padSlotId, int64_t runMode,
    int64_t maxQueryLen, int64_t residualConnection, int64_t blockSize, int64_t convMode, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnInplaceFusedCausalConv1d", workspaceSize, executor, [&] {
    const char* op = "aclnnInplaceFusedCausalConv1d";
    at::Tensor xt = requiredTensor(x, "x"), w = requiredTensor(weight, "weight");
    at::Tensor states = requiredTensor(convStates, "convStates");
    at::Tensor starts = hostTensor(queryStartLocOptional), lines = hostTensor(cacheIndicesOptional);
    at::Tensor accepted = hostTensor(numAcceptedTokensOptional), computed = hostTensor(numComputedTokensOptional);
    at::Tensor firsts_t = hostTensor(blockIdxFirstScheduledTokenOptional);
    at::Tensor lasts_t = hostTensor(blockIdxLastScheduledTokenOptional), inits_t = hostTensor(initialStateIdxOptional);
    TORCH_CHECK(xt.dim() == 2 || xt.dim() == 3, op, ": x must be 2-D or 3-D, got ", xt.sizes());
    TORCH_CHECK(xt.dim() == 3 || starts.defined(), op, ": a 2-D x needs queryStartLoc");
    const int64_t dim = xt.size(-1);
    TORCH_CHECK(w.dim() == 2 && w.size(1) == dim && w.size(0) >= 1, op, ": weight must be (K, dim), got ", w.sizes());
    TORCH_CHECK(states.dim() == 3 && states.size(2) == dim && states.size(1) >= w.size(0) - 1, op,
                ": convStates must be (slots, >= K - 1, dim), got ", states.sizes());
    TORCH_CHECK(convMode == 0 || convMode == 1, op, ": convMode must be 0 (default) or 1 (pangu), got ", convMode);
    TORCH_CHECK(convMode == 0 || computed.defined(), op, ": the pangu mode needs numComputedTokens");
    const bool apc = lasts_t.defined();
    TORCH_CHECK(!apc || (lines.defined() && lines.dim() == 2 && firsts_t.defined() && inits_t.defined() &&
                         computed.defined() && blockSize >= 2),
                op, ": prefix caching needs 2-D cacheIndices, blockIdxFirst/LastScheduledToken, initialStateIdx, "
                "numComputedTokens and blockSize >= 2");
    return Prepared{{xt, w, states, starts, lines, accepted, computed, firsts_t, lasts_t, inits_t}, [=]() mutable {
                      at::Tensor flat = xt.view({-1, dim});
                      const at::Tensor wf = w.to(at::kFloat);
                      std::vector<int64_t> bounds = longValues(starts);
                      if (!starts.defined()) {
                        for (int64_t b = 0; b <= xt.size(0); ++b) bounds.push_back(b * xt.size(1));
                      }
                      const int64_t batch = static_cast<int64_t>(bounds.size()) - 1;
                      const std::vector<int64_t> table = longValues(lines), acc = longValues(accepted);
                      const std::vector<int64_t> comp = longValues(computed), firsts = longValues(firsts_t);
                      const std::vector<int64_t> lasts = longValues(lasts_t), inits = longValues(inits_t);
                      const int64_t cols = lines.defined() && lines.dim() == 2 ? lines.size(1) : 1;
                      for (const auto* v : {&acc, &comp, &firsts, &lasts, &inits}) {
                        TORCH_CHECK(v->empty() || static_cast<int64_t>(v->size()) >= batch, op,
                                    ": every per-sequence tensor needs ", batch, " entries");
                      }
                      TORCH_CHECK(!lines.defined() || lines.size(0) >= batch, op, ": cacheIndices needs ", batch,
                                  " rows");
                      const auto checkLine = [&](int64_t line) {
                        TORCH_CHECK(line >= 0 && line < states.size(0), op, ": cache line ", line,
                                    " is outside convStates' ", states.size(0), " slots");
                      };
                      for (int64_t b = 0; b < batch; ++b) {
                        ConvSequence s;
                        s.start = bounds[b];
                        s.length = bounds[b + 1] - bounds[b];
                        TORCH_CHECK(s.start >= 0 && s.length >= 0 && bounds[b + 1] <= flat.size(0), op,
                                    ": queryStartLoc must be non-decreasing offsets into x's ", flat.size(0), " rows");
                        if (apc) {
                          TORCH_CHECK(inits[b] >= 0 && inits[b] < cols && firsts[b] >= 0 && lasts[b] >= firsts[b] &&
                                          lasts[b] < cols,
                                      op, ": block indices of sequence ", b, " fall outside cacheIndices' ", cols,
                                      " columns");
                          s.read_line = table[b * cols + inits[b]];
                          s.write_line = table[b * cols + lasts[b]];
                          for (int64_t k = firsts[b]; k < lasts[b]; ++k) s.block_lines.push_back(table[b * cols + k]);
                        } else {
                          s.read_line = s.write_line = lines.defined() ? table[b] : b;
                        }
                        if (s.read_line == padSlotId) continue;
                        checkLine(s.read_line);
                        checkLine(s.write_line);
                        for (int64_t line : s.block_lines) checkLine(line);
                        s.computed = comp.empty() ? 0 : comp[b];
                        s.fresh = !comp.empty() && comp[b] == 0;
                        s.has_accepted = !acc.empty();
                        s.accepted = s.has_accepted ? acc[b] : 1;
                        // A copy of the inputs: their rows of x are overwritten with the outputs.
                        const at::Tensor tokens = flat.narrow(0, s.start, s.length).to(at::kFloat, false, true);
                        const at::Tensor y = convOneSequence(op, s, tokens, wf, states, blockSize, convMode == 1,
                                                             residualConnection != 0);
                        flat.narrow(0, s.start, s.length).copy_(y);
                      }
                    },
                    {xt, states}};
  });
}
NPU_ATEN_OP(InplaceFusedCausalConv1d, "x, weight, convStates, queryStartLocOptional, cacheIndicesOptional, "
                                      "initialStateModeOptional, biasOptional, numAcceptedTokensOptional, "
                                      "numComputedTokensOptional, blockIdxFirstScheduledTokenOptional, "
                                      "blockIdxLastScheduledTokenOptional, initialStateIdxOptional, activationMode, "
                                      "padSlotId, runMode, maxQueryLen, residualConnection, blockSize, convMode");

// ---- MhcPreV2 / MhcPreBackward -----------------------------------------------------------------------------------

namespace {

// float32 rounded to HF32 (10 explicit mantissa bits, round half away from zero on the magnitude), as the cube
// units read their operands with innerPrecise = 1.
at::Tensor toHf32(const at::Tensor& t) {
  at::Tensor bits = t.contiguous().view(at::kInt);
  const at::Tensor rounded = at::bitwise_left_shift(at::bitwise_right_shift(bits + 0x1000, 13), 13);
  return rounded.view(at::kFloat);
}

void checkMhcShapes(const char* op, const at::Tensor& x, const at::Tensor& phi, const at::Tensor& alpha,
                    const at::Tensor& gamma) {
  TORCH_CHECK((x.dim() == 3 || x.dim() == 4) && x.numel() > 0 && isFloating16or32(x.scalar_type()), op,
              ": x must be a non-empty (T, n, D) or (B, S, n, D) float tensor, got ", describeTensors({x}));
  const int64_t n = x.size(-2), d = x.size(-1);
  TORCH_CHECK(alpha.numel() == 2 || alpha.numel() == 3, op, ": alpha must hold 2 or 3 values");
  const int64_t k = alpha.numel() == 3 ? n * n + 2 * n : 2 * n;
  TORCH_CHECK(phi.dim() == 2 && phi.size(0) == k && phi.size(1) == n * d, op, ": phi must be (", k, ", ", n * d,
              "), got ", phi.sizes());
  TORCH_CHECK(!gamma.defined() || gamma.numel() == n * d, op, ": gamma must be (", n, ", ", d, ")");
}

}  // namespace

// Per token (x flattened to nD values, float32): invRms = rsqrt(mean(x^2) + normEps); hMix = (x * gamma) @ phi^T;
// w = hMix * invRms; hPre = sigmoid(alpha0 w[:n] + bias[:n]) + hcEps; hPost = 2 sigmoid(alpha1 w[n:2n] + bias[n:2n]);
// hRes = alpha2 w[2n:] + bias[2n:] (zero (1,) when alpha has 2 values); hIn[d] = sum_i hPre[i] x[i, d].
extern "C" NOP_API aclnnStatus aclnnMhcPreV2GetWorkspaceSize(
    const aclTensor* x, const aclTensor* phi, const aclTensor* alpha, const aclTensor* bias, const aclTensor* gamma,
    double normEps, double hcEps, int64_t innerPrecise, aclTensor* outHin, aclTensor* outHpost, aclTensor* outHres,
    aclTensor* outInvRms, aclTensor* outHmix, aclTensor* outHpre, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMhcPreV2", workspaceSize, executor, [&] {
    const char* op = "aclnnMhcPreV2";
    at::Tensor xt = requiredTensor(x, "x"), ph = requiredTensor(phi, "phi"), al = requiredTensor(alpha, "alpha");
    at::Tensor bi = requiredTensor(bias, "bias"), ga = hostTensor(gamma);
    at::Tensor hin = requiredTensor(outHin, "outHin"), hpost = requiredTensor(outHpost, "outHpost");
    at::Tensor hres = requiredTensor(outHres, "outHres");
    at::Tensor inv = hostTensor(outInvRms), mix = hostTensor(outHmix), hpre = hostTensor(outHpre);
    checkMhcShapes(op, xt, ph, al, ga);
    TORCH_CHECK(bi.numel() == ph.size(0), op, ": bias must hold ", ph.size(0), " values, got ", bi.numel());
    TORCH_CHECK(innerPrecise == 0 || innerPrecise == 1, op, ": innerPrecise must be 0 (FP32) or 1 (HF32)");
    return Prepared{{xt, ph, al, bi, ga}, [=]() mutable {
                      const int64_t n = xt.size(-2), d = xt.size(-1), k = ph.size(0);
                      const at::Tensor xf = xt.reshape({-1, n * d}).to(at::kFloat);
                      const at::Tensor r = at::rsqrt(xf.square().mean({-1}, true) + normEps);
                      at::Tensor lhs = ga.defined() ? xf * ga.reshape({n * d}).to(at::kFloat) : xf;
                      at::Tensor rhs = ph.to(at::kFloat);
                      if (innerPrecise == 1) {
                        lhs = toHf32(lhs);
                        rhs = toHf32(rhs);
                      }
                      const at::Tensor h_mix = at::matmul(lhs, rhs.t());
                      const at::Tensor w = h_mix * r;
                      const at::Tensor af = al.to(at::kFloat), bf = bi.reshape({k}).to(at::kFloat);
                      const at::Tensor pre = at::sigmoid(w.narrow(1, 0, n) * af[0] + bf.narrow(0, 0, n)) + hcEps;
                      const at::Tensor post = 2 * at::sigmoid(w.narrow(1, n, n) * af[1] + bf.narrow(0, n, n));
                      const at::Tensor h_in = (pre.unsqueeze(-1) * xf.view({-1, n, d})).sum(1);
                      hin.copy_(h_in.view(hin.sizes()));
                      hpost.copy_(post.view(hpost.sizes()));
                      if (al.numel() == 3) {
                        hres.copy_((w.narrow(1, 2 * n, n * n) * af[2] + bf.narrow(0, 2 * n, n * n)).view(hres.sizes()));
                      } else {
                        hres.zero_();
                      }
                      if (inv.defined()) inv.copy_(r.view(inv.sizes()));
                      if (mix.defined()) mix.copy_(h_mix.view(mix.sizes()));
                      if (hpre.defined()) hpre.copy_(pre.view(hpre.sizes()));
                    },
                    {hin, hpost, hres, inv, mix, hpre}};
  });
}
NPU_ATEN_OP(MhcPreV2, "x, phi, alpha, bias, gamma, normEps, hcEps, innerPrecise, outHin, outHpost, outHres, "
                      "outInvRms, outHmix, outHpre");

// The gradients of MhcPreV2 from its saved invRms, hMix, hPre and hPost (chain rule through the formulas above;
// gradXPost, the gradient x receives from elsewhere, is added to xGrad). gammaGrad is the gradient a gamma of
// ones would get when gamma is absent.
extern "C" NOP_API aclnnStatus aclnnMhcPreBackwardGetWorkspaceSize(
    const aclTensor* x, const aclTensor* phi, const aclTensor* alpha, const aclTensor* gradHIn,
    const aclTensor* gradHPost, const aclTensor* gradHRes, const aclTensor* invRms, const aclTensor* hMix,
    const aclTensor* hPre, const aclTensor* hPost, const aclTensor* gamma, const aclTensor* gradXPost, float hcEps,
    aclTensor* xGrad, aclTensor* phiGrad, aclTensor* alphaGrad, aclTensor* biasGrad, aclTensor* gammaGrad,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMhcPreBackward", workspaceSize, executor, [&] {
    const char* op = "aclnnMhcPreBackward";
    at::Tensor xt = requiredTensor(x, "x"), ph = requiredTensor(phi, "phi"), al = requiredTensor(alpha, "alpha");
    at::Tensor g_in = hostTensor(gradHIn), g_post = hostTensor(gradHPost), g_res = hostTensor(gradHRes);
    at::Tensor r = requiredTensor(invRms, "invRms"), mix = requiredTensor(hMix, "hMix");
    at::Tensor pre = requiredTensor(hPre, "hPre"), post = requiredTensor(hPost, "hPost");
    at::Tensor ga = hostTensor(gamma), g_xpost = hostTensor(gradXPost);
    at::Tensor gx = requiredTensor(xGrad, "xGrad"), gphi = requiredTensor(phiGrad, "phiGrad");
    at::Tensor galpha = requiredTensor(alphaGrad, "alphaGrad"), gbias = requiredTensor(biasGrad, "biasGrad");
    at::Tensor ggamma = hostTensor(gammaGrad);
    checkMhcShapes(op, xt, ph, al, ga);
    const int64_t n = xt.size(-2), d = xt.size(-1), k = ph.size(0), tokens = xt.numel() / (n * d);
    TORCH_CHECK((!g_in.defined() || g_in.numel() == tokens * d) && r.numel() == tokens && mix.numel() == tokens * k &&
                    pre.numel() == tokens * n && post.numel() == tokens * n,
                op, ": gradHIn, invRms, hMix, hPre and hPost must match x's ", tokens, " tokens, got ",
                describeTensors({r, mix, pre, post}));
    TORCH_CHECK(!g_post.defined() || g_post.numel() == tokens * n, op, ": gradHPost must be (tokens, n)");
    TORCH_CHECK(!g_res.defined() || al.numel() == 2 || g_res.numel() == tokens * n * n, op,
                ": gradHRes must be (tokens, n, n)");
    TORCH_CHECK(!g_xpost.defined() || g_xpost.numel() == xt.numel(), op, ": gradXPost must be x's shape");
    TORCH_CHECK(gx.numel() == xt.numel() && gphi.numel() == ph.numel() && galpha.numel() == al.numel() &&
                    gbias.numel() == k,
                op, ": the gradients must have x's, phi's, alpha's and bias' sizes");
    return Prepared{{xt, ph, al, g_in, g_post, g_res, r, mix, pre, post, ga, g_xpost}, [=]() mutable {
                      const at::TensorOptions f32 = at::TensorOptions().dtype(at::kFloat);
                      const at::Tensor xf = xt.reshape({tokens, n * d}).to(at::kFloat);
                      const at::Tensor x3 = xf.view({tokens, n, d});
                      const at::Tensor gf = ga.defined() ? ga.reshape({n * d}).to(at::kFloat) : at::ones({n * d}, f32);
                      const at::Tensor rf = r.reshape({tokens, 1}).to(at::kFloat);
                      const at::Tensor mixf = mix.reshape({tokens, k}).to(at::kFloat);
                      const at::Tensor pref = pre.reshape({tokens, n}).to(at::kFloat);
                      const at::Tensor postf = post.reshape({tokens, n}).to(at::kFloat);
                      const at::Tensor af = al.to(at::kFloat);
                      const at::Tensor gin = g_in.defined() ? g_in.reshape({tokens, d}).to(at::kFloat)
                                                            : at::zeros({tokens, d}, f32);
                      const at::Tensor gpost = g_post.defined() ? g_post.reshape({tokens, n}).to(at::kFloat)
                                                                : at::zeros({tokens, n}, f32);
                      const at::Tensor w = mixf * rf;
                      // Through the gates: sigmoid' = s (1 - s) with s = hPre - hcEps, and hPost = 2 s gives
                      // d hPost / dz = hPost (1 - hPost / 2).
                      const at::Tensor s = pref - hcEps;
                      const at::Tensor gz_pre = (gin.unsqueeze(1) * x3).sum(-1) * s * (1 - s);
                      const at::Tensor gz_post = gpost * postf * (1 - postf / 2);
                      std::vector<at::Tensor> gz{gz_pre, gz_post};
                      if (al.numel() == 3) {
                        gz.push_back(g_res.defined() ? g_res.reshape({tokens, n * n}).to(at::kFloat)
                                                     : at::zeros({tokens, n * n}, f32));
                      }
                      std::vector<at::Tensor> g_alpha, g_w;
                      int64_t col = 0;
                      for (size_t i = 0; i < gz.size(); ++i) {
                        const int64_t width = gz[i].size(1);
                        g_alpha.push_back((w.narrow(1, col, width) * gz[i]).sum().reshape({1}));
                        g_w.push_back(gz[i] * af[static_cast<int64_t>(i)]);
                        col += width;
                      }
                      const at::Tensor gw = at::cat(g_w, 1);
                      const at::Tensor g_mix = gw * rf;
                      const at::Tensor g_r = (gw * mixf).sum(-1, true);
                      const at::Tensor xg = xf * gf;
                      const at::Tensor g_xg = at::matmul(g_mix, ph.to(at::kFloat));
                      at::Tensor grad_x = g_xg * gf - g_r * rf.pow(3) * xf / static_cast<double>(n * d);
                      grad_x = grad_x + (pref.unsqueeze(-1) * gin.unsqueeze(1)).reshape({tokens, n * d});
                      if (g_xpost.defined()) grad_x = grad_x + g_xpost.reshape({tokens, n * d}).to(at::kFloat);
                      gx.copy_(grad_x.view(gx.sizes()));
                      gphi.copy_(at::matmul(g_mix.t(), xg).view(gphi.sizes()));
                      galpha.copy_(at::cat(g_alpha).view(galpha.sizes()));
                      gbias.copy_(at::cat(gz, 1).sum(0).view(gbias.sizes()));
                      // Without gamma there is no gamma to train: its gradient is zeros (as the device kernel
                      // writes), not the gradient an all-ones gamma would get.
                      if (ggamma.defined()) {
                        if (ga.defined()) {
                          ggamma.copy_((g_xg * xf).sum(0).view(ggamma.sizes()));
                        } else {
                          ggamma.zero_();
                        }
                      }
                    },
                    {gx, gphi, galpha, gbias, ggamma}};
  });
}
NPU_ATEN_OP(MhcPreBackward, "x, phi, alpha, gradHIn, gradHPost, gradHRes, invRms, hMix, hPre, hPost, gamma, "
                            "gradXPost, hcEps, xGrad, phiGrad, alphaGrad, biasGrad, gammaGrad");

// ---- NsaCompressWithCache ----------------------------------------------------------------------------------------

// For each sequence b of actSeqLen (L tokens in pages of pageBlockSize rows, page j at blockTable[b, j] of input
// (blocks, pageBlockSize, N, D)): when L >= compressBlockSize and (L - compressBlockSize) % compressStride == 0,
// cache[slotMapping[b]] (N, D) = sum over the last compressBlockSize tokens t of weight[t, n] * token[t, n, :].
extern "C" NOP_API aclnnStatus aclnnNsaCompressWithCacheGetWorkspaceSize(
    const aclTensor* input, const aclTensor* weight, const aclTensor* slotMapping, const aclIntArray* actSeqLen,
    const aclTensor* blockTable, char* layout, int64_t compressBlockSize, int64_t compressStride,
    int64_t actSeqLenType, int64_t pageBlockSize, aclTensor* cache, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnNsaCompressWithCache", workspaceSize, executor, [&] {
    const char* op = "aclnnNsaCompressWithCache";
    at::Tensor in = requiredTensor(input, "input"), w = requiredTensor(weight, "weight");
    at::Tensor slots = requiredTensor(slotMapping, "slotMapping"), table = requiredTensor(blockTable, "blockTable");
    at::Tensor c = requiredTensor(cache, "cache");
    const std::vector<int64_t> lens = intArray(actSeqLen);
    TORCH_CHECK(in.dim() == 4 && in.size(1) == pageBlockSize, op, ": input must be (blocks, pageBlockSize = ",
                pageBlockSize, ", N, D), got ", in.sizes());
    const int64_t heads = in.size(2), dim = in.size(3);
    TORCH_CHECK(compressBlockSize >= 1 && compressStride >= 1, op, ": compressBlockSize and compressStride must be "
                "positive");
    TORCH_CHECK(w.dim() == 2 && w.size(0) == compressBlockSize && w.size(1) == heads, op, ": weight must be (",
                compressBlockSize, ", ", heads, "), got ", w.sizes());
    const int64_t batch = slots.numel();
    TORCH_CHECK(static_cast<int64_t>(lens.size()) == batch, op, ": actSeqLen needs one length per slotMapping entry (",
                batch, "), got ", lens.size());
    TORCH_CHECK(table.dim() == 2 && table.size(0) >= batch, op, ": blockTable must be (batch, max pages)");
    TORCH_CHECK(c.dim() == 3 && c.size(1) == heads && c.size(2) == dim, op, ": cache must be (slots, ", heads, ", ",
                dim, "), got ", c.sizes());
    return Prepared{{in, w, slots, table}, [=]() mutable {
                      const std::vector<int64_t> slot = longValues(slots), pages = longValues(table);
                      const int64_t cols = table.size(1);
                      const at::Tensor wf = w.to(at::kFloat).unsqueeze(-1);  // (block, N, 1)
                      for (int64_t b = 0; b < batch; ++b) {
                        const int64_t len = lens[b];
                        if (len < compressBlockSize || (len - compressBlockSize) % compressStride != 0) continue;
                        std::vector<at::Tensor> rows;
                        for (int64_t t = len - compressBlockSize; t < len; ++t) {
                          const int64_t page = t / pageBlockSize;
                          TORCH_CHECK(page < cols, op, ": sequence ", b, " of ", len, " tokens needs more than ", cols,
                                      " blockTable columns");
                          const int64_t blk = pages[b * cols + page];
                          TORCH_CHECK(blk >= 0 && blk < in.size(0), op, ": block ", blk, " is outside input's ",
                                      in.size(0), " blocks");
                          rows.push_back(in[blk][t % pageBlockSize]);
                        }
                        TORCH_CHECK(slot[b] >= 0 && slot[b] < c.size(0), op, ": slot ", slot[b],
                                    " is outside cache's ", c.size(0), " slots");
                        const at::Tensor window = at::stack(rows).to(at::kFloat);  // (block, N, D)
                        c[slot[b]].copy_((window * wf).sum(0));
                      }
                    },
                    {c}};
  });
}
NPU_ATEN_OP(NsaCompressWithCache, "input, weight, slotMapping, actSeqLen, blockTable, layout, compressBlockSize, "
                                  "compressStride, actSeqLenType, pageBlockSize, cache");
