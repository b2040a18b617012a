// FusionMiscOps.cpp - miscellaneous fused ops: DropoutGenMaskV3 / DropoutDoMaskV3 (dropout with one uint8 mask byte
// per element, 1 = kept), MhcSinkhorn (doubly stochastic mHC residual matrices) and MhcPost (mHC output mixing),
// each with its backward, and FusedLinearOnlineMaxSum / FusedCrossEntropyLossWithMaxSum (vocabulary-parallel cross
// entropy's local and final steps), and Ifmr (int8 quantisation scale search).
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <cmath>

#include "AtenOpSupport.h"
#include "FlashAttentionKernel.h"

using namespace npu::opslib::aten;

extern "C" NOP_API aclnnStatus aclnnDropoutGenMaskV3GetWorkspaceSize(const aclIntArray* shape, double prob,
                                                                     int64_t seed, int64_t offset, aclTensor* out,
                                                                     uint64_t* workspaceSize,
                                                                     aclOpExecutor** executor) {
  return prepareOp("aclnnDropoutGenMaskV3", workspaceSize, executor, [&] {
    const char* op = "aclnnDropoutGenMaskV3";
    const std::vector<int64_t> dims = intArray(shape);
    at::Tensor o = requiredTensor(out, "out");
    int64_t numel = 1;
    for (int64_t d : dims) numel *= d;
    TORCH_CHECK(o.scalar_type() == at::kByte && o.numel() == numel, op,
                ": out must be uint8 with one byte per element (",
                numel, "), got ", o.scalar_type(), " with ", o.numel());
    TORCH_CHECK(prob >= 0.0 && prob <= 1.0, op, ": prob must be in [0, 1], got ", prob);
    return Prepared{{}, [=]() mutable {
                      // Draw the packed bits as the bit-mask dropout does, then give every element its own byte.
                      at::Tensor bits = at::empty({(numel + 7) / 8}, o.options());
                      dropoutGenMask(static_cast<uint64_t>(seed), static_cast<uint64_t>(offset), 1.0 - prob, numel,
                                     static_cast<uint8_t*>(bits.data_ptr()));
                      const at::Tensor shifts = at::arange(8, bits.options().dtype(at::kInt));
                      const at::Tensor bytes =
                          bits.to(at::kInt).unsqueeze(1).bitwise_right_shift(shifts).bitwise_and(1);
                      o.copy_(bytes.flatten().narrow(0, 0, numel).view(o.sizes()));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(DropoutGenMaskV3, "shape, prob, seed, offset, out");

// out = self * mask / (1 - p); p = 1 drops everything.
extern "C" NOP_API aclnnStatus aclnnDropoutDoMaskV3GetWorkspaceSize(const aclTensor* self, const aclTensor* mask,
                                                                    double prob, aclTensor* out,
                                                                    uint64_t* workspaceSize,
                                                                    aclOpExecutor** executor) {
  return prepareOp("aclnnDropoutDoMaskV3", workspaceSize, executor, [&] {
    const char* op = "aclnnDropoutDoMaskV3";
    at::Tensor x = requiredTensor(self, "self"), m = requiredTensor(mask, "mask"), o = requiredTensor(out, "out");
    TORCH_CHECK(m.scalar_type() == at::kByte && m.sizes() == x.sizes(), op,
                ": mask must be uint8 with the shape of self ", x.sizes(), ", got ", m.sizes());
    TORCH_CHECK(prob >= 0.0 && prob <= 1.0, op, ": prob must be in [0, 1], got ", prob);
    return Prepared{{x, m}, [=]() mutable {
                      const double scale = prob >= 1.0 ? 0.0 : 1.0 / (1.0 - prob);
                      o.copy_(x.to(at::kFloat) * m.to(at::kFloat) * scale);
                    },
                    {o}};
  });
}
NPU_ATEN_OP(DropoutDoMaskV3, "self, mask, prob, out");

// ---- MhcSinkhorn: y = alternating column / row normalisation of softmax(x) + eps, with the saved steps ----
// Saved-step layout (our own; torch_npu's is tiled per AI core): norm viewed as [2 * iters, T, n, 8] and sum as
// [2 * iters, T, 8], the last dimension padded with zeros from n to 8. Step 0 keeps softmax(x) itself (the eps
// added after it does not change the gradient); odd steps divide by column sums, even steps >= 2 by row sums.
namespace {

constexpr int64_t kSinkhornPad = 8;

int64_t sinkhornMatrices(const at::Tensor& t) { return t.dim() == 4 ? t.size(0) * t.size(1) : t.size(0); }

// Step k divides by sums over rows (dim -2, one per column) when odd, over columns (dim -1) when even.
int64_t sinkhornSumDim(int64_t step) { return step % 2 == 1 ? -2 : -1; }

}  // namespace

extern "C" NOP_API aclnnStatus aclnnMhcSinkhornGetWorkspaceSize(const aclTensor* x, double eps, int64_t numIters,
                                                                aclTensor* yOut, aclTensor* normOut,
                                                                aclTensor* sumOut, uint64_t* workspaceSize,
                                                                aclOpExecutor** executor) {
  return prepareOp("aclnnMhcSinkhorn", workspaceSize, executor, [&] {
    const char* op = "aclnnMhcSinkhorn";
    at::Tensor xt = requiredTensor(x, "x"), y = requiredTensor(yOut, "yOut");
    at::Tensor norm = hostTensor(normOut), sum = hostTensor(sumOut);
    TORCH_CHECK((xt.dim() == 3 || xt.dim() == 4) && xt.size(-1) == xt.size(-2) && xt.size(-1) <= kSinkhornPad, op,
                ": x must be [T, n, n] or [B, S, n, n] with n <= 8, got ", xt.sizes());
    TORCH_CHECK(numIters >= 1, op, ": numIters must be at least 1, got ", numIters);
    const int64_t matrices = sinkhornMatrices(xt), n = xt.size(-1);
    TORCH_CHECK(norm.defined() == sum.defined(), op, ": normOut and sumOut must be given together");
    if (norm.defined()) {
      TORCH_CHECK(norm.numel() == 2 * numIters * matrices * n * kSinkhornPad &&
                      sum.numel() == 2 * numIters * matrices * kSinkhornPad,
                  op, ": normOut / sumOut must hold 2 * numIters * T * n * 8 / 2 * numIters * T * 8 values");
    }
    std::vector<at::Tensor> outs{y};
    if (norm.defined()) {
      outs.push_back(norm);
      outs.push_back(sum);
    }
    return Prepared{{xt}, [=]() mutable {
                      const at::Tensor soft = at::softmax(xt.to(at::kFloat).reshape({matrices, n, n}), -1);
                      at::Tensor steps_norm, steps_sum;
                      if (norm.defined()) {
                        steps_norm = at::zeros({2 * numIters, matrices, n, kSinkhornPad}, soft.options());
                        steps_sum = at::zeros({2 * numIters, matrices, kSinkhornPad}, soft.options());
                        steps_norm[0].narrow(-1, 0, n).copy_(soft);
                      }
                      at::Tensor current = soft + eps;
                      for (int64_t step = 1; step < 2 * numIters; ++step) {
                        const int64_t dim = sinkhornSumDim(step);
                        const at::Tensor sums = current.sum(dim) + eps;  // [T, n]
                        current = current / sums.unsqueeze(dim);
                        if (norm.defined()) {
                          steps_norm[step].narrow(-1, 0, n).copy_(current);
                          steps_sum[step].narrow(-1, 0, n).copy_(sums);
                        }
                      }
                      y.copy_(current.reshape(y.sizes()));
                      if (norm.defined()) {
                        norm.copy_(steps_norm.reshape(norm.sizes()));
                        sum.copy_(steps_sum.reshape(sum.sizes()));
                      }
                    },
                    outs};
  });
}
NPU_ATEN_OP(MhcSinkhorn, "x, eps, numIters, yOut, normOut, sumOut");

// Walks the saved steps backwards: for z = u / s with s = sum(u) + eps, du = (dz - sum(dz * z)) / s; then the
// softmax gradient s * (g - sum(g * s)).
extern "C" NOP_API aclnnStatus aclnnMhcSinkhornBackwardGetWorkspaceSize(const aclTensor* gradY, const aclTensor* norm,
                                                                        const aclTensor* sum, aclTensor* gradX,
                                                                        uint64_t* workspaceSize,
                                                                        aclOpExecutor** executor) {
  return prepareOp("aclnnMhcSinkhornBackward", workspaceSize, executor, [&] {
    const char* op = "aclnnMhcSinkhornBackward";
    at::Tensor gy = requiredTensor(gradY, "gradY"), nt = requiredTensor(norm, "norm"), st = requiredTensor(sum, "sum");
    at::Tensor gx = requiredTensor(gradX, "gradX");
    TORCH_CHECK((gy.dim() == 3 || gy.dim() == 4) && gy.size(-1) == gy.size(-2) && gy.size(-1) <= kSinkhornPad, op,
                ": gradY must be [T, n, n] or [B, S, n, n] with n <= 8, got ", gy.sizes());
    const int64_t matrices = sinkhornMatrices(gy), n = gy.size(-1);
    TORCH_CHECK(st.numel() > 0 && st.numel() % (2 * matrices * kSinkhornPad) == 0 && nt.numel() == st.numel() * n,
                op, ": norm / sum do not match gradY ", gy.sizes(), " (norm ", nt.numel(), ", sum ", st.numel(),
                " values)");
    const int64_t steps = st.numel() / (matrices * kSinkhornPad);
    return Prepared{{gy, nt, st}, [=]() mutable {
                      const at::Tensor norms = nt.to(at::kFloat).reshape({steps, matrices, n, kSinkhornPad})
                                                   .narrow(-1, 0, n);
                      const at::Tensor sums =
                          st.to(at::kFloat).reshape({steps, matrices, kSinkhornPad}).narrow(-1, 0, n);
                      at::Tensor grad = gy.to(at::kFloat).reshape({matrices, n, n});
                      for (int64_t step = steps - 1; step >= 1; --step) {
                        const int64_t dim = sinkhornSumDim(step);
                        grad = (grad - (grad * norms[step]).sum(dim, true)) / sums[step].unsqueeze(dim);
                      }
                      const at::Tensor soft = norms[0];
                      gx.copy_((soft * (grad - (grad * soft).sum(-1, true))).reshape(gx.sizes()));
                    },
                    {gx}};
  });
}
NPU_ATEN_OP(MhcSinkhornBackward, "gradY, norm, sum, gradX");

// ---- MhcPost: y[j, d] = sum_i h_res[i, j] x[i, d] + h_post[j] h_out[d] per token (no h_res: identity) ----
namespace {

void checkMhcPostOperands(const char* op, const at::Tensor& x, const at::Tensor& res, const at::Tensor& out,
                          const at::Tensor& post) {
  TORCH_CHECK(x.dim() == 3 || x.dim() == 4, op, ": x must be [T, n, D] or [B, S, n, D], got ", x.sizes());
  const int64_t tokens = x.numel() / (x.size(-1) * x.size(-2));
  TORCH_CHECK(out.numel() == tokens * x.size(-1) && post.numel() == tokens * x.size(-2), op,
              ": h_out / h_post must hold [..., D] / [..., n] values for x ", x.sizes());
  TORCH_CHECK(!res.defined() || res.numel() == tokens * x.size(-2) * x.size(-2), op,
              ": h_res must hold [..., n, n] values for x ", x.sizes());
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnMhcPostGetWorkspaceSize(const aclTensor* x, const aclTensor* hRes,
                                                            const aclTensor* hOut, const aclTensor* hPost,
                                                            aclTensor* yOut, uint64_t* workspaceSize,
                                                            aclOpExecutor** executor) {
  return prepareOp("aclnnMhcPost", workspaceSize, executor, [&] {
    at::Tensor xt = requiredTensor(x, "x"), res = hostTensor(hRes), out = requiredTensor(hOut, "hOut");
    at::Tensor post = requiredTensor(hPost, "hPost"), y = requiredTensor(yOut, "yOut");
    checkMhcPostOperands("aclnnMhcPost", xt, res, out, post);
    return Prepared{{xt, res, out, post}, [=]() mutable {
                      const int64_t n = xt.size(-2), d = xt.size(-1);
                      const at::Tensor xf = xt.to(at::kFloat).reshape({-1, n, d});
                      // y mixes the n streams with h_res transposed: y[j] = sum_i h_res[i, j] x[i]
                      const at::Tensor mixed =
                          res.defined() ? at::matmul(res.to(at::kFloat).reshape({-1, n, n}).transpose(-1, -2), xf) : xf;
                      const at::Tensor post_term = post.to(at::kFloat).reshape({-1, n, 1}) *
                                                   out.to(at::kFloat).reshape({-1, 1, d});
                      y.copy_((mixed + post_term).reshape(y.sizes()));
                    },
                    {y}};
  });
}
NPU_ATEN_OP(MhcPost, "x, hRes, hOut, hPost, yOut");

extern "C" NOP_API aclnnStatus aclnnMhcPostBackwardGetWorkspaceSize(
    const aclTensor* gradY, const aclTensor* x, const aclTensor* hRes, const aclTensor* hOut, const aclTensor* hPost,
    aclTensor* gradX, aclTensor* gradHRes, aclTensor* gradHOut, aclTensor* gradHPost, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnMhcPostBackward", workspaceSize, executor, [&] {
    at::Tensor gy = requiredTensor(gradY, "gradY"), xt = requiredTensor(x, "x"), res = hostTensor(hRes);
    at::Tensor out = requiredTensor(hOut, "hOut"), post = requiredTensor(hPost, "hPost");
    at::Tensor gx = requiredTensor(gradX, "gradX"), gres = requiredTensor(gradHRes, "gradHRes");
    at::Tensor gout = requiredTensor(gradHOut, "gradHOut"), gpost = requiredTensor(gradHPost, "gradHPost");
    checkMhcPostOperands("aclnnMhcPostBackward", xt, res, out, post);
    TORCH_CHECK(gy.numel() == xt.numel(), "aclnnMhcPostBackward: gradY must have x's shape ", xt.sizes());
    return Prepared{{gy, xt, res, out, post}, [=]() mutable {
                      const int64_t n = xt.size(-2), d = xt.size(-1);
                      const at::Tensor g = gy.to(at::kFloat).reshape({-1, n, d});
                      const at::Tensor xf = xt.to(at::kFloat).reshape({-1, n, d});
                      gx.copy_((res.defined() ? at::matmul(res.to(at::kFloat).reshape({-1, n, n}), g) : g)
                                   .reshape(gx.sizes()));
                      gres.copy_(at::matmul(xf, g.transpose(-1, -2)).reshape(gres.sizes()));
                      gout.copy_(at::matmul(post.to(at::kFloat).reshape({-1, 1, n}), g).reshape(gout.sizes()));
                      gpost.copy_(at::matmul(g, out.to(at::kFloat).reshape({-1, d, 1})).reshape(gpost.sizes()));
                    },
                    {gx, gres, gout, gpost}};
  });
}
NPU_ATEN_OP(MhcPostBackward, "gradY, x, hRes, hOut, hPost, gradX, gradHRes, gradHOut, gradHPost");

// ---- FusedCrossEntropyLossWithMaxSum: loss = log(sum_exp) - predicted; softmax = exp(logits - max) / sum_exp ----
extern "C" NOP_API aclnnStatus aclnnFusedCrossEntropyLossWithMaxSumGetWorkspaceSize(
    const aclTensor* logitsMax, const aclTensor* sumExpLogits, const aclTensor* predictedLogits, double labelSmoothing,
    const aclTensor* input, const aclTensor* weight, const aclTensor* vocabParallelLogits, aclTensor* lossOut,
    aclTensor* softmaxOutOptional, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnFusedCrossEntropyLossWithMaxSum", workspaceSize, executor, [&] {
    const char* op = "aclnnFusedCrossEntropyLossWithMaxSum";
    at::Tensor mx = requiredTensor(logitsMax, "logitsMax"), se = requiredTensor(sumExpLogits, "sumExpLogits");
    at::Tensor pr = requiredTensor(predictedLogits, "predictedLogits"), logits = hostTensor(vocabParallelLogits);
    at::Tensor loss = requiredTensor(lossOut, "lossOut"), softmax = hostTensor(softmaxOutOptional);
    TORCH_CHECK(labelSmoothing == 0.0, op, ": only labelSmoothing 0 is supported, got ", labelSmoothing);
    TORCH_CHECK(input == nullptr && weight == nullptr, op, ": input and weight must be null");
    TORCH_CHECK(mx.dim() == 1 && se.sizes() == mx.sizes() && pr.sizes() == mx.sizes() && loss.numel() == mx.numel(),
                op, ": logitsMax, sumExpLogits, predictedLogits and lossOut must be 1-D of one length");
    TORCH_CHECK(logits.defined() == softmax.defined(), op,
                ": softmaxOutOptional is given exactly when vocabParallelLogits is");
    TORCH_CHECK(!logits.defined() || (logits.dim() == 2 && logits.size(0) == mx.size(0) &&
                                      softmax.sizes() == logits.sizes()),
                op, ": vocabParallelLogits / softmaxOutOptional must be [", mx.size(0), ", vocab]");
    std::vector<at::Tensor> outs{loss};
    if (softmax.defined()) outs.push_back(softmax);
    return Prepared{{mx, se, pr, logits}, [=]() mutable {
                      const at::Tensor sums = se.to(at::kFloat);
                      loss.copy_(sums.log() - pr.to(at::kFloat));
                      if (logits.defined()) {
                        softmax.copy_((logits.to(at::kFloat) - mx.to(at::kFloat).unsqueeze(-1)).exp() /
                                      sums.unsqueeze(-1));
                      }
                    },
                    outs};
  });
}
NPU_ATEN_OP(FusedCrossEntropyLossWithMaxSum, "logitsMax, sumExpLogits, predictedLogits, labelSmoothing, input, weight, "
                                             "vocabParallelLogits, lossOut, softmaxOutOptional");

// ---- FusedLinearOnlineMaxSum: local logits statistics of a vocabulary shard [start, end] (end inclusive) ----
// targetMask packs one bit per row, row p in bit p % 8 of byte p / 8 (1 = target outside the shard); the padding
// bits past the last row are 1.
extern "C" NOP_API aclnnStatus aclnnFusedLinearOnlineMaxSumGetWorkspaceSize(
    const aclTensor* input, const aclTensor* weight, const aclTensor* target, int64_t vocabStartIndex,
    int64_t vocabEndIndex, aclTensor* logitsMaxLocalOut, aclTensor* sumExpLogitsLocalOut,
    aclTensor* predictedLogitsLocalOut, aclTensor* targetMaskOut, aclTensor* maskedTargetOut,
    aclTensor* vocabParallelLogitsOutOptional, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnFusedLinearOnlineMaxSum", workspaceSize, executor, [&] {
    const char* op = "aclnnFusedLinearOnlineMaxSum";
    at::Tensor x = requiredTensor(input, "input"), w = requiredTensor(weight, "weight");
    at::Tensor t = requiredTensor(target, "target"), mx = requiredTensor(logitsMaxLocalOut, "logitsMaxLocalOut");
    at::Tensor se = requiredTensor(sumExpLogitsLocalOut, "sumExpLogitsLocalOut");
    at::Tensor pr = requiredTensor(predictedLogitsLocalOut, "predictedLogitsLocalOut");
    at::Tensor tm = requiredTensor(targetMaskOut, "targetMaskOut");
    at::Tensor mt = requiredTensor(maskedTargetOut, "maskedTargetOut");
    at::Tensor logits_out = hostTensor(vocabParallelLogitsOutOptional);
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && w.size(1) == x.size(1) && t.numel() == x.size(0), op,
                ": input [batch, hidden], weight [vocab, hidden] and target [batch] expected, got ", x.sizes(), ", ",
                w.sizes(), ", ", t.sizes());
    const int64_t batch = x.size(0), vocab = w.size(0);
    TORCH_CHECK(mx.numel() == batch && se.numel() == batch && pr.numel() == batch && mt.numel() == batch &&
                    tm.scalar_type() == at::kByte && tm.numel() == (batch + 7) / 8,
                op, ": output sizes do not match batch ", batch);
    TORCH_CHECK(!logits_out.defined() || logits_out.numel() == batch * vocab, op,
                ": vocabParallelLogitsOutOptional must be [", batch, ", ", vocab, "]");
    TORCH_CHECK(vocabStartIndex >= 0 && vocabEndIndex >= vocabStartIndex && vocabEndIndex - vocabStartIndex < vocab,
                op, ": need 0 <= vocabStartIndex <= vocabEndIndex < vocabStartIndex + vocab");
    std::vector<at::Tensor> outs{mx, se, pr, tm, mt};
    if (logits_out.defined()) outs.push_back(logits_out);
    return Prepared{{x, w, t}, [=]() mutable {
                      const at::Tensor logits = at::matmul(x.to(at::kFloat), w.to(at::kFloat).t());  // [batch, vocab]
                      const at::Tensor row_max = std::get<0>(logits.max(-1));
                      const at::Tensor shifted = logits - row_max.unsqueeze(-1);
                      const at::Tensor tl = t.reshape({-1}).to(at::kLong);
                      const at::Tensor outside = (tl < vocabStartIndex).logical_or(tl > vocabEndIndex);
                      const at::Tensor local = (tl - vocabStartIndex).masked_fill(outside, 0);
                      const at::Tensor picked =
                          shifted.gather(1, local.unsqueeze(1)).squeeze(1).masked_fill(outside, 0);
                      mx.copy_(row_max.reshape(mx.sizes()));
                      se.copy_(shifted.exp().sum(-1).reshape(se.sizes()));
                      pr.copy_(picked.reshape(pr.sizes()));
                      mt.copy_(local.reshape(mt.sizes()));
                      // pad the mask to whole bytes with 1 bits, then pack 8 rows per byte, row 8k + b in bit b
                      const int64_t padded = (batch + 7) / 8 * 8;
                      at::Tensor bits = at::ones({padded}, tl.options());
                      bits.narrow(0, 0, batch).copy_(outside);
                      const at::Tensor weights = at::pow(2, at::arange(8, tl.options()));
                      tm.copy_((bits.view({-1, 8}) * weights).sum(-1).reshape(tm.sizes()));
                      if (logits_out.defined()) logits_out.copy_(logits.reshape(logits_out.sizes()));
                    },
                    outs};
  });
}
NPU_ATEN_OP(FusedLinearOnlineMaxSum, "input, weight, target, vocabStartIndex, vocabEndIndex, logitsMaxLocalOut, "
                                     "sumExpLogitsLocalOut, predictedLogitsLocalOut, targetMaskOut, maskedTargetOut, "
                                     "vocabParallelLogitsOutOptional");

// ---- Ifmr: int8 scale / offset search. Initial clip range from the histogram's percentiles, then every candidate
// max * step (step in [searchStart, searchEnd) by searchStep) is scored by the squared error of quantising and
// dequantising data; the first best candidate wins. All in float32. ----
extern "C" NOP_API aclnnStatus aclnnIfmrGetWorkspaceSize(const aclTensor* data, const aclTensor* dataMin,
                                                         const aclTensor* dataMax, const aclTensor* cumsum,
                                                         double minPercentile, double maxPercentile,
                                                         double searchStart, double searchEnd, double searchStep,
                                                         bool withOffset, aclTensor* scaleOut, aclTensor* offsetOut,
                                                         uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnIfmr", workspaceSize, executor, [&] {
    const char* op = "aclnnIfmr";
    at::Tensor d = requiredTensor(data, "data"), dmin = requiredTensor(dataMin, "dataMin");
    at::Tensor dmax = requiredTensor(dataMax, "dataMax"), cs = requiredTensor(cumsum, "cumsum");
    at::Tensor scale = requiredTensor(scaleOut, "scaleOut"), offset = requiredTensor(offsetOut, "offsetOut");
    TORCH_CHECK(d.numel() > 0 && dmin.numel() == 1 && dmax.numel() == 1 && cs.numel() > 0, op,
                ": data and cumsum must be non-empty, dataMin / dataMax one value each");
    TORCH_CHECK(searchStep > 0 && searchEnd > searchStart, op, ": empty search range");
    return Prepared{{d, dmin, dmax, cs}, [=]() mutable {
                      const at::Tensor x = d.to(at::kFloat).reshape({1, -1});
                      const float lo = dmin.to(at::kFloat).item<float>(), hi = dmax.to(at::kFloat).item<float>();
                      const float bins = static_cast<float>(cs.numel());
                      const at::Tensor cdf = cs.to(at::kFloat) / static_cast<float>(d.numel());
                      // a percentile's bin index = how many bins lie below it
                      const float max_index = (cdf < static_cast<float>(maxPercentile)).sum().item<float>();
                      const float min_index = (cdf < static_cast<float>(1.0 - minPercentile)).sum().item<float>();
                      float max_init = max_index / bins * (hi - lo) + lo;
                      float min_init = min_index / bins * (hi - lo) + lo;
                      const at::Tensor steps = at::arange(searchStart, searchEnd, searchStep, x.options());
                      at::Tensor scales, offsets;
                      if (withOffset) {
                        max_init = std::max(max_init, 0.0f);
                        min_init = std::min(min_init, 0.0f);
                        scales = (steps * max_init - min_init) / 255.0f;
                        scales = scales.masked_fill(scales < 1.192092896e-07f, 1.0f);
                        offsets = -((min_init / scales).round() + 128.0f);
                      } else {
                        max_init = std::max(std::abs(max_init), std::abs(min_init));
                        scales = steps * max_init / 127.0f;
                        offsets = at::zeros_like(scales);
                      }
                      const at::Tensor s = scales.unsqueeze(1), o = offsets.unsqueeze(1);  // [candidates, 1]
                      const at::Tensor q = ((x / s).round() + o).clamp(-128, 127);
                      const at::Tensor loss = ((q - o) * s - x).square().sum(1);
                      const int64_t best = loss.argmin().item<int64_t>();
                      scale.fill_(scales[best].item());
                      offset.fill_(offsets[best].item());
                    },
                    {scale, offset}};
  });
}
NPU_ATEN_OP(Ifmr, "data, dataMin, dataMax, cumsum, minPercentile, maxPercentile, searchStart, searchEnd, searchStep, "
                  "withOffset, scaleOut, offsetOut");
