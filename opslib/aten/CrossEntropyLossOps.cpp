// CrossEntropyLossOps.cpp - CrossEntropyLoss and its gradient: log_softmax + weighted nll with ignore_index and
// label smoothing (PyTorch's cross_entropy), plus the z-loss scale * lse^2 per row. Computed in float32.
// Reductions: 'mean' divides the loss by the summed weights of the counted rows and the z-loss by their number.
#include <ATen/TensorOperators.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>

#include <string>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

at::Tensor wide(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }

std::string reductionOf(const char* op, const char* reduction) {
  const std::string mode = reduction == nullptr ? "mean" : reduction;
  TORCH_CHECK(mode == "mean" || mode == "sum" || mode == "none", op,
              ": reduction must be \"mean\", \"sum\" or \"none\", got \"", mode, "\"");
  return mode;
}

void checkShapes(const char* op, const at::Tensor& x, const at::Tensor& target, const at::Tensor& weight) {
  TORCH_CHECK(x.dim() == 2 && x.size(1) > 0, op, ": input must be [N, C], got ", x.sizes());
  TORCH_CHECK(target.dim() == 1 && target.size(0) == x.size(0), op, ": target must be [N], got ", target.sizes());
  TORCH_CHECK(!weight.defined() || (weight.dim() == 1 && weight.size(0) == x.size(1)), op, ": weight must be [C], got ",
              weight.sizes());
}

// What both directions need per row: which rows count, their (safe) class, the class weights.
struct Rows {
  at::Tensor counted;   // [N] float32, 1 for rows whose target is not ignore_index
  at::Tensor cls;       // [N, 1] int64, a valid class index (0 for ignored rows)
  at::Tensor weights;   // [C] float32
  at::Tensor target_w;  // [N] float32, weight of each counted row's class (0 for ignored rows)
};

Rows rowsOf(const char* op, const at::Tensor& target, const at::Tensor& weight, int64_t classes,
            int64_t ignore_index) {
  const at::Tensor t = target.to(at::kLong);
  const at::Tensor keep = t.ne(ignore_index);
  const at::Tensor kept = t.masked_select(keep);
  if (kept.numel() > 0) {
    const int64_t low = kept.min().item<int64_t>(), high = kept.max().item<int64_t>();
    TORCH_CHECK(low >= 0 && high < classes, op, ": target values must be class indices in [0, ", classes,
                ") (or ignore_index ", ignore_index, "), got values in [", low, ", ", high, "]");
  }
  Rows r;
  r.counted = keep.to(at::kFloat);
  r.cls = at::where(keep, t, 0).unsqueeze(1);
  r.weights = weight.defined() ? wide(weight) : at::ones({classes}, t.options().dtype(at::kFloat));
  r.target_w = r.weights.index_select(0, r.cls.squeeze(1)) * r.counted;
  return r;
}

// The per-row factor a reduced loss puts on each row (1 for "none" / "sum", 1 / denominator for "mean").
at::Tensor reduced(const at::Tensor& per_row, const std::string& mode, const at::Tensor& denominator) {
  if (mode == "none") return per_row;
  const at::Tensor total = per_row.sum();
  return (mode == "sum" ? total : total / denominator).reshape({1});
}

// The gradient each row receives from a loss output's gradient `g` under `mode`.
at::Tensor rowGrad(const at::Tensor& g, const std::string& mode, const at::Tensor& denominator, int64_t rows) {
  const at::Tensor gf = wide(g).reshape({-1});
  if (mode == "none") return gf;
  const at::Tensor one = mode == "sum" ? gf : gf / denominator;
  return one.expand({rows});
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnCrossEntropyLossGetWorkspaceSize(
    const aclTensor* input, const aclTensor* target, const aclTensor* weightOptional, char* reductionOptional,
    int64_t ignoreIndex, double labelSmoothing, double lseSquareScaleForZloss, bool returnZloss, aclTensor* lossOut,
    aclTensor* logProbOut, aclTensor* zlossOut, aclTensor* lseForZlossOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnCrossEntropyLoss", workspaceSize, executor, [&] {
    const char* op = "aclnnCrossEntropyLoss";
    at::Tensor x = requiredTensor(input, "input"), t = requiredTensor(target, "target"), w = hostTensor(weightOptional);
    at::Tensor loss = requiredTensor(lossOut, "lossOut"), log_prob = hostTensor(logProbOut);
    at::Tensor zloss = hostTensor(zlossOut), lse_out = hostTensor(lseForZlossOut);
    const std::string mode = reductionOf(op, reductionOptional);
    checkShapes(op, x, t, w);
    const int64_t n = x.size(0), classes = x.size(1);
    TORCH_CHECK(loss.numel() == (mode == "none" ? n : 1), op, ": lossOut has ", loss.numel(), " elements for ",
                "reduction \"", mode, "\"");
    const bool want_zloss = returnZloss && zloss.defined() && zloss.numel() > 0;
    const bool want_lse = lse_out.defined() && lse_out.numel() > 0;
    return Prepared{{x, t, w}, [=]() mutable {
                      const Rows r = rowsOf(op, t, w, classes, ignoreIndex);
                      const at::Tensor xf = wide(x);
                      const at::Tensor lse = at::logsumexp(xf, {1});
                      const at::Tensor logp = xf - lse.unsqueeze(1);
                      const at::Tensor nll = -logp.gather(1, r.cls).squeeze(1) * r.target_w;
                      const at::Tensor smooth = -(logp * r.weights).sum(1) * r.counted;
                      const at::Tensor per_row = nll * (1 - labelSmoothing) + smooth * (labelSmoothing / classes);
                      loss.copy_(reduced(per_row, mode, r.target_w.sum()).reshape(loss.sizes()));
                      if (log_prob.defined()) log_prob.copy_(logp);
                      if (want_zloss) {
                        const at::Tensor z = lse * lse * lseSquareScaleForZloss * r.counted;
                        zloss.copy_(reduced(z, mode, r.counted.sum()).reshape(zloss.sizes()));
                      }
                      if (want_lse) lse_out.copy_(lse.reshape(lse_out.sizes()));
                    },
                    {loss, log_prob, zloss, lse_out}};
  });
}
NPU_ATEN_OP(CrossEntropyLoss, "input, target, weightOptional, reductionOptional, ignoreIndex, labelSmoothing, lseSquareScaleForZloss, returnZloss, lossOut, logProbOut, zlossOut, lseForZlossOut");

// d loss / d x[n, j] = (1 - ls) * w[y_n] * (p - onehot) + ls / C * (p * sum(w) - w[j]) on counted rows, scaled by
// the row's loss gradient; the z-loss adds 2 * scale * lse_n * p.
extern "C" NOP_API aclnnStatus aclnnCrossEntropyLossGradGetWorkspaceSize(
    const aclTensor* gradLoss, const aclTensor* logProb, const aclTensor* target, const aclTensor* weightOptional,
    const aclTensor* gradZlossOptional, const aclTensor* lseForZlossOptional, char* reductionOptional,
    int64_t ignoreIndex, double labelSmoothing, double lseSquareScaleForZloss, aclTensor* xGradOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnCrossEntropyLossGrad", workspaceSize, executor, [&] {
    const char* op = "aclnnCrossEntropyLossGrad";
    at::Tensor g = requiredTensor(gradLoss, "gradLoss"), lp = requiredTensor(logProb, "logProb");
    at::Tensor t = requiredTensor(target, "target"), w = hostTensor(weightOptional);
    at::Tensor gz = hostTensor(gradZlossOptional), lse = hostTensor(lseForZlossOptional);
    at::Tensor dx = requiredTensor(xGradOut, "xGradOut");
    const std::string mode = reductionOf(op, reductionOptional);
    checkShapes(op, lp, t, w);
    const int64_t n = lp.size(0), classes = lp.size(1);
    TORCH_CHECK(g.numel() == (mode == "none" ? n : 1), op, ": gradLoss has ", g.numel(), " elements for reduction \"",
                mode, "\"");
    const bool with_zloss = lseSquareScaleForZloss != 0.0 && gz.defined() && gz.numel() > 0 && lse.defined() &&
                            lse.numel() == n;
    TORCH_CHECK(!with_zloss || gz.numel() == g.numel(), op, ": gradZloss must have gradLoss's ", g.numel(),
                " element(s), got ", gz.sizes());
    return Prepared{{g, lp, t, w, gz, lse}, [=]() mutable {
                      const Rows r = rowsOf(op, t, w, classes, ignoreIndex);
                      const at::Tensor p = at::exp(wide(lp));
                      const at::Tensor onehot = at::zeros_like(p).scatter_(1, r.cls, 1.0);
                      const at::Tensor wy = r.weights.index_select(0, r.cls.squeeze(1)).unsqueeze(1);
                      const at::Tensor per_class = (p - onehot) * wy * (1 - labelSmoothing) +
                                                   (p * r.weights.sum() - r.weights) * (labelSmoothing / classes);
                      const at::Tensor row = rowGrad(g, mode, r.target_w.sum(), n) * r.counted;
                      at::Tensor grad = per_class * row.unsqueeze(1);
                      if (with_zloss) {
                        const at::Tensor zrow = rowGrad(gz, mode, r.counted.sum(), n) * r.counted;
                        grad = grad + p * (wide(lse) * (2 * lseSquareScaleForZloss) * zrow).unsqueeze(1);
                      }
                      dx.copy_(grad);
                    },
                    {dx}};
  });
}
NPU_ATEN_OP(CrossEntropyLossGrad, "gradLoss, logProb, target, weightOptional, gradZlossOptional, lseForZlossOptional, reductionOptional, ignoreIndex, labelSmoothing, lseSquareScaleForZloss, xGradOut");
