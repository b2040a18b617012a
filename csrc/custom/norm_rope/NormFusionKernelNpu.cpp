// NormFusionKernelNpu.cpp - residual-add norm fusions: npu_add_rms_norm_cast (float32 and input-dtype outputs),
// npu_add_rms_norm_v2 (in place, + functional form), npu_add_layer_norm (+ backward), npu_deep_norm (+ backward)
// and npu_layer_norm_eval, on their aclnn device ops. Statistics (mean / rstd) are float32, as torch_npu returns.
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

// gamma must be x's trailing shape; returns how many leading (not normalised) dimensions x has.
int64_t leadingDims(const char* op, const at::Tensor& x, const at::Tensor& gamma) {
  TORCH_CHECK_VALUE(gamma.dim() >= 1 && gamma.dim() <= x.dim() &&
                        x.sizes().slice(x.dim() - gamma.dim()).equals(gamma.sizes()),
                    op, ": gamma's shape ", gamma.sizes(), " must equal the trailing dimensions of x ", x.sizes());
  return x.dim() - gamma.dim();
}

// x's shape with the normalised dimensions kept as 1 (rms_norm's rstd, deep_norm's mean / rstd).
std::vector<int64_t> keptStatShape(const char* op, const at::Tensor& x, const at::Tensor& gamma) {
  std::vector<int64_t> shape = x.sizes().vec();
  for (int64_t d = leadingDims(op, x, gamma); d < x.dim(); ++d) shape[d] = 1;
  return shape;
}

// The leading dimensions then a single 1 (add_layer_norm's mean / rstd, as its device op writes them).
std::vector<int64_t> flatStatShape(const char* op, const at::Tensor& x, const at::Tensor& gamma) {
  const int64_t lead = leadingDims(op, x, gamma);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().begin() + lead);
  shape.push_back(1);
  return shape;
}

void checkSameShape(const char* op, const at::Tensor& a, const char* a_name, const at::Tensor& b,
                    const char* b_name) {
  TORCH_CHECK_VALUE(a.sizes().equals(b.sizes()), op, ": ", a_name, " and ", b_name, " must have one shape, got ",
                    a.sizes(), " and ", b.sizes());
}

void checkFloating(const char* op, const at::Tensor& t, const char* name) {
  TORCH_CHECK_TYPE(at::isFloatingType(t.scalar_type()), op, ": ", name, " must be a floating-point tensor, got ",
                   t.scalar_type());
}

at::TensorOptions floatOptions(const at::Tensor& like) { return like.options().dtype(at::kFloat); }

// ---- add_rms_norm_cast -----------------------------------------------------------------------------------

using Four = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

Four addRmsNormCastOutputs(const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& gamma) {
  const char* op = "npu_add_rms_norm_cast";
  checkSameShape(op, x1, "x1", x2, "x2");
  checkFloating(op, x1, "x1");
  return {at::empty(x1.sizes(), floatOptions(x1)), at::empty(x1.sizes(), x1.options()),
          at::empty(keptStatShape(op, x1, gamma), floatOptions(x1)), at::empty(x1.sizes(), x1.options())};
}

// ---- add_rms_norm_v2 -------------------------------------------------------------------------------------

at::Tensor addRmsNormV2Rstd(const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& gamma) {
  const char* op = "npu_add_rms_norm_v2";
  checkSameShape(op, x1, "x1", x2, "x2");
  checkFloating(op, x1, "x1");
  TORCH_CHECK_TYPE(x1.scalar_type() == x2.scalar_type(), op, ": x1 and x2 must have one dtype (both are written), ",
                   "got ", x1.scalar_type(), " and ", x2.scalar_type());
  return at::empty(keptStatShape(op, x1, gamma), floatOptions(x1));
}

// ---- add_layer_norm --------------------------------------------------------------------------------------

// y and x are float32 when x1 and x2 differ in dtype (the sum is kept in float32), else x1's dtype.
Four addLayerNormOutputs(const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& gamma,
                         const at::Tensor& beta) {
  const char* op = "npu_add_layer_norm";
  checkSameShape(op, x1, "x1", x2, "x2");
  checkSameShape(op, gamma, "gamma", beta, "beta");
  checkFloating(op, x1, "x1");
  checkFloating(op, x2, "x2");
  const auto out = x1.scalar_type() == x2.scalar_type() ? x1.options() : floatOptions(x1);
  const std::vector<int64_t> stats = flatStatShape(op, x1, gamma);
  return {at::empty(x1.sizes(), out), at::empty(stats, floatOptions(x1)), at::empty(stats, floatOptions(x1)),
          at::empty(x1.sizes(), out)};
}

void checkStats(const char* op, const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& mean,
                const at::Tensor& rstd) {
  const int64_t rows = x.numel() / std::max<int64_t>(gamma.numel(), 1);
  TORCH_CHECK_VALUE(mean.numel() == rows && rstd.numel() == rows, op, ": mean and rstd must hold one value per ",
                    "normalised row (", rows, "), got ", mean.sizes(), " and ", rstd.sizes());
}

// ---- deep_norm -------------------------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor> deepNormOutputs(const at::Tensor& x, const at::Tensor& gx,
                                                               const at::Tensor& beta, const at::Tensor& gamma) {
  const char* op = "npu_deep_norm";
  checkSameShape(op, x, "x", gx, "gx");
  checkSameShape(op, gamma, "gamma", beta, "beta");
  checkFloating(op, x, "x");
  const std::vector<int64_t> stats = keptStatShape(op, x, gamma);
  return {at::empty(stats, floatOptions(x)), at::empty(stats, floatOptions(x)), at::empty(x.sizes(), x.options())};
}

Four deepNormBackwardOutputs(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& gx,
                             const at::Tensor& gamma, const at::Tensor& mean, const at::Tensor& rstd) {
  const char* op = "npu_deep_norm_backward";
  checkSameShape(op, x, "x", gx, "gx");
  checkSameShape(op, dy, "dy", x, "x");
  leadingDims(op, x, gamma);
  checkStats(op, x, gamma, mean, rstd);
  return {at::empty(x.sizes(), x.options()), at::empty(gx.sizes(), gx.options()),
          at::empty(gamma.sizes(), floatOptions(gamma)), at::empty(gamma.sizes(), floatOptions(gamma))};
}

// ---- layer_norm_eval -------------------------------------------------------------------------------------

void checkLayerNormEval(const at::Tensor& input, at::IntArrayRef normalized_shape,
                        const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias) {
  const char* op = "npu_layer_norm_eval";
  checkFloating(op, input, "input");
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK_VALUE(!normalized_shape.empty() && axis >= 0 &&
                        input.sizes().slice(static_cast<size_t>(axis)).equals(normalized_shape),
                    op, ": normalized_shape ", normalized_shape, " must be the trailing shape of input ",
                    input.sizes());
  for (const auto* param : {&weight, &bias}) {
    if (!param->has_value() || !(*param)->defined()) continue;
    TORCH_CHECK_VALUE((*param)->sizes().equals(normalized_shape), op, ": weight and bias must have shape ",
                      normalized_shape, ", got ", (*param)->sizes());
    checkFloating(op, **param, "weight / bias");
  }
}

// The device op takes contiguous parameters of input's dtype or float32, both of one dtype.
std::pair<at::Tensor, at::Tensor> layerNormParams(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                                  const std::optional<at::Tensor>& bias) {
  at::Tensor w = weight.has_value() ? *weight : at::Tensor(), b = bias.has_value() ? *bias : at::Tensor();
  const bool mixed = (w.defined() && w.scalar_type() != input.scalar_type()) ||
                     (b.defined() && b.scalar_type() != input.scalar_type());
  const at::ScalarType type = mixed ? at::kFloat : input.scalar_type();
  if (w.defined()) w = w.to(type).contiguous();
  if (b.defined()) b = b.to(type).contiguous();
  return {w, b};
}

}  // namespace

// ---- npu_add_rms_norm_cast: y1 (float32) and y2 (x1's dtype) of one RMSNorm of x1 + x2 --------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_add_rms_norm_cast(const at::Tensor& x1,
                                                                                const at::Tensor& x2,
                                                                                const at::Tensor& gamma,
                                                                                double epsilon) {
  auto [y1, y2, rstd, x] = addRmsNormCastOutputs(x1, x2, gamma);
  EXEC_NPU_CMD(aclnnAddRmsNormCast, x1, x2, gamma, epsilon, y1, y2, rstd, x);
  return {y1, y2, rstd, x};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_add_rms_norm_cast_meta(const at::Tensor& x1,
                                                                                     const at::Tensor& x2,
                                                                                     const at::Tensor& gamma,
                                                                                     double epsilon) {
  return addRmsNormCastOutputs(x1, x2, gamma);
}

// ---- npu_add_rms_norm_v2: x2 <- x1 + x2, x1 <- RMSNorm(x2) * gamma; returns rstd ---------------------------

at::Tensor npu_add_rms_norm_v2(at::Tensor& x1, at::Tensor& x2, const at::Tensor& gamma, double epsilon) {
  at::Tensor rstd = addRmsNormV2Rstd(x1, x2, gamma);
  EXEC_NPU_CMD(aclnnInplaceAddRmsNorm, x1, x2, gamma, epsilon, rstd);
  return rstd;
}

at::Tensor npu_add_rms_norm_v2_meta(at::Tensor& x1, at::Tensor& x2, const at::Tensor& gamma, double epsilon) {
  return addRmsNormV2Rstd(x1, x2, gamma);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_add_rms_norm_v2_functional(const at::Tensor& x1,
                                                                              const at::Tensor& x2,
                                                                              const at::Tensor& gamma,
                                                                              double epsilon) {
  at::Tensor rstd = addRmsNormV2Rstd(x1, x2, gamma);
  at::Tensor y = x1.clone(at::MemoryFormat::Contiguous), x = x2.clone(at::MemoryFormat::Contiguous);
  EXEC_NPU_CMD(aclnnInplaceAddRmsNorm, y, x, gamma, epsilon, rstd);
  return {rstd, y, x};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_add_rms_norm_v2_functional_meta(const at::Tensor& x1,
                                                                                   const at::Tensor& x2,
                                                                                   const at::Tensor& gamma,
                                                                                   double epsilon) {
  return {addRmsNormV2Rstd(x1, x2, gamma), at::empty(x1.sizes(), x1.options()), at::empty(x2.sizes(), x2.options())};
}

// ---- npu_add_layer_norm: LayerNorm of x = x1 + x2, returning (y, mean, rstd, x) --------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_add_layer_norm(const at::Tensor& x1,
                                                                             const at::Tensor& x2,
                                                                             const at::Tensor& gamma,
                                                                             const at::Tensor& beta, double epsilon,
                                                                             bool additional_output) {
  auto [y, mean, rstd, x] = addLayerNormOutputs(x1, x2, gamma, beta);
  const at::Tensor no_bias;  // the device op's optional bias: torch_npu never passes one
  EXEC_NPU_CMD(aclnnAddLayerNorm, x1, x2, gamma, beta, no_bias, epsilon, additional_output, y, mean, rstd, x);
  return {y, mean, rstd, x};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_add_layer_norm_meta(const at::Tensor& x1,
                                                                                  const at::Tensor& x2,
                                                                                  const at::Tensor& gamma,
                                                                                  const at::Tensor& beta,
                                                                                  double epsilon,
                                                                                  bool additional_output) {
  return addLayerNormOutputs(x1, x2, gamma, beta);
}

// Returns (dx1, dx2, dgamma, dbeta): x1 and x2 share one gradient (dx2 is a copy in x2's dtype); an absent dy
// counts as zeros, an absent dsum (the gradient of the returned sum x) as none.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_add_layer_norm_backward(
    const std::optional<at::Tensor>& dy_opt, const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& rstd,
    const at::Tensor& mean, const at::Tensor& gamma, const std::optional<at::Tensor>& dsum_opt) {
  const char* op = "npu_add_layer_norm_backward";
  checkSameShape(op, x1, "x1", x2, "x2");
  leadingDims(op, x1, gamma);
  checkStats(op, x1, gamma, mean, rstd);
  const bool has_dy = dy_opt.has_value() && dy_opt->defined();
  const at::Tensor dy = has_dy ? *dy_opt : at::zeros(x1.sizes(), x1.options());
  checkSameShape(op, dy, "dy", x1, "x1");
  at::Tensor dx = at::empty(x1.sizes(), x1.options());
  at::Tensor dgamma = at::empty(gamma.sizes(), floatOptions(gamma));
  at::Tensor dbeta = at::empty(gamma.sizes(), floatOptions(gamma));
  EXEC_NPU_CMD(aclnnAddLayerNormGrad, dy, x1, x2, rstd, mean, gamma, dsum_opt, dx, dgamma, dbeta);
  at::Tensor dx2 = x2.scalar_type() == dx.scalar_type() ? dx.clone() : dx.to(x2.scalar_type());
  return {dx, dx2, dgamma, dbeta};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_add_layer_norm_backward_meta(
    const std::optional<at::Tensor>& dy_opt, const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& rstd,
    const at::Tensor& mean, const at::Tensor& gamma, const std::optional<at::Tensor>& dsum_opt) {
  const char* op = "npu_add_layer_norm_backward";
  checkSameShape(op, x1, "x1", x2, "x2");
  leadingDims(op, x1, gamma);
  checkStats(op, x1, gamma, mean, rstd);
  return {at::empty(x1.sizes(), x1.options()), at::empty(x2.sizes(), x2.options()),
          at::empty(gamma.sizes(), floatOptions(gamma)), at::empty(gamma.sizes(), floatOptions(gamma))};
}

// ---- npu_deep_norm: LayerNorm of alpha * x + gx, returning (mean, rstd, y) --------------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_deep_norm(const at::Tensor& x, const at::Tensor& gx,
                                                             const at::Tensor& beta, const at::Tensor& gamma,
                                                             double alpha, double epsilon) {
  auto [mean, rstd, y] = deepNormOutputs(x, gx, beta, gamma);
  EXEC_NPU_CMD(aclnnDeepNorm, x, gx, beta, gamma, alpha, epsilon, mean, rstd, y);
  return {mean, rstd, y};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_deep_norm_meta(const at::Tensor& x, const at::Tensor& gx,
                                                                  const at::Tensor& beta, const at::Tensor& gamma,
                                                                  double alpha, double epsilon) {
  return deepNormOutputs(x, gx, beta, gamma);
}

// Returns (dx, dgx, dbeta, dgamma); dbeta / dgamma are float32.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_deep_norm_backward(
    const at::Tensor& dy, const at::Tensor& x, const at::Tensor& gx, const at::Tensor& gamma, const at::Tensor& mean,
    const at::Tensor& rstd, double alpha) {
  auto [dx, dgx, dbeta, dgamma] = deepNormBackwardOutputs(dy, x, gx, gamma, mean, rstd);
  EXEC_NPU_CMD(aclnnDeepNormGrad, dy, x, gx, gamma, mean, rstd, alpha, dx, dgx, dbeta, dgamma);
  return {dx, dgx, dbeta, dgamma};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_deep_norm_backward_meta(
    const at::Tensor& dy, const at::Tensor& x, const at::Tensor& gx, const at::Tensor& gamma, const at::Tensor& mean,
    const at::Tensor& rstd, double alpha) {
  return deepNormBackwardOutputs(dy, x, gx, gamma, mean, rstd);
}

// ---- npu_layer_norm_eval: LayerNorm's output only, on aclnnLayerNorm without statistics -------------------

at::Tensor npu_layer_norm_eval(const at::Tensor& input, at::IntArrayRef normalized_shape,
                               const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                               double eps) {
  checkLayerNormEval(input, normalized_shape, weight, bias);
  const at::Tensor x = input.contiguous();
  auto [w, b] = layerNormParams(input, weight, bias);
  at::Tensor out = at::empty(input.sizes(), input.options());
  const at::Tensor no_mean, no_rstd;  // not wanted: the device op skips them
  EXEC_NPU_CMD(aclnnLayerNorm, x, normalized_shape, w, b, eps, out, no_mean, no_rstd);
  return out;
}

at::Tensor npu_layer_norm_eval_meta(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                    double eps) {
  checkLayerNormEval(input, normalized_shape, weight, bias);
  return at::empty(input.sizes(), input.options());
}

}  // namespace at_npu::native
