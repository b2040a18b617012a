// NormFusionOps.cpp - residual-add and group norm fusions: AddRmsNormCast, InplaceAddRmsNorm, AddLayerNorm(Grad),
// DeepNorm(Grad), GroupNormSilu, GroupNormSwish(Grad). Float16 / bfloat16 compute in float32 and round once, as
// NPUs do; a residual sum that is also returned is normalised as stored (rounded to its dtype).
#include <ATen/TensorOperators.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sigmoid.h>

#include <string>
#include <vector>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

at::Tensor wide(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }

// `value` as a tensor of `type` would hold it, back in float32 (a sum the op also writes out).
at::Tensor storedAs(const at::Tensor& value, at::ScalarType type) {
  return type == at::kFloat ? value : value.to(type).to(at::kFloat);
}

// The trailing dimensions gamma normalises over.
std::vector<int64_t> normDims(const char* op, const at::Tensor& x, const at::Tensor& gamma) {
  TORCH_CHECK(gamma.dim() >= 1 && gamma.dim() <= x.dim() &&
                  x.sizes().slice(x.dim() - gamma.dim()).equals(gamma.sizes()),
              op, ": gamma's shape ", gamma.sizes(), " must equal the trailing dimensions of x ", x.sizes());
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - gamma.dim(); d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// x's shape with the normalised dimensions as 1: statistics broadcast against x.
std::vector<int64_t> keptShape(const at::Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> shape = x.sizes().vec();
  for (int64_t d : dims) shape[d] = 1;
  return shape;
}

int64_t rowsOf(const at::Tensor& x, const std::vector<int64_t>& dims) {
  int64_t rows = 1;
  for (int64_t d = 0; d < x.dim() - static_cast<int64_t>(dims.size()); ++d) rows *= x.size(d);
  return rows;
}

void checkStatOutput(const char* op, const at::Tensor& stat, int64_t rows, const char* name) {
  TORCH_CHECK(!stat.defined() || stat.numel() == rows, op, ": ", name, " must hold ", rows, " values (one per row), ",
              "got ", stat.sizes());
}

// Sums the dimensions in front of the normalised ones (parameter gradients).
at::Tensor sumLeading(const at::Tensor& t, int64_t lead) {
  if (lead == 0) return t;
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
  return t.sum(dims);
}

struct Moments {
  at::Tensor mean, rstd;  // float32, keepdim
};

Moments moments(const at::Tensor& xf, at::IntArrayRef dims, double eps) {
  const at::Tensor mean = xf.mean(dims, /*keepdim=*/true);
  const at::Tensor centered = xf - mean;
  return {mean, at::rsqrt((centered * centered).mean(dims, /*keepdim=*/true) + eps)};
}

// d(normalised x) -> dx for xhat = (x - mean) * rstd over `dims`.
at::Tensor normalisedGrad(const at::Tensor& dxhat, const at::Tensor& xhat, const at::Tensor& rstd,
                          at::IntArrayRef dims) {
  return rstd * (dxhat - dxhat.mean(dims, true) - xhat * (dxhat * xhat).mean(dims, true));
}

void storeStat(at::Tensor out, const at::Tensor& value) {
  if (out.defined()) out.copy_(value.reshape(out.sizes()));
}

// ---- group norm ------------------------------------------------------------------------------------------

struct Groups {
  int64_t n = 0, c = 0, groups = 0;
};

Groups checkGroups(const char* op, const at::Tensor& x, int64_t groups, const at::Tensor& gamma,
                   const at::Tensor& beta) {
  TORCH_CHECK(x.dim() >= 2, op, ": input must have at least 2 dimensions [N, C, ...], got ", x.sizes());
  TORCH_CHECK(groups > 0 && x.size(1) % groups == 0, op, ": the channel count ", x.size(1),
              " must split into num_groups (", groups, ") groups");
  for (const at::Tensor& p : {gamma, beta}) {
    TORCH_CHECK(!p.defined() || (p.dim() == 1 && p.size(0) == x.size(1)), op, ": weight and bias must be [C] = [",
                x.size(1), "], got ", p.sizes());
  }
  return {x.size(0), x.size(1), groups};
}

// A [C] parameter shaped to broadcast against [N, C, ...].
at::Tensor perChannel(const at::Tensor& p, const at::Tensor& x) {
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = x.size(1);
  return wide(p).reshape(shape);
}

struct GroupNormed {
  at::Tensor xhat;        // x's shape, float32
  at::Tensor mean, rstd;  // [N, G], float32
};

GroupNormed groupNormalise(const at::Tensor& x, const Groups& g, double eps) {
  const at::Tensor grouped = wide(x).reshape({g.n, g.groups, -1});
  const Moments m = moments(grouped, {2}, eps);
  return {((grouped - m.mean) * m.rstd).reshape(x.sizes()), m.mean.squeeze(2), m.rstd.squeeze(2)};
}

at::Tensor affine(const at::Tensor& xhat, const at::Tensor& gamma, const at::Tensor& beta, const at::Tensor& x) {
  at::Tensor y = gamma.defined() ? xhat * perChannel(gamma, x) : xhat;
  return beta.defined() ? y + perChannel(beta, x) : y;
}

void checkGroupStats(const char* op, const at::Tensor& stat, const Groups& g, const char* name) {
  TORCH_CHECK(stat.numel() == g.n * g.groups, op, ": ", name, " must be [N, num_groups] = [", g.n, ", ", g.groups,
              "], got ", stat.sizes());
}

std::vector<int64_t> allButChannel(const at::Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

void checkNchw(const char* op, const char* format) {
  TORCH_CHECK(format == nullptr || std::string(format) == "NCHW" || std::string(format) == "ND", op,
              ": dataFormat must be \"NCHW\" (channels in dimension 1), got \"", format, "\"");
}

}  // namespace

// y1 (float32) and y2 (y's dtype) = RMSNorm(x1 + x2) * gamma; x = x1 + x2.
extern "C" NOP_API aclnnStatus aclnnAddRmsNormCastGetWorkspaceSize(const aclTensor* x1, const aclTensor* x2,
                                                                   const aclTensor* gamma, double epsilon,
                                                                   aclTensor* y1Out, aclTensor* y2Out,
                                                                   aclTensor* rstdOut, aclTensor* xOut,
                                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAddRmsNormCast", workspaceSize, executor, [&] {
    const char* op = "aclnnAddRmsNormCast";
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2"), g = requiredTensor(gamma, "gamma");
    at::Tensor y1 = requiredTensor(y1Out, "y1Out"), y2 = requiredTensor(y2Out, "y2Out");
    at::Tensor rstd = requiredTensor(rstdOut, "rstdOut"), sum = requiredTensor(xOut, "xOut");
    TORCH_CHECK(a.sizes() == b.sizes(), op, ": x1 and x2 must have one shape, got ", a.sizes(), " and ", b.sizes());
    const auto dims = normDims(op, a, g);
    checkStatOutput(op, rstd, rowsOf(a, dims), "rstdOut");
    return Prepared{{a, b, g}, [=]() mutable {
                      const at::Tensor xf = storedAs(wide(a) + wide(b), sum.scalar_type());
                      const at::Tensor r = at::rsqrt((xf * xf).mean(dims, /*keepdim=*/true) + epsilon);
                      const at::Tensor y = xf * r * wide(g);
                      sum.copy_(xf);
                      y1.copy_(y);
                      y2.copy_(y);
                      storeStat(rstd, r);
                    },
                    {y1, y2, rstd, sum}};
  });
}
NPU_ATEN_OP(AddRmsNormCast, "x1, x2, gamma, epsilon, y1Out, y2Out, rstdOut, xOut");

// In place: x2 <- x1 + x2 (the residual stream), x1 <- RMSNorm(x2) * gamma.
extern "C" NOP_API aclnnStatus aclnnInplaceAddRmsNormGetWorkspaceSize(aclTensor* x1, aclTensor* x2,
                                                                      const aclTensor* gamma, double epsilon,
                                                                      aclTensor* rstdOut, uint64_t* workspaceSize,
                                                                      aclOpExecutor** executor) {
  return prepareOp("aclnnInplaceAddRmsNorm", workspaceSize, executor, [&] {
    const char* op = "aclnnInplaceAddRmsNorm";
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2"), g = requiredTensor(gamma, "gamma");
    at::Tensor rstd = requiredTensor(rstdOut, "rstdOut");
    TORCH_CHECK(a.sizes() == b.sizes(), op, ": x1 and x2 must have one shape, got ", a.sizes(), " and ", b.sizes());
    const auto dims = normDims(op, a, g);
    checkStatOutput(op, rstd, rowsOf(a, dims), "rstdOut");
    return Prepared{{a, b, g}, [=]() mutable {
                      // Everything is computed before either input is overwritten.
                      const at::Tensor xf = storedAs(wide(a) + wide(b), b.scalar_type());
                      const at::Tensor r = at::rsqrt((xf * xf).mean(dims, /*keepdim=*/true) + epsilon);
                      const at::Tensor y = xf * r * wide(g);
                      b.copy_(xf);
                      a.copy_(y);
                      storeStat(rstd, r);
                    },
                    {a, b, rstd}};
  });
}
NPU_ATEN_OP(InplaceAddRmsNorm, "x1, x2, gamma, epsilon, rstdOut");

// x = x1 + x2 (+ bias); y = LayerNorm(x) * gamma + beta over gamma's dimensions; mean / rstd one per row.
extern "C" NOP_API aclnnStatus aclnnAddLayerNormGetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma, const aclTensor* beta,
    const aclTensor* biasOptional, double epsilon, bool additionalOutput, aclTensor* yOut, aclTensor* meanOut,
    aclTensor* rstdOut, aclTensor* xOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAddLayerNorm", workspaceSize, executor, [&] {
    const char* op = "aclnnAddLayerNorm";
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2"), g = requiredTensor(gamma, "gamma");
    at::Tensor be = requiredTensor(beta, "beta"), bias = hostTensor(biasOptional);
    at::Tensor y = requiredTensor(yOut, "yOut"), mean = hostTensor(meanOut), rstd = hostTensor(rstdOut);
    at::Tensor sum = hostTensor(xOut);
    TORCH_CHECK(a.sizes() == b.sizes(), op, ": x1 and x2 must have one shape, got ", a.sizes(), " and ", b.sizes());
    TORCH_CHECK(be.sizes() == g.sizes(), op, ": beta must have gamma's shape ", g.sizes(), ", got ", be.sizes());
    TORCH_CHECK(!bias.defined() || bias.sizes() == g.sizes() || bias.sizes() == a.sizes(), op,
                ": bias must have gamma's or x1's shape, got ", bias.sizes());
    const auto dims = normDims(op, a, g);
    checkStatOutput(op, mean, rowsOf(a, dims), "meanOut");
    checkStatOutput(op, rstd, rowsOf(a, dims), "rstdOut");
    return Prepared{{a, b, g, be, bias}, [=]() mutable {
                      at::Tensor total = wide(a) + wide(b);
                      if (bias.defined()) total = total + wide(bias);
                      const at::Tensor xf = storedAs(total, y.scalar_type());
                      const Moments m = moments(xf, dims, epsilon);
                      y.copy_((xf - m.mean) * m.rstd * wide(g) + wide(be));
                      if (sum.defined()) sum.copy_(xf);  // written whether or not additionalOutput asks for it
                      storeStat(mean, m.mean);
                      storeStat(rstd, m.rstd);
                    },
                    {y, mean, rstd, sum}};
  });
}
NPU_ATEN_OP(AddLayerNorm, "x1, x2, gamma, beta, biasOptional, epsilon, additionalOutput, yOut, meanOut, rstdOut, xOut");

// dx (the gradient of x1 and of x2) = LayerNorm's input gradient + dsum; dgamma / dbeta summed over the rows.
extern "C" NOP_API aclnnStatus aclnnAddLayerNormGradGetWorkspaceSize(
    const aclTensor* dy, const aclTensor* x1, const aclTensor* x2, const aclTensor* rstd, const aclTensor* mean,
    const aclTensor* gamma, const aclTensor* dsumOptional, aclTensor* dxOut, aclTensor* dgammaOut,
    aclTensor* dbetaOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAddLayerNormGrad", workspaceSize, executor, [&] {
    const char* op = "aclnnAddLayerNormGrad";
    at::Tensor gy = requiredTensor(dy, "dy"), a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2");
    at::Tensor r = requiredTensor(rstd, "rstd"), m = requiredTensor(mean, "mean"), g = requiredTensor(gamma, "gamma");
    at::Tensor dsum = hostTensor(dsumOptional);
    at::Tensor dx = requiredTensor(dxOut, "dxOut"), dgamma = hostTensor(dgammaOut), dbeta = hostTensor(dbetaOut);
    TORCH_CHECK(a.sizes() == b.sizes() && gy.sizes() == a.sizes(), op, ": dy, x1 and x2 must have one shape, got ",
                gy.sizes(), ", ", a.sizes(), " and ", b.sizes());
    TORCH_CHECK(!dsum.defined() || dsum.sizes() == a.sizes(), op, ": dsum must have x1's shape, got ", dsum.sizes());
    const auto dims = normDims(op, a, g);
    const int64_t rows = rowsOf(a, dims);
    checkStatOutput(op, m, rows, "mean");
    checkStatOutput(op, r, rows, "rstd");
    return Prepared{{gy, a, b, r, m, g, dsum}, [=]() mutable {
                      const auto kept = keptShape(a, dims);
                      const at::ScalarType sum_type = a.scalar_type() == b.scalar_type() ? a.scalar_type() : at::kFloat;
                      const at::Tensor xf = storedAs(wide(a) + wide(b), sum_type);
                      const at::Tensor rf = wide(r).reshape(kept);
                      const at::Tensor xhat = (xf - wide(m).reshape(kept)) * rf;
                      const at::Tensor gf = wide(gy);
                      at::Tensor grad = normalisedGrad(gf * wide(g), xhat, rf, dims);
                      if (dsum.defined()) grad = grad + wide(dsum);
                      dx.copy_(grad);
                      const int64_t lead = a.dim() - static_cast<int64_t>(dims.size());
                      if (dgamma.defined()) dgamma.copy_(sumLeading(gf * xhat, lead));
                      if (dbeta.defined()) dbeta.copy_(sumLeading(gf, lead));
                    },
                    {dx, dgamma, dbeta}};
  });
}
NPU_ATEN_OP(AddLayerNormGrad, "dy, x1, x2, rstd, mean, gamma, dsumOptional, dxOut, dgammaOut, dbetaOut");

// y = LayerNorm(alpha * x + gx) * gamma + beta (DeepNet's residual scaling).
extern "C" NOP_API aclnnStatus aclnnDeepNormGetWorkspaceSize(const aclTensor* x, const aclTensor* gx,
                                                             const aclTensor* beta, const aclTensor* gamma,
                                                             double alpha, double epsilon, aclTensor* meanOut,
                                                             aclTensor* rstdOut, aclTensor* yOut,
                                                             uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnDeepNorm", workspaceSize, executor, [&] {
    const char* op = "aclnnDeepNorm";
    at::Tensor xt = requiredTensor(x, "x"), gxt = requiredTensor(gx, "gx"), be = requiredTensor(beta, "beta");
    at::Tensor g = requiredTensor(gamma, "gamma");
    at::Tensor mean = hostTensor(meanOut), rstd = hostTensor(rstdOut), y = requiredTensor(yOut, "yOut");
    TORCH_CHECK(xt.sizes() == gxt.sizes(), op, ": x and gx must have one shape, got ", xt.sizes(), " and ",
                gxt.sizes());
    TORCH_CHECK(be.sizes() == g.sizes(), op, ": beta must have gamma's shape ", g.sizes(), ", got ", be.sizes());
    const auto dims = normDims(op, xt, g);
    checkStatOutput(op, mean, rowsOf(xt, dims), "meanOut");
    checkStatOutput(op, rstd, rowsOf(xt, dims), "rstdOut");
    return Prepared{{xt, gxt, be, g}, [=]() mutable {
                      const at::Tensor s = wide(xt) * alpha + wide(gxt);
                      const Moments m = moments(s, dims, epsilon);
                      y.copy_((s - m.mean) * m.rstd * wide(g) + wide(be));
                      storeStat(mean, m.mean);
                      storeStat(rstd, m.rstd);
                    },
                    {mean, rstd, y}};
  });
}
NPU_ATEN_OP(DeepNorm, "x, gx, beta, gamma, alpha, epsilon, meanOut, rstdOut, yOut");

// dgx = LayerNorm's input gradient at alpha * x + gx, dx = alpha * dgx; dbeta / dgamma summed over the rows.
extern "C" NOP_API aclnnStatus aclnnDeepNormGradGetWorkspaceSize(
    const aclTensor* dy, const aclTensor* x, const aclTensor* gx, const aclTensor* gamma, const aclTensor* mean,
    const aclTensor* rstd, double alpha, aclTensor* dxOut, aclTensor* dgxOut, aclTensor* dbetaOut,
    aclTensor* dgammaOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnDeepNormGrad", workspaceSize, executor, [&] {
    const char* op = "aclnnDeepNormGrad";
    at::Tensor gy = requiredTensor(dy, "dy"), xt = requiredTensor(x, "x"), gxt = requiredTensor(gx, "gx");
    at::Tensor g = requiredTensor(gamma, "gamma"), m = requiredTensor(mean, "mean"), r = requiredTensor(rstd, "rstd");
    at::Tensor dx = hostTensor(dxOut), dgx = hostTensor(dgxOut), dbeta = hostTensor(dbetaOut);
    at::Tensor dgamma = hostTensor(dgammaOut);
    TORCH_CHECK(xt.sizes() == gxt.sizes() && gy.sizes() == xt.sizes(), op, ": dy, x and gx must have one shape, ",
                "got ", gy.sizes(), ", ", xt.sizes(), " and ", gxt.sizes());
    const auto dims = normDims(op, xt, g);
    checkStatOutput(op, m, rowsOf(xt, dims), "mean");
    checkStatOutput(op, r, rowsOf(xt, dims), "rstd");
    return Prepared{{gy, xt, gxt, g, m, r}, [=]() mutable {
                      const auto kept = keptShape(xt, dims);
                      const at::Tensor rf = wide(r).reshape(kept);
                      const at::Tensor xhat = (wide(xt) * alpha + wide(gxt) - wide(m).reshape(kept)) * rf;
                      const at::Tensor gf = wide(gy);
                      const at::Tensor grad = normalisedGrad(gf * wide(g), xhat, rf, dims);
                      if (dgx.defined()) dgx.copy_(grad);
                      if (dx.defined()) dx.copy_(grad * alpha);
                      const int64_t lead = xt.dim() - static_cast<int64_t>(dims.size());
                      if (dbeta.defined()) dbeta.copy_(sumLeading(gf, lead));
                      if (dgamma.defined()) dgamma.copy_(sumLeading(gf * xhat, lead));
                    },
                    {dx, dgx, dbeta, dgamma}};
  });
}
NPU_ATEN_OP(DeepNormGrad, "dy, x, gx, gamma, mean, rstd, alpha, dxOut, dgxOut, dbetaOut, dgammaOut");

// out = silu(GroupNorm(x) * gamma + beta); mean / rstd [N, group].
extern "C" NOP_API aclnnStatus aclnnGroupNormSiluGetWorkspaceSize(const aclTensor* self, const aclTensor* gamma,
                                                                  const aclTensor* beta, int64_t group, double eps,
                                                                  aclTensor* out, aclTensor* meanOut,
                                                                  aclTensor* rstdOut, uint64_t* workspaceSize,
                                                                  aclOpExecutor** executor) {
  return prepareOp("aclnnGroupNormSilu", workspaceSize, executor, [&] {
    const char* op = "aclnnGroupNormSilu";
    at::Tensor x = requiredTensor(self, "self"), g = hostTensor(gamma), b = hostTensor(beta);
    at::Tensor o = requiredTensor(out, "out"), mean = hostTensor(meanOut), rstd = hostTensor(rstdOut);
    const Groups groups = checkGroups(op, x, group, g, b);
    if (mean.defined()) checkGroupStats(op, mean, groups, "meanOut");
    if (rstd.defined()) checkGroupStats(op, rstd, groups, "rstdOut");
    return Prepared{{x, g, b}, [=]() mutable {
                      const GroupNormed n = groupNormalise(x, groups, eps);
                      const at::Tensor y = affine(n.xhat, g, b, x);
                      o.copy_(y * at::sigmoid(y));
                      storeStat(mean, n.mean);
                      storeStat(rstd, n.rstd);
                    },
                    {o, mean, rstd}};
  });
}
NPU_ATEN_OP(GroupNormSilu, "self, gamma, beta, group, eps, out, meanOut, rstdOut");

// y = GroupNorm(x) * gamma + beta, then (activateSwish) y * sigmoid(swishScale * y).
extern "C" NOP_API aclnnStatus aclnnGroupNormSwishGetWorkspaceSize(
    const aclTensor* x, const aclTensor* gamma, const aclTensor* beta, int64_t numGroups, char* dataFormatOptional,
    double eps, bool activateSwish, double swishScale, aclTensor* yOut, aclTensor* meanOut, aclTensor* rstdOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnGroupNormSwish", workspaceSize, executor, [&] {
    const char* op = "aclnnGroupNormSwish";
    at::Tensor xt = requiredTensor(x, "x"), g = hostTensor(gamma), b = hostTensor(beta);
    at::Tensor y = requiredTensor(yOut, "yOut"), mean = hostTensor(meanOut), rstd = hostTensor(rstdOut);
    checkNchw(op, dataFormatOptional);
    const Groups groups = checkGroups(op, xt, numGroups, g, b);
    if (mean.defined()) checkGroupStats(op, mean, groups, "meanOut");
    if (rstd.defined()) checkGroupStats(op, rstd, groups, "rstdOut");
    return Prepared{{xt, g, b}, [=]() mutable {
                      const GroupNormed n = groupNormalise(xt, groups, eps);
                      const at::Tensor normed = affine(n.xhat, g, b, xt);
                      y.copy_(activateSwish ? normed * at::sigmoid(normed * swishScale) : normed);
                      storeStat(mean, n.mean);
                      storeStat(rstd, n.rstd);
                    },
                    {y, mean, rstd}};
  });
}
NPU_ATEN_OP(GroupNormSwish, "x, gamma, beta, numGroups, dataFormatOptional, eps, activateSwish, swishScale, yOut, meanOut, rstdOut");

// The gradient of GroupNormSwish's output (swish always on) from the forward's mean / rstd.
extern "C" NOP_API aclnnStatus aclnnGroupNormSwishGradGetWorkspaceSize(
    const aclTensor* dy, const aclTensor* mean, const aclTensor* rstd, const aclTensor* x, const aclTensor* gamma,
    const aclTensor* beta, int64_t numGroups, char* dataFormatOptional, double swishScale, bool dgammaIsRequire,
    bool dbetaIsRequire, aclTensor* dxOut, aclTensor* dgammaOut, aclTensor* dbetaOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnGroupNormSwishGrad", workspaceSize, executor, [&] {
    const char* op = "aclnnGroupNormSwishGrad";
    at::Tensor gy = requiredTensor(dy, "dy"), m = requiredTensor(mean, "mean"), r = requiredTensor(rstd, "rstd");
    at::Tensor xt = requiredTensor(x, "x"), g = hostTensor(gamma), b = hostTensor(beta);
    at::Tensor dx = hostTensor(dxOut), dgamma = hostTensor(dgammaOut), dbeta = hostTensor(dbetaOut);
    checkNchw(op, dataFormatOptional);
    const Groups groups = checkGroups(op, xt, numGroups, g, b);
    checkGroupStats(op, m, groups, "mean");
    checkGroupStats(op, r, groups, "rstd");
    TORCH_CHECK(gy.sizes() == xt.sizes(), op, ": dy must have x's shape ", xt.sizes(), ", got ", gy.sizes());
    return Prepared{{gy, m, r, xt, g, b}, [=]() mutable {
                      const at::Tensor grouped = wide(xt).reshape({groups.n, groups.groups, -1});
                      const at::Tensor rg = wide(r).reshape({groups.n, groups.groups, 1});
                      const at::Tensor xhat = ((grouped - wide(m).reshape({groups.n, groups.groups, 1})) * rg)
                                                  .reshape(xt.sizes());
                      const at::Tensor y = affine(xhat, g, b, xt);
                      const at::Tensor s = at::sigmoid(y * swishScale);
                      const at::Tensor dnormed = wide(gy) * (s + y * swishScale * s * (1 - s));
                      const auto dims = allButChannel(xt);
                      if (dgamma.defined()) {
                        if (dgammaIsRequire) dgamma.copy_((dnormed * xhat).sum(dims)); else dgamma.zero_();
                      }
                      if (dbeta.defined()) {
                        if (dbetaIsRequire) dbeta.copy_(dnormed.sum(dims)); else dbeta.zero_();
                      }
                      if (dx.defined()) {
                        const at::Tensor dxhat = g.defined() ? dnormed * perChannel(g, xt) : dnormed;
                        const at::Tensor grad = normalisedGrad(dxhat.reshape({groups.n, groups.groups, -1}),
                                                               xhat.reshape({groups.n, groups.groups, -1}), rg, {2});
                        dx.copy_(grad.reshape(xt.sizes()));
                      }
                    },
                    {dx, dgamma, dbeta}};
  });
}
NPU_ATEN_OP(GroupNormSwishGrad, "dy, mean, rstd, x, gamma, beta, numGroups, dataFormatOptional, swishScale, dgammaIsRequire, dbetaIsRequire, dxOut, dgammaOut, dbetaOut");
