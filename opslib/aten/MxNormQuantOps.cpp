// MxNormQuantOps.cpp - rms norm with MX quantisation of its output fused in: aclnnRmsNormDynamicMxQuant and
// aclnnAddRmsNormDynamicMxQuant (residual add first). The normalised values are quantised in blocks of 32 along the
// last dimension (MxQuantSupport.h); rstd is written when outputRstd is set.
#include <ATen/TensorOperators.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/sqrt.h>

#include <vector>

#include "AtenOpSupport.h"
#include "MxQuantSupport.h"

using namespace npu::opslib::aten;
using namespace npu::opslib::aten::mx;

namespace {

constexpr int64_t kBlock = 32;

bool isFloatTensor(const at::Tensor& t) {
  return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kFloat;
}

struct MxNormArgs {
  at::Tensor gamma, beta, y, scales, rstd;
  Quantiser q;
  double epsilon;
  bool outputRstd;
};

// gamma (and beta) cover x's last dimension; y / mxscale as the MX quantiser of the last axis writes them; rstd
// [..., 1] float32 when outputRstd.
MxNormArgs checkMxNorm(const char* op, const at::Tensor& x, const aclTensor* gamma, const aclTensor* beta,
                       double epsilon, int64_t scaleAlg, const char* roundMode, int64_t dstType, bool outputRstd,
                       aclTensor* yOut, aclTensor* mxscaleOut, aclTensor* rstdOut) {
  MxNormArgs a{requiredTensor(gamma, "gamma"), hostTensor(beta), requiredTensor(yOut, "yOut"),
               requiredTensor(mxscaleOut, "mxscaleOut"), hostTensor(rstdOut),
               quantiserOf(op, dstType, roundMode, scaleAlg, 0.0), epsilon, outputRstd};
  checkHalfInput(op, x);
  TORCH_CHECK(x.dim() >= 1 && x.dim() <= 7, op, ": x must have 1 to 7 dimensions, got ", x.sizes());
  const int64_t h = x.size(-1);
  TORCH_CHECK(isFloatTensor(a.gamma) && a.gamma.numel() == h, op, ": gamma must be a float tensor of x's last ",
              "dimension (", h, "), got ", a.gamma.scalar_type(), " ", a.gamma.sizes());
  TORCH_CHECK(!a.beta.defined() || (isFloatTensor(a.beta) && a.beta.numel() == h), op, ": beta must be like gamma");
  checkMxOutput(op, *a.q.format, a.y, x.sizes());
  checkScaleOut(op, "mxscaleOut", mxscaleOut, a.scales, pairedScaleShape(x.sizes(), x.dim() - 1, kBlock));
  std::vector<int64_t> rstd_shape = x.sizes().vec();
  rstd_shape.back() = 1;
  TORCH_CHECK(!outputRstd || (a.rstd.defined() && a.rstd.scalar_type() == at::kFloat &&
                              a.rstd.sizes().equals(rstd_shape)),
              op, ": with outputRstd, rstdOut must be float32 ", at::IntArrayRef(rstd_shape));
  return a;
}

// rstd = 1 / sqrt(mean(x^2) + eps) over the last dimension, rounded once to float32 (as the kernel's rsqrt: 1000
// exactly for a zero row and eps 1e-6); y = MX(x * rstd * gamma (+ beta)).
void runMxNorm(MxNormArgs a, const at::Tensor& xf) {
  const at::Tensor ms = at::mean(xf * xf, {-1}, /*keepdim=*/true) + a.epsilon;
  const at::Tensor r = at::reciprocal(at::sqrt(ms.to(at::kDouble))).to(at::kFloat);
  at::Tensor v = xf * r * a.gamma.to(at::kFloat).reshape({-1});
  if (a.beta.defined()) v = v + a.beta.to(at::kFloat).reshape({-1});
  quantiseInto(v, xf.dim() - 1, kBlock, a.q, a.y, a.scales);
  if (a.outputRstd) a.rstd.copy_(r);
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnRmsNormDynamicMxQuantGetWorkspaceSize(
    const aclTensor* x, const aclTensor* gamma, const aclTensor* betaOptional, double epsilon, int64_t scaleAlg,
    char* roundMode, int64_t dstType, bool outputRstd, aclTensor* yOut, aclTensor* mxscaleOut, aclTensor* rstdOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnRmsNormDynamicMxQuant", workspaceSize, executor, [&] {
    const char* op = "aclnnRmsNormDynamicMxQuant";
    at::Tensor xt = requiredTensor(x, "x");
    MxNormArgs a = checkMxNorm(op, xt, gamma, betaOptional, epsilon, scaleAlg, roundMode, dstType, outputRstd, yOut,
                               mxscaleOut, rstdOut);
    return Prepared{{xt, a.gamma, a.beta}, [=]() { runMxNorm(a, xt.to(at::kFloat)); }, {a.y, a.scales, a.rstd}};
  });
}
NPU_ATEN_OP(RmsNormDynamicMxQuant, "x, gamma, betaOptional, epsilon, scaleAlg, roundMode, dstType, outputRstd, yOut, mxscaleOut, rstdOut");

// x = x1 + x2 (xOut, in x1's dtype; the norm reads this rounded sum), then as aclnnRmsNormDynamicMxQuant.
extern "C" NOP_API aclnnStatus aclnnAddRmsNormDynamicMxQuantGetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma, const aclTensor* betaOptional, double epsilon,
    int64_t scaleAlg, char* roundMode, int64_t dstType, bool outputRstd, aclTensor* yOut, aclTensor* xOut,
    aclTensor* mxscaleOut, aclTensor* rstdOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAddRmsNormDynamicMxQuant", workspaceSize, executor, [&] {
    const char* op = "aclnnAddRmsNormDynamicMxQuant";
    at::Tensor a1 = requiredTensor(x1, "x1"), a2 = requiredTensor(x2, "x2"), sum = requiredTensor(xOut, "xOut");
    TORCH_CHECK(a1.sizes().equals(a2.sizes()) && a1.scalar_type() == a2.scalar_type(), op,
                ": x1 and x2 must have one shape and dtype, got ", a1.sizes(), " ", a1.scalar_type(), " and ",
                a2.sizes(), " ", a2.scalar_type());
    TORCH_CHECK(sum.sizes().equals(a1.sizes()) && sum.scalar_type() == a1.scalar_type(), op, ": xOut must be like x1");
    MxNormArgs a = checkMxNorm(op, a1, gamma, betaOptional, epsilon, scaleAlg, roundMode, dstType, outputRstd, yOut,
                               mxscaleOut, rstdOut);
    return Prepared{{a1, a2, a.gamma, a.beta}, [=]() mutable {
                      sum.copy_(a1.to(at::kFloat) + a2.to(at::kFloat));
                      runMxNorm(a, sum.to(at::kFloat));
                    },
                    {a.y, sum, a.scales, a.rstd}};
  });
}
NPU_ATEN_OP(AddRmsNormDynamicMxQuant, "x1, x2, gamma, betaOptional, epsilon, scaleAlg, roundMode, dstType, outputRstd, yOut, xOut, mxscaleOut, rstdOut");
