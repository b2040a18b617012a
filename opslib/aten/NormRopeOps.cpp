// NormRopeOps.cpp - the LLM layers' fused device ops: RMSNorm (plain, Gemma's 1 + gamma, with a
// residual add) and its gradient, rotary position embedding and its gradient, SwiGLU, GeGLU, FastGelu
// the scaled masked softmax and the add + softmax + dropout fusion with their gradients. Float16 / bfloat16 compute in float32 and round
// once, as NPUs do.
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gelu_backward.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sum.h>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

at::Tensor wide(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }

// The trailing dimensions gamma normalises over.
std::vector<int64_t> normDims(const char* op, const at::Tensor& x, const at::Tensor& gamma) {
  TORCH_CHECK(gamma.dim() >= 1 && gamma.dim() <= x.dim() && x.sizes().slice(x.dim() - gamma.dim()).equals(gamma.sizes()),
              op, ": gamma's shape ", gamma.sizes(), " must equal the trailing dimensions of x ", x.sizes());
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - gamma.dim(); d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// y = x * rstd * (gamma + offset), rstd = 1 / sqrt(mean(x^2) + eps) over gamma's dimensions.
void rmsNorm(const char* op, const at::Tensor& x, const at::Tensor& gamma, double eps, double offset, at::Tensor y,
             at::Tensor rstd) {
  const auto dims = normDims(op, x, gamma);
  const at::Tensor xf = wide(x);
  const at::Tensor r = at::rsqrt(at::mean(xf * xf, dims, /*keepdim=*/true) + eps);
  TORCH_CHECK(rstd.sizes() == r.sizes(), op, ": rstd must be ", r.sizes(), ", got ", rstd.sizes());
  y.copy_(xf * r * (wide(gamma) + offset));
  rstd.copy_(r);
}

// rotate(x): mode 0 ("half") cat(-x2, x1) of the last dimension's halves; 1 ("interleave") the pairs
// (-x_odd, x_even). `transposed`: the adjoint map (for gradients).
at::Tensor rotate(const at::Tensor& x, int64_t mode, bool transposed) {
  const int64_t d = x.size(-1);
  TORCH_CHECK(d % 2 == 0, "aclnnRotaryPositionEmbedding: the last dimension must be even, got ", d);
  if (mode == 0) {
    at::Tensor a = x.narrow(-1, 0, d / 2), b = x.narrow(-1, d / 2, d / 2);
    return transposed ? at::cat({b, -a}, -1) : at::cat({-b, a}, -1);
  }
  TORCH_CHECK(mode == 1, "aclnnRotaryPositionEmbedding: mode must be 0 (half) or 1 (interleave), got ", mode);
  auto pairs = x.unflatten(-1, {d / 2, 2});
  at::Tensor even = pairs.select(-1, 0), odd = pairs.select(-1, 1);
  return (transposed ? at::stack({odd, -even}, -1) : at::stack({-odd, even}, -1)).flatten(-2);
}

void checkRope(const char* op, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  TORCH_CHECK(cos.sizes() == sin.sizes(), op, ": cos and sin must have one shape, got ", cos.sizes(), " and ",
              sin.sizes());
  TORCH_CHECK(cos.dim() >= 1 && cos.dim() <= x.dim() && cos.size(-1) == x.size(-1), op, ": cos / sin ",
              cos.sizes(), " must end in x's last dimension (x is ", x.sizes(), ")");
  for (int64_t d = 1; d <= cos.dim(); ++d) {
    TORCH_CHECK(cos.size(-d) == 1 || cos.size(-d) == x.size(-d), op, ": cos / sin ", cos.sizes(),
                " do not broadcast to x ", x.sizes());
  }
}

int64_t checkHalves(const char* op, const at::Tensor& x, int64_t dim) {
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  TORCH_CHECK(d >= 0 && d < x.dim(), op, ": dim ", dim, " is out of range for ", x.dim(), "-D input");
  TORCH_CHECK(x.size(d) % 2 == 0, op, ": dimension ", dim, " (size ", x.size(d), ") must split into two halves");
  return d;
}

std::vector<at::Tensor> halves(const char* op, const at::Tensor& x, int64_t dim) {
  return wide(x).chunk(2, checkHalves(op, x, dim));
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnRmsNormGetWorkspaceSize(const aclTensor* x, const aclTensor* gamma, double epsilon,
                                                            aclTensor* yOut, aclTensor* rstdOut,
                                                            uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnRmsNorm", workspaceSize, executor, [&] {
    at::Tensor xt = requiredTensor(x, "x"), g = requiredTensor(gamma, "gamma");
    at::Tensor y = requiredTensor(yOut, "yOut"), rstd = requiredTensor(rstdOut, "rstdOut");
    normDims("aclnnRmsNorm", xt, g);
    return Prepared{{xt, g}, [=] { rmsNorm("aclnnRmsNorm", xt, g, epsilon, 0.0, y, rstd); }, {y, rstd}};
  });
}
NPU_ATEN_OP(RmsNorm, "x, gamma, epsilon, yOut, rstdOut");

// Gemma's RMSNorm scales by (1 + gamma).
extern "C" NOP_API aclnnStatus aclnnGemmaRmsNormGetWorkspaceSize(const aclTensor* x, const aclTensor* gamma,
                                                                 double epsilon, aclTensor* yOut, aclTensor* rstdOut,
                                                                 uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnGemmaRmsNorm", workspaceSize, executor, [&] {
    at::Tensor xt = requiredTensor(x, "x"), g = requiredTensor(gamma, "gamma");
    at::Tensor y = requiredTensor(yOut, "yOut"), rstd = requiredTensor(rstdOut, "rstdOut");
    normDims("aclnnGemmaRmsNorm", xt, g);
    return Prepared{{xt, g}, [=] { rmsNorm("aclnnGemmaRmsNorm", xt, g, epsilon, 1.0, y, rstd); }, {y, rstd}};
  });
}
NPU_ATEN_OP(GemmaRmsNorm, "x, gamma, epsilon, yOut, rstdOut");

// x = x1 + x2 (the residual stream, returned), then RMSNorm of it.
extern "C" NOP_API aclnnStatus aclnnAddRmsNormGetWorkspaceSize(const aclTensor* x1, const aclTensor* x2,
                                                               const aclTensor* gamma, double epsilon,
                                                               aclTensor* yOut, aclTensor* rstdOut, aclTensor* xOut,
                                                               uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAddRmsNorm", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2"), g = requiredTensor(gamma, "gamma");
    at::Tensor y = requiredTensor(yOut, "yOut"), rstd = requiredTensor(rstdOut, "rstdOut");
    at::Tensor sum = requiredTensor(xOut, "xOut");
    TORCH_CHECK(a.sizes() == b.sizes(), "aclnnAddRmsNorm: x1 and x2 must have one shape, got ", a.sizes(), " and ",
                b.sizes());
    normDims("aclnnAddRmsNorm", a, g);
    return Prepared{{a, b, g}, [=]() mutable {
                      sum.copy_(wide(a) + wide(b));
                      // Normalised as the residual stream is kept (rounded to its dtype), as on NPUs.
                      rmsNorm("aclnnAddRmsNorm", sum, g, epsilon, 0.0, y, rstd);
                    },
                    {y, rstd, sum}};
  });
}
NPU_ATEN_OP(AddRmsNorm, "x1, x2, gamma, epsilon, yOut, rstdOut, xOut");

extern "C" NOP_API aclnnStatus aclnnRmsNormGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* x,
                                                                const aclTensor* rstd, const aclTensor* gamma,
                                                                aclTensor* dxOut, aclTensor* dgammaOut,
                                                                uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnRmsNormGrad", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(dy, "dy"), xt = requiredTensor(x, "x"), r = requiredTensor(rstd, "rstd");
    at::Tensor w = requiredTensor(gamma, "gamma");
    at::Tensor dx = requiredTensor(dxOut, "dxOut"), dgamma = requiredTensor(dgammaOut, "dgammaOut");
    const auto dims = normDims("aclnnRmsNormGrad", xt, w);
    TORCH_CHECK(g.sizes() == xt.sizes(), "aclnnRmsNormGrad: dy must have x's shape ", xt.sizes(), ", got ",
                g.sizes());
    return Prepared{{g, xt, r, w}, [=]() mutable {
                      const at::Tensor xf = wide(xt), gf = wide(g), rf = wide(r);
                      const at::Tensor xhat = xf * rf;
                      std::vector<int64_t> lead;
                      for (int64_t d = 0; d < xt.dim() - w.dim(); ++d) lead.push_back(d);
                      dgamma.copy_(lead.empty() ? gf * xhat : at::sum(gf * xhat, lead));
                      const at::Tensor dxhat = gf * wide(w);
                      dx.copy_(rf * (dxhat - xhat * at::mean(dxhat * xhat, dims, /*keepdim=*/true)));
                    },
                    {dx, dgamma}};
  });
}
NPU_ATEN_OP(RmsNormGrad, "dy, x, rstd, gamma, dxOut, dgammaOut");

// out = x * cos + rotate(x) * sin; with `rotate` (V2), rotate(x) = x @ rotate.
static aclnnStatus rope(const char* op, const aclTensor* x, const aclTensor* cos, const aclTensor* sin, int64_t mode,
                 const aclTensor* rotateMatrix, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp(op, workspaceSize, executor, [&] {
    at::Tensor xt = requiredTensor(x, "x"), c = requiredTensor(cos, "cos"), s = requiredTensor(sin, "sin");
    at::Tensor r = hostTensor(rotateMatrix), o = requiredTensor(out, "out");
    checkRope(op, xt, c, s);
    if (r.defined()) {
      TORCH_CHECK(r.dim() == 2 && r.size(0) == xt.size(-1) && r.size(1) == xt.size(-1), op,
                  ": rotate must be a [D, D] matrix for D = ", xt.size(-1), ", got ", r.sizes());
    } else {
      TORCH_CHECK(mode == 0 || mode == 1, op, ": mode must be 0 (half) or 1 (interleave), got ", mode);
    }
    return Prepared{{xt, c, s, r}, [=]() mutable {
                      const at::Tensor xf = wide(xt);
                      const at::Tensor turned = r.defined() ? at::matmul(xf, wide(r)) : rotate(xf, mode, false);
                      o.copy_(xf * wide(c) + turned * wide(s));
                    },
                    {o}};
  });
}

extern "C" NOP_API aclnnStatus aclnnRotaryPositionEmbeddingGetWorkspaceSize(
    const aclTensor* x, const aclTensor* cos, const aclTensor* sin, int64_t mode, aclTensor* out,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return rope("aclnnRotaryPositionEmbedding", x, cos, sin, mode, nullptr, out, workspaceSize, executor);
}
NPU_ATEN_OP(RotaryPositionEmbedding, "x, cos, sin, mode, out");

extern "C" NOP_API aclnnStatus aclnnRotaryPositionEmbeddingV2GetWorkspaceSize(
    const aclTensor* x, const aclTensor* cos, const aclTensor* sin, int64_t mode, const aclTensor* rotateOptional,
    aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return rope("aclnnRotaryPositionEmbeddingV2", x, cos, sin, mode, rotateOptional, out, workspaceSize, executor);
}
NPU_ATEN_OP(RotaryPositionEmbeddingV2, "x, cos, sin, mode, rotateOptional, out");

// dx = grad * cos + rotate^T(grad * sin); dcos / dsin summed to their (broadcast) shapes.
extern "C" NOP_API aclnnStatus aclnnRotaryPositionEmbeddingGradGetWorkspaceSize(
    const aclTensor* grad, const aclTensor* cos, const aclTensor* sin, const aclTensor* x, int64_t mode,
    aclTensor* dxOut, aclTensor* dcosOut, aclTensor* dsinOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnRotaryPositionEmbeddingGrad", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(grad, "grad"), c = requiredTensor(cos, "cos"), s = requiredTensor(sin, "sin");
    at::Tensor xt = requiredTensor(x, "x"), dx = requiredTensor(dxOut, "dxOut");
    at::Tensor dc = hostTensor(dcosOut), ds = hostTensor(dsinOut);
    checkRope("aclnnRotaryPositionEmbeddingGrad", xt, c, s);
    TORCH_CHECK(mode == 0 || mode == 1, "aclnnRotaryPositionEmbeddingGrad: mode must be 0 (half) or 1 (interleave), got ",
                mode);
    return Prepared{{g, c, s, xt}, [=]() mutable {
                      const at::Tensor gf = wide(g), xf = wide(xt);
                      dx.copy_(gf * wide(c) + rotate(gf * wide(s), mode, true));
                      if (dc.defined()) dc.copy_((gf * xf).sum_to_size(c.sizes()));
                      if (ds.defined()) ds.copy_((gf * rotate(xf, mode, false)).sum_to_size(s.sizes()));
                    },
                    {dx, dc, ds}};
  });
}
NPU_ATEN_OP(RotaryPositionEmbeddingGrad, "grad, cos, sin, x, mode, dxOut, dcosOut, dsinOut");

// SwiGLU: silu(a) * b for the halves a, b of x along dim.
extern "C" NOP_API aclnnStatus aclnnSwiGluGetWorkspaceSize(const aclTensor* x, int64_t dim, aclTensor* out,
                                                           uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnSwiGlu", workspaceSize, executor, [&] {
    at::Tensor xt = requiredTensor(x, "x"), o = requiredTensor(out, "out");
    checkHalves("aclnnSwiGlu", xt, dim);
    return Prepared{{xt}, [=]() mutable {
                      auto h = halves("aclnnSwiGlu", xt, dim);
                      o.copy_(at::silu(h[0]) * h[1]);
                    },
                    {o}};
  });
}
NPU_ATEN_OP(SwiGlu, "x, dim, out");

extern "C" NOP_API aclnnStatus aclnnSwiGluGradGetWorkspaceSize(const aclTensor* yGrad, const aclTensor* x, int64_t dim,
                                                               aclTensor* out, uint64_t* workspaceSize,
                                                               aclOpExecutor** executor) {
  return prepareOp("aclnnSwiGluGrad", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(yGrad, "yGrad"), xt = requiredTensor(x, "x"), o = requiredTensor(out, "out");
    checkHalves("aclnnSwiGluGrad", xt, dim);
    return Prepared{{g, xt}, [=]() mutable {
                      auto h = halves("aclnnSwiGluGrad", xt, dim);
                      const at::Tensor &a = h[0], &b = h[1];
                      const at::Tensor gf = wide(g), s = at::sigmoid(a);
                      o.copy_(at::cat({gf * b * s * (1 + a * (1 - s)), gf * a * s}, dim));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(SwiGluGrad, "yGrad, x, dim, out");

// FastGelu: x * sigmoid(1.702 x) (= x / (1 + exp(-1.702 |x|)) * exp(0.851 x (x - |x|))).
extern "C" NOP_API aclnnStatus aclnnFastGeluGetWorkspaceSize(const aclTensor* self, aclTensor* out,
                                                             uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnFastGelu", workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(self, "self"), o = requiredTensor(out, "out");
    return Prepared{{x}, [=]() mutable {
                      const at::Tensor xf = wide(x);
                      o.copy_(xf * at::sigmoid(xf * 1.702));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(FastGelu, "self, out");

extern "C" NOP_API aclnnStatus aclnnFastGeluBackwardGetWorkspaceSize(const aclTensor* gradOutput,
                                                                     const aclTensor* self, aclTensor* gradInput,
                                                                     uint64_t* workspaceSize,
                                                                     aclOpExecutor** executor) {
  return prepareOp("aclnnFastGeluBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), x = requiredTensor(self, "self");
    at::Tensor o = requiredTensor(gradInput, "gradInput");
    return Prepared{{g, x}, [=]() mutable {
                      const at::Tensor xf = wide(x), s = at::sigmoid(xf * 1.702);
                      o.copy_(wide(g) * (s + xf * 1.702 * s * (1 - s)));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(FastGeluBackward, "gradOutput, self, gradInput");

// GeGLU: gelu(one half of x along dim) * the other half (activateLeft: the first half is activated);
// the activated half's gelu is returned too, for the backward.
extern "C" NOP_API aclnnStatus aclnnGeGluV3GetWorkspaceSize(const aclTensor* self, int64_t dim, int64_t approximate,
                                                            bool activateLeft, aclTensor* out, aclTensor* outGelu,
                                                            uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnGeGluV3", workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(self, "self"), o = requiredTensor(out, "out"), og = requiredTensor(outGelu, "outGelu");
    checkHalves("aclnnGeGluV3", x, dim);
    TORCH_CHECK(approximate == 0 || approximate == 1, "aclnnGeGluV3: approximate must be 0 (none) or 1 (tanh), got ",
                approximate);
    return Prepared{{x}, [=]() mutable {
                      auto h = halves("aclnnGeGluV3", x, dim);
                      const at::Tensor& act = activateLeft ? h[0] : h[1];
                      const at::Tensor& other = activateLeft ? h[1] : h[0];
                      const at::Tensor gelu = at::gelu(act, approximate == 1 ? "tanh" : "none");
                      og.copy_(gelu);
                      o.copy_(gelu * other);
                    },
                    {o, og}};
  });
}
NPU_ATEN_OP(GeGluV3, "self, dim, approximate, activateLeft, out, outGelu");

extern "C" NOP_API aclnnStatus aclnnGeGluV3BackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                                    const aclTensor* gelu, int64_t dim,
                                                                    int64_t approximate, bool activateLeft,
                                                                    aclTensor* gradInput, uint64_t* workspaceSize,
                                                                    aclOpExecutor** executor) {
  return prepareOp("aclnnGeGluV3Backward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), x = requiredTensor(self, "self");
    at::Tensor ge = requiredTensor(gelu, "gelu"), gi = requiredTensor(gradInput, "gradInput");
    const int64_t d = checkHalves("aclnnGeGluV3Backward", x, dim);
    return Prepared{{g, x, ge}, [=]() mutable {
                      auto h = halves("aclnnGeGluV3Backward", x, dim);
                      const at::Tensor& act = activateLeft ? h[0] : h[1];
                      const at::Tensor& other = activateLeft ? h[1] : h[0];
                      const at::Tensor gf = wide(g);
                      const at::Tensor d_act =
                          at::gelu_backward(gf * other, act, approximate == 1 ? "tanh" : "none");
                      const at::Tensor d_other = gf * wide(ge);
                      gi.copy_(activateLeft ? at::cat({d_act, d_other}, d) : at::cat({d_other, d_act}, d));
                    },
                    {gi}};
  });
}
NPU_ATEN_OP(GeGluV3Backward, "gradOutput, self, gelu, dim, approximate, activateLeft, gradInput");

// softmax(x * scale, masked positions filled with -10000) over the last dimension; fixedTriuMask: the
// strict upper triangle is the mask (mask is not read).
static at::Tensor softmaxMask(const at::Tensor& x, const at::Tensor& mask, bool fixed_triu_mask) {
  if (fixed_triu_mask) {
    return at::ones({x.size(-2), x.size(-1)}, at::TensorOptions().dtype(at::kBool)).triu(1);
  }
  return mask.to(at::kBool);
}

extern "C" NOP_API aclnnStatus aclnnScaledMaskedSoftmaxGetWorkspaceSize(const aclTensor* x, const aclTensor* mask,
                                                                        double scale, bool fixedTriuMask,
                                                                        aclTensor* out, uint64_t* workspaceSize,
                                                                        aclOpExecutor** executor) {
  return prepareOp("aclnnScaledMaskedSoftmax", workspaceSize, executor, [&] {
    at::Tensor xt = requiredTensor(x, "x"), m = hostTensor(mask), o = requiredTensor(out, "out");
    TORCH_CHECK(xt.dim() >= 2, "aclnnScaledMaskedSoftmax: x must be at least 2-D, got ", xt.sizes());
    TORCH_CHECK(fixedTriuMask || (m.defined() && (m.scalar_type() == at::kBool || m.scalar_type() == at::kByte)),
                "aclnnScaledMaskedSoftmax: mask must be bool (True = masked out) unless fixed_triu_mask is set");
    return Prepared{{xt, m}, [=]() mutable {
                      // A large finite fill keeps fully masked rows finite (uniform), as NPUs do.
                      const at::Tensor scores = (wide(xt) * scale).masked_fill(softmaxMask(xt, m, fixedTriuMask), -10000.0);
                      o.copy_(at::softmax(scores, -1));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(ScaledMaskedSoftmax, "x, mask, scale, fixedTriuMask, out");

extern "C" NOP_API aclnnStatus aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* y, const aclTensor* mask, double scale, bool fixedTriuMask,
    aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnScaledMaskedSoftmaxBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), yt = requiredTensor(y, "y"), m = hostTensor(mask);
    at::Tensor o = requiredTensor(out, "out");
    TORCH_CHECK(fixedTriuMask || m.defined(), "aclnnScaledMaskedSoftmaxBackward: mask is required unless ",
                "fixed_triu_mask is set");
    return Prepared{{g, yt, m}, [=]() mutable {
                      const at::Tensor gf = wide(g), p = wide(yt);
                      const at::Tensor dx = (gf - at::sum(gf * p, {-1}, /*keepdim=*/true)) * p * scale;
                      o.copy_(dx.masked_fill(softmaxMask(yt, m, fixedTriuMask), 0.0));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(ScaledMaskedSoftmaxBackward, "gradOutput, y, mask, scale, fixedTriuMask, out");

// softmax(x1 + alpha * x2) along the axis, then dropout by a byte mask (1 = keep) scaled by 1 / keepProb:
// the fusion torch_npu's npu_dropout_with_add_softmax launches (AxpyWithSoftmaxAndDropOutDoMask on NPUs).
extern "C" NOP_API aclnnStatus aclnnAxpyWithSoftmaxAndDropOutDoMaskGetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* mask, const aclScalar* alpha, double keepProb,
    int64_t axis, aclTensor* softmaxOut, aclTensor* dropoutOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAxpyWithSoftmaxAndDropOutDoMask", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2"), m = requiredTensor(mask, "mask");
    at::Tensor so = requiredTensor(softmaxOut, "softmaxOut"), dout = requiredTensor(dropoutOut, "dropoutOut");
    const at::Scalar al = hostScalar(alpha);
    TORCH_CHECK(a.sizes() == b.sizes(), "aclnnAxpyWithSoftmaxAndDropOutDoMask: x1 ", a.sizes(), " and x2 ", b.sizes(),
                " must have the same shape");
    TORCH_CHECK(m.scalar_type() == at::kByte && m.numel() >= a.numel(),
                "aclnnAxpyWithSoftmaxAndDropOutDoMask: mask must be uint8 with one byte per element (", a.numel(),
                "), got ", m.scalar_type(), " with ", m.numel());
    TORCH_CHECK(keepProb > 0.0 && keepProb <= 1.0,
                "aclnnAxpyWithSoftmaxAndDropOutDoMask: keepProb must be in (0, 1], got ", keepProb);
    return Prepared{{a, b, m}, [=]() mutable {
                      const at::Tensor p = at::softmax(wide(a) + wide(b) * al.toDouble(), axis);
                      so.copy_(p);
                      const at::Tensor keep = m.narrow(0, 0, a.numel()).view(a.sizes()).to(at::kFloat);
                      dout.copy_(p * keep * (1.0 / keepProb));
                    },
                    {so, dout}};
  });
}
NPU_ATEN_OP(AxpyWithSoftmaxAndDropOutDoMask, "x1, x2, mask, alpha, keepProb, axis, softmaxOut, dropoutOut");

// The gradient of that fusion: gradX1 = softmax'(dropout'(gradOutput)), gradX2 = alpha * gradX1
// (DropoutWithMulsAndSoftmaxGrad on NPUs computes the second).
extern "C" NOP_API aclnnStatus aclnnDropoutWithMulsAndSoftmaxGradGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* mask, const aclTensor* softmax, const aclScalar* alpha,
    double keepProb, int64_t axis, aclTensor* gradX1, aclTensor* gradX2, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnDropoutWithMulsAndSoftmaxGrad", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), m = requiredTensor(mask, "mask");
    at::Tensor p = requiredTensor(softmax, "softmax");
    at::Tensor g1 = requiredTensor(gradX1, "gradX1"), g2 = requiredTensor(gradX2, "gradX2");
    const at::Scalar al = hostScalar(alpha);
    TORCH_CHECK(g.sizes() == p.sizes(), "aclnnDropoutWithMulsAndSoftmaxGrad: gradOutput ", g.sizes(),
                " must have the softmax's shape ", p.sizes());
    TORCH_CHECK(m.scalar_type() == at::kByte && m.numel() >= p.numel(),
                "aclnnDropoutWithMulsAndSoftmaxGrad: mask must be uint8 with one byte per element");
    TORCH_CHECK(keepProb > 0.0 && keepProb <= 1.0,
                "aclnnDropoutWithMulsAndSoftmaxGrad: keepProb must be in (0, 1], got ", keepProb);
    return Prepared{{g, m, p}, [=]() mutable {
                      const at::Tensor keep = m.narrow(0, 0, p.numel()).view(p.sizes()).to(at::kFloat);
                      const at::Tensor gp = wide(g) * keep * (1.0 / keepProb), pf = wide(p);
                      const at::Tensor dx = (gp - at::sum(gp * pf, {axis}, /*keepdim=*/true)) * pf;
                      g1.copy_(dx);
                      g2.copy_(dx * al.toDouble());
                    },
                    {g1, g2}};
  });
}
NPU_ATEN_OP(DropoutWithMulsAndSoftmaxGrad, "gradOutput, mask, softmax, alpha, keepProb, axis, gradX1, gradX2");
