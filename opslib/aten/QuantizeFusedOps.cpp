// QuantizeFusedOps.cpp - quantization fused into other work: aclnnSwiGluQuantV2 and aclnnDequantSwigluQuantV2
// (swiglu activations, optionally dequantized first, then static or dynamic quantization per MoE group),
// aclnnRmsNormQuant, aclnnAddRmsNormQuantV2 and aclnnAddRmsNormDynamicQuantV2 (rms norm, then static or dynamic
// quantization), aclnnInplaceQuantScatterV2 (quantize, then scatter into an int8 cache). Float32 arithmetic in the
// device kernels' order; rounding half to even (CAST_RINT); integer outputs saturate.
#include <ATen/TensorOperators.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/round.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <string>
#include <vector>

#include "AtenOpSupport.h"
#include "QuantizeSupport.h"

using namespace npu::opslib::aten;

namespace {

void checkFloat(const char* op, const char* what, const at::Tensor& t) {
  TORCH_CHECK(quant::isFloat(t), op, ": ", what, " must be float16, bfloat16 or float32, got ", t.scalar_type());
}

// swish(v, alpha) = v * sigmoid(alpha v), computed as v / (1 + exp(-alpha v)) as the kernels do.
at::Tensor swish(const at::Tensor& v, double alpha = 1.0) {
  return v / (1 + at::exp(alpha == 1.0 ? v.neg() : v * (-alpha)));
}

// MoE row groups of `rows` rows: each row's group (clamped to a valid one) and whether a group holds it at all.
struct RowGroups {
  int64_t count = 1;
  at::Tensor index;   // [rows] int64, in [0, count)
  at::Tensor inside;  // [rows] bool: false for rows past the last group
};

RowGroups rowGroupsOf(int64_t rows, const at::Tensor& groupIndex, bool counts) {
  RowGroups g;
  if (!groupIndex.defined()) {
    g.index = at::zeros({rows}, at::TensorOptions().dtype(at::kLong));
    g.inside = at::ones({rows}, at::TensorOptions().dtype(at::kBool));
    return g;
  }
  g.count = groupIndex.numel();
  const at::Tensor group = quant::rowGroups(rows, groupIndex, counts);
  g.inside = group < g.count;
  g.index = at::clamp_max(group, std::max<int64_t>(g.count - 1, 0));
  return g;
}

void checkGroupIndex(const char* op, const at::Tensor& groupIndex) {
  if (!groupIndex.defined()) return;
  TORCH_CHECK(groupIndex.scalar_type() == at::kInt || groupIndex.scalar_type() == at::kLong, op,
              ": groupIndex must be int32 or int64, got ", groupIndex.scalar_type());
  TORCH_CHECK(groupIndex.dim() == 1 && groupIndex.numel() >= 1, op, ": groupIndex must be a non-empty 1-d tensor, got ",
              groupIndex.sizes());
}

}  // namespace

// --- aclnnSwiGluQuantV2 ----------------------------------------------------------------------------------------

// act = swish(left) * right with activateLeft, else left * swish(right); v = act * smoothScales[g] for the rows of
// group g (groupIndex: cumulative ends, groupListType 0, or counts, 1; without it one group of all rows; rows past
// the groups are left as they are). "static": y = rint(v + offsets[g]), scale 0. "dynamic": scale = DMAX / amax
// of the row (stored as such), y = rint(v * scale). smoothScales / offsets are [G, N] (per column) or [G] (one value
// per group). y is int8 (dstType 2) or int4 packed two to an int8 (29, DMAX 7).
extern "C" NOP_API aclnnStatus aclnnSwiGluQuantV2GetWorkspaceSize(
    const aclTensor* x, const aclTensor* smoothScalesOptional, const aclTensor* offsetsOptional,
    const aclTensor* groupIndexOptional, bool activateLeft, char* quantModeOptional, int64_t groupListType,
    int64_t dstType, aclTensor* yOut, aclTensor* scaleOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnSwiGluQuantV2", workspaceSize, executor, [&] {
    const char* op = "aclnnSwiGluQuantV2";
    at::Tensor xt = requiredTensor(x, "x"), smooth = hostTensor(smoothScalesOptional);
    at::Tensor offsets = hostTensor(offsetsOptional), groups = hostTensor(groupIndexOptional);
    at::Tensor y = requiredTensor(yOut, "yOut"), scale = requiredTensor(scaleOut, "scaleOut");
    const std::string mode = quantModeOptional == nullptr ? "dynamic" : quantModeOptional;
    checkFloat(op, "x", xt);
    TORCH_CHECK(xt.dim() >= 2 && xt.size(-1) % 2 == 0, op, ": x must have 2 or more dimensions and an even last ",
                "dimension, got ", xt.sizes());
    TORCH_CHECK(mode == "static" || mode == "dynamic", op, ": quantMode must be 'static' or 'dynamic', got '", mode,
                "'");
    TORCH_CHECK(groupListType == 0 || groupListType == 1, op, ": groupListType must be 0 (cumsum) or 1 (count), got ",
                groupListType);
    TORCH_CHECK(dstType == quant::kAclInt8 || dstType == quant::kAclInt4, op,
                ": dstType must be 2 (int8) or 29 (int4, two to an int8), got ", dstType);
    checkGroupIndex(op, groups);
    const int64_t half = xt.size(-1) / 2, count = groups.defined() ? groups.numel() : 1;
    std::vector<int64_t> values = xt.sizes().vec();
    values.back() = half;
    const quant::IntGrid grid = quant::packedGrid(op, dstType, y, values);
    values.pop_back();
    TORCH_CHECK(scale.scalar_type() == at::kFloat && scale.sizes().equals(values), op, ": scaleOut must be float32 ",
                at::IntArrayRef(values), ", got ", scale.scalar_type(), " ", scale.sizes());
    const std::pair<const char*, at::Tensor> params[] = {{"smoothScales", smooth}, {"offsets", offsets}};
    for (const auto& [what, p] : params) {
      if (!p.defined()) continue;
      checkFloat(op, what, p);
      TORCH_CHECK(p.numel() == count * half || p.numel() == count, op, ": ", what, " must be [", count, ", ", half,
                  "] or [", count, "] (groups, half of x's last dimension), got ", p.sizes());
    }
    TORCH_CHECK(!offsets.defined() || !smooth.defined() || offsets.sizes().equals(smooth.sizes()), op,
                ": offsets must have smoothScales' shape ", smooth.sizes(), ", got ", offsets.sizes());
    return Prepared{{xt, smooth, offsets, groups}, [=]() mutable {
                      const at::Tensor xf = xt.to(at::kFloat);
                      const at::Tensor left = xf.narrow(-1, 0, half), right = xf.narrow(-1, half, half);
                      at::Tensor v = quant::asRows(activateLeft ? swish(left) * right : left * swish(right));
                      const RowGroups rg = rowGroupsOf(v.size(0), groups, groupListType == 1);
                      const at::Tensor inside = rg.inside.unsqueeze(-1);
                      auto perRow = [&](const at::Tensor& p, double outside) {
                        const at::Tensor table = p.to(at::kFloat).reshape({rg.count, -1});
                        return at::where(inside, table.index_select(0, rg.index), outside);
                      };
                      if (smooth.defined()) v = v * perRow(smooth, 1.0);
                      at::Tensor q;
                      if (mode == "static") {
                        if (offsets.defined()) v = v + perRow(offsets, 0.0);
                        scale.zero_();
                        q = at::round(v);
                      } else {
                        const at::Tensor s = quant::over(grid.hi, at::amax(v.abs(), {-1}));
                        scale.copy_(s.reshape(scale.sizes()));
                        q = at::round(v * s.unsqueeze(-1));
                      }
                      quant::store(y, q, grid);
                    },
                    {y, scale}};
  });
}
NPU_ATEN_OP(SwiGluQuantV2, "x, smoothScalesOptional, offsetsOptional, groupIndexOptional, activateLeft, quantModeOptional, groupListType, dstType, yOut, scaleOut");

// --- aclnnDequantSwigluQuantV2 ---------------------------------------------------------------------------------

namespace {

// A [C] / [1, C] parameter for every row, or a [G, C] one per row group.
at::Tensor perColumn(const at::Tensor& p, const RowGroups& rg, at::ScalarType type) {
  const at::Tensor t = p.to(type);
  return t.dim() == 1 ? t.reshape({1, -1}) : (t.size(0) == 1 ? t : t.index_select(0, rg.index));
}

// A quantization parameter: one value, [G] (one per group), [G, H] (per group and column) or [H] (per column).
at::Tensor quantParam(const at::Tensor& p, const RowGroups& rg) {
  const at::Tensor t = p.to(at::kFloat);
  if (t.numel() == 1) return t.reshape({1, 1});
  if (t.dim() == 2) return t.size(0) == 1 ? t : t.index_select(0, rg.index);
  if (rg.count > 1 && t.numel() == rg.count) return t.index_select(0, rg.index).unsqueeze(-1);
  return t.reshape({1, -1});
}

void checkColumnParam(const char* op, const char* what, const at::Tensor& p, int64_t count, int64_t cols) {
  TORCH_CHECK((p.dim() == 1 && p.size(0) == cols) ||
                  (p.dim() == 2 && p.size(1) == cols && (p.size(0) == count || p.size(0) == 1)),
              op, ": ", what, " must be [", cols, "] or [", count, ", ", cols, "], got ", p.sizes());
}

void checkQuantParam(const char* op, const char* what, const at::Tensor& p, int64_t count, int64_t cols) {
  checkFloat(op, what, p);
  const bool ok = p.numel() == 1 || (p.dim() == 1 && (p.numel() == count || p.numel() == cols)) ||
                  (p.dim() == 2 && (p.size(0) == count || p.size(0) == 1) && p.size(1) == cols);
  TORCH_CHECK(ok, op, ": ", what, " must be [1], [", count, "], [", cols, "] or [", count, ", ", cols, "], got ",
              p.sizes());
}

}  // namespace

// Dequantize an int32 x: (x [+ int32 bias]) * weightScale * activationScale [+ float bias] (float x is taken as it
// is); swiglu along activateDim (swigluMode 0: swish of one half times the other, the left one activated with
// activateLeft; 1: even / odd elements, glu clamped above at clampLimit, linear clamped to +-clampLimit,
// swish(glu, gluAlpha) * (linear + gluBias); 2: the same on the halves); then "static": y = rint(v / quantScale +
// quantOffset), scale 0; or "dynamic": v *= quantScale, scale = amax * (1 / T), y = rint(v * (T / amax)), T = 127.
// A float8 y (dstType 35 / 36) takes the unrounded values, T its largest value, saturated there, in the format's
// rounding. groupIndex (int64) counts the rows of each group (weightScale / bias / quant params [G, ...]); rows
// past their sum come out 0 (upstream leaves them unwritten). roundMode "rint".
extern "C" NOP_API aclnnStatus aclnnDequantSwigluQuantV2GetWorkspaceSize(
    const aclTensor* x, const aclTensor* weightScaleOptional, const aclTensor* activationScaleOptional,
    const aclTensor* biasOptional, const aclTensor* quantScaleOptional, const aclTensor* quantOffsetOptional,
    const aclTensor* groupIndexOptional, bool activateLeft, char* quantModeOptional, int64_t dstType,
    char* roundModeOptional, int64_t activateDim, int64_t swigluMode, double clampLimit, double gluAlpha,
    double gluBias, aclTensor* yOut, aclTensor* scaleOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnDequantSwigluQuantV2", workspaceSize, executor, [&] {
    const char* op = "aclnnDequantSwigluQuantV2";
    at::Tensor xt = requiredTensor(x, "x"), weight = hostTensor(weightScaleOptional);
    at::Tensor act = hostTensor(activationScaleOptional), bias = hostTensor(biasOptional);
    at::Tensor qs = hostTensor(quantScaleOptional), qo = hostTensor(quantOffsetOptional);
    at::Tensor groups = hostTensor(groupIndexOptional);
    at::Tensor y = requiredTensor(yOut, "yOut"), scale = requiredTensor(scaleOut, "scaleOut");
    const std::string mode = quantModeOptional == nullptr ? "static" : quantModeOptional;
    const std::string rounding = roundModeOptional == nullptr ? "rint" : roundModeOptional;
    const bool dequant = xt.scalar_type() == at::kInt;
    TORCH_CHECK(dequant || quant::isFloat(xt), op, ": x must be int32, float16, bfloat16 or float32, got ",
                xt.scalar_type());
    TORCH_CHECK(xt.dim() >= 2 && xt.dim() <= 8, op, ": x must have 2 to 8 dimensions, got ", xt.sizes());
    TORCH_CHECK(activateDim >= -xt.dim() && activateDim < xt.dim(), op, ": activateDim ", activateDim,
                " is out of range for a ", xt.dim(), "-d x");
    const int64_t dim = activateDim < 0 ? activateDim + xt.dim() : activateDim;
    const bool last = dim == xt.dim() - 1;
    TORCH_CHECK(xt.size(dim) % 2 == 0, op, ": x's dimension ", dim, " (", xt.size(dim), ") must be even");
    TORCH_CHECK(mode == "static" || mode == "dynamic", op, ": quantMode must be 'static' or 'dynamic', got '", mode,
                "'");
    const int64_t floatTarget = quant::floatTargetOf(yOut);
    TORCH_CHECK(floatTarget != quant::kAclHiFloat8 && (floatTarget == 0 || floatTarget == dstType), op,
                ": yOut must be int8 or float8 as dstType says, got dstType ", dstType);
    if (floatTarget == 0) {
      TORCH_CHECK(!quant::isChipFormat(dstType), op, ": dstType ", dstType,
                  " is a chip number format (hifloat8 / float4) the software NPU does not have");
      TORCH_CHECK(dstType == quant::kAclInt8, op, ": dstType must be 2 (int8), 35 or 36 (float8), got ", dstType);
    }
    TORCH_CHECK(rounding == "rint", op, ": roundMode must be 'rint' for int8 and float8 outputs, got '", rounding, "'");
    const double target_max = floatTarget == 0 ? 127.0 : quant::floatTargetMax(floatTarget);
    TORCH_CHECK(swigluMode >= 0 && swigluMode <= 2, op, ": swigluMode must be 0, 1 or 2, got ", swigluMode);
    TORCH_CHECK(std::isfinite(clampLimit) && clampLimit > 0 && std::isfinite(gluAlpha) && std::isfinite(gluBias), op,
                ": clampLimit must be positive and finite, gluAlpha and gluBias finite");
    TORCH_CHECK(last || (!groups.defined() && mode == "static"), op,
                ": an activateDim other than the last one takes no groupIndex and static quantization only");
    TORCH_CHECK(dequant || (!weight.defined() && !act.defined() && !bias.defined()), op,
                ": weightScale, activationScale and bias dequantize an int32 x; a float x takes none of them");
    checkGroupIndex(op, groups);
    const int64_t count = groups.defined() ? groups.numel() : 1, cols = xt.size(-1);
    int64_t rows = 1;
    for (int64_t d = 0; d + 1 < xt.dim(); ++d) rows *= xt.size(d);
    if (weight.defined()) {
      checkFloat(op, "weightScale", weight);
      checkColumnParam(op, "weightScale", weight, count, cols);
    }
    if (bias.defined()) {
      TORCH_CHECK(bias.scalar_type() == at::kInt || quant::isFloat(bias), op, ": bias must be int32 or a float type, ",
                  "got ", bias.scalar_type());
      checkColumnParam(op, "bias", bias, count, cols);
    }
    TORCH_CHECK(!act.defined() || (quant::isFloat(act) && act.numel() == rows), op, ": activationScale must be a ",
                "float tensor of one value per row (", rows, "), got ", act.sizes());
    std::vector<int64_t> out_shape = xt.sizes().vec();
    out_shape[static_cast<size_t>(dim)] /= 2;
    if (qs.defined()) checkQuantParam(op, "quantScale", qs, count, out_shape.back());
    if (qo.defined()) checkQuantParam(op, "quantOffset", qo, count, out_shape.back());
    TORCH_CHECK((floatTarget != 0 || y.scalar_type() == at::kChar) && y.sizes().equals(out_shape), op,
                ": yOut must be int8 (or float8) ", at::IntArrayRef(out_shape), ", got ", y.scalar_type(), " ",
                y.sizes());
    const std::vector<int64_t> scale_shape(out_shape.begin(), out_shape.end() - 1);
    TORCH_CHECK(scale.scalar_type() == at::kFloat && scale.sizes().equals(scale_shape), op,
                ": scaleOut must be float32 ", at::IntArrayRef(scale_shape), ", got ", scale.sizes());
    return Prepared{{xt, weight, act, bias, qs, qo, groups}, [=]() mutable {
                      const at::Tensor xr = quant::asRows(xt);
                      const RowGroups rg = rowGroupsOf(xr.size(0), groups, /*counts=*/true);
                      at::Tensor v;
                      if (dequant) {
                        at::Tensor acc = xr.to(at::kLong);
                        if (bias.defined() && bias.scalar_type() == at::kInt) {
                          acc = acc + perColumn(bias, rg, at::kLong);  // exact, before the float scales
                        }
                        v = acc.to(at::kFloat);
                        if (weight.defined()) v = v * perColumn(weight, rg, at::kFloat);
                        if (act.defined()) v = v * act.to(at::kFloat).reshape({-1, 1});
                        if (bias.defined() && bias.scalar_type() != at::kInt) v = v + perColumn(bias, rg, at::kFloat);
                      } else {
                        v = xr.to(at::kFloat);
                      }
                      v = v.reshape(xt.sizes());
                      const int64_t half = xt.size(dim) / 2;
                      at::Tensor glu, linear;
                      if (swigluMode == 1) {
                        glu = v.slice(dim, 0, xt.size(dim), 2);
                        linear = v.slice(dim, 1, xt.size(dim), 2);
                      } else {
                        const at::Tensor lo = v.narrow(dim, 0, half), hi = v.narrow(dim, half, half);
                        glu = activateLeft ? lo : hi;
                        linear = activateLeft ? hi : lo;
                      }
                      const at::Tensor out = swigluMode == 0
                                                 ? swish(glu) * linear
                                                 : swish(at::clamp_max(glu, clampLimit), gluAlpha) *
                                                       (at::clamp(linear, -clampLimit, clampLimit) + gluBias);
                      at::Tensor o = quant::asRows(out);
                      at::Tensor s, q;
                      if (mode == "static") {
                        if (qs.defined()) o = o / quantParam(qs, rg);
                        if (qo.defined()) o = o + quantParam(qo, rg);
                        s = at::zeros({o.size(0)}, o.options());
                        q = o;
                      } else {
                        if (qs.defined()) o = o * quantParam(qs, rg);
                        const at::Tensor top = at::amax(o.abs(), {-1});
                        s = top * quant::reciprocalF32(target_max);
                        q = o * quant::over(target_max, top).unsqueeze(-1);
                      }
                      if (groups.defined()) {  // (the split is then along the last dimension: rows are x's rows)
                        q = at::where(rg.inside.unsqueeze(-1), q, 0.0);
                        s = at::where(rg.inside, s, 0.0);
                      }
                      if (floatTarget != 0) {
                        quant::storeFloat(y, at::clamp(q, -target_max, target_max), floatTarget);
                      } else {
                        quant::store(y, at::round(q), quant::int8Grid());
                      }
                      scale.copy_(s.reshape(scale.sizes()));
                    },
                    {y, scale}};
  });
}
NPU_ATEN_OP(DequantSwigluQuantV2, "x, weightScaleOptional, activationScaleOptional, biasOptional, quantScaleOptional, quantOffsetOptional, groupIndexOptional, activateLeft, quantModeOptional, dstType, roundModeOptional, activateDim, swigluMode, clampLimit, gluAlpha, gluBias, yOut, scaleOut");

// --- aclnnRmsNormQuant / aclnnAddRmsNormQuantV2 / aclnnAddRmsNormDynamicQuantV2 ---------------------------------

namespace {

// gamma (and beta, scales...) cover x's trailing dimensions: [H], or [1, H] for a 1-d normalised dimension.
std::vector<int64_t> normDimsOf(const char* op, const at::Tensor& x, const at::Tensor& gamma) {
  checkFloat(op, "gamma", gamma);
  const bool row = gamma.dim() == 2 && gamma.size(0) == 1 && x.dim() >= 1 && gamma.size(1) == x.size(-1);
  const int64_t dims = row ? 1 : gamma.dim();
  TORCH_CHECK(row || (dims >= 1 && dims <= x.dim() && x.sizes().slice(x.dim() - dims).equals(gamma.sizes())), op,
              ": gamma's shape ", gamma.sizes(), " must be x's trailing dimensions (x ", x.sizes(), ") or [1, ",
              x.dim() >= 1 ? x.size(-1) : 0, "]");
  std::vector<int64_t> reduced;
  for (int64_t d = x.dim() - dims; d < x.dim(); ++d) reduced.push_back(d);
  return reduced;
}

// A parameter of gamma's extent as it multiplies / adds to the normalised values.
at::Tensor normParam(const at::Tensor& p, const at::Tensor& x, const std::vector<int64_t>& dims) {
  std::vector<int64_t> shape(x.sizes().end() - static_cast<int64_t>(dims.size()), x.sizes().end());
  return p.to(at::kFloat).reshape(shape);
}

void checkNormParam(const char* op, const char* what, const at::Tensor& p, const at::Tensor& gamma) {
  TORCH_CHECK(p.numel() == gamma.numel(), op, ": ", what, " must have gamma's shape ", gamma.sizes(), ", got ",
              p.sizes());
}

// x / sqrt(mean(x^2) + eps) * gamma over `dims`, in float32, the reciprocal of the root taken once.
at::Tensor rmsNormed(const at::Tensor& xf, const at::Tensor& gamma, const std::vector<int64_t>& dims, double eps) {
  const at::Tensor rstd = at::reciprocal(at::sqrt(at::mean(xf * xf, dims, /*keepdim=*/true) + eps));
  return xf * rstd * normParam(gamma, xf, dims);
}

// The grid of an output that stores int8, or int4 packed eight to an int32 (an int32 output).
quant::IntGrid int8OrPackedGrid(const char* op, const char* what, const at::Tensor& out, at::IntArrayRef values) {
  TORCH_CHECK(out.scalar_type() == at::kChar || out.scalar_type() == at::kInt, op, ": ", what,
              " must be int8, or int32 carrying eight int4 values each, got ", out.scalar_type());
  return quant::packedGrid(op, out.scalar_type() == at::kInt ? quant::kAclInt32 : quant::kAclInt8, out, values);
}

}  // namespace

// y = rint(fp16((x / rms(x)) * gamma + beta) * (1 / scale) + offset)): the kernel holds the value in float16 before
// the final cast (so it is rounded there first); int8, or int4 packed eight to an int32 when y is int32. A hifloat8
// / float8 y takes v / scale + offset in float32, saturated to the format's largest value, in the format's rounding.
// scale and offset hold one value.
extern "C" NOP_API aclnnStatus aclnnRmsNormQuantGetWorkspaceSize(const aclTensor* x, const aclTensor* gamma,
                                                                const aclTensor* beta, const aclTensor* scale,
                                                                const aclTensor* offset, double epsilon, aclTensor* y,
                                                                uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnRmsNormQuant", workspaceSize, executor, [&] {
    const char* op = "aclnnRmsNormQuant";
    at::Tensor xt = requiredTensor(x, "x"), g = requiredTensor(gamma, "gamma"), b = requiredTensor(beta, "beta");
    at::Tensor s = requiredTensor(scale, "scale"), off = requiredTensor(offset, "offset");
    at::Tensor out = requiredTensor(y, "y");
    checkFloat(op, "x", xt);
    const std::vector<int64_t> dims = normDimsOf(op, xt, g);
    checkFloat(op, "beta", b);
    checkNormParam(op, "beta", b, g);
    checkFloat(op, "scale", s);
    TORCH_CHECK(s.numel() == 1 && off.numel() == 1, op, ": scale and offset must hold one value each, got ",
                s.sizes(), " and ", off.sizes());
    TORCH_CHECK(off.scalar_type() == at::kChar || off.scalar_type() == at::kInt || quant::isFloat(off), op,
                ": offset must be int8, int32 or a float type, got ", off.scalar_type());
    const int64_t floatTarget = quant::floatTargetOf(y);
    quant::IntGrid grid;
    if (floatTarget != 0) {
      TORCH_CHECK(out.sizes().equals(xt.sizes()), op, ": y must have x's shape ", xt.sizes(), ", got ", out.sizes());
    } else {
      grid = int8OrPackedGrid(op, "y", out, xt.sizes());
    }
    return Prepared{{xt, g, b, s, off}, [=]() mutable {
                      const at::Tensor v = rmsNormed(xt.to(at::kFloat), g, dims, epsilon) + normParam(b, xt, dims);
                      if (floatTarget != 0) {
                        const double top = quant::floatTargetMax(floatTarget);
                        const at::Tensor q = v / s.to(at::kFloat).reshape({}) + off.to(at::kFloat).reshape({});
                        quant::storeFloat(out, at::clamp(q, -top, top), floatTarget);
                        return;
                      }
                      const at::Tensor inv = at::reciprocal(s.to(at::kFloat).reshape({}));
                      const at::Tensor q = (v * inv + off.to(at::kFloat).reshape({})).to(at::kHalf).to(at::kFloat);
                      quant::store(out, at::round(q), grid);
                    },
                    {out}};
  });
}
NPU_ATEN_OP(RmsNormQuant, "x, gamma, beta, scale, offset, epsilon, y");

// x = x1 + x2 (xOut, in x1's dtype; the norm reads this rounded sum), n = x / rms(x) * gamma (rmsNormOut, when
// given), y = n + beta; y1 = rint(y / scales1 + zeroPoints1) (y * scales1 without divMode) as int8, y2 likewise
// with scales2 (zeros without it); hifloat8 / float8 outputs take the unrounded values, saturated to the format's
// largest value, in the format's rounding. axis is -1 upstream and otherwise ignored.
extern "C" NOP_API aclnnStatus aclnnAddRmsNormQuantV2GetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma, const aclTensor* scales1,
    const aclTensor* scales2Optional, const aclTensor* zeroPoints1Optional, const aclTensor* zeroPoints2Optional,
    const aclTensor* betaOptional, int64_t axis, double epsilon, bool divMode, aclTensor* y1Out, aclTensor* y2Out,
    aclTensor* xOut, aclTensor* rmsNormOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAddRmsNormQuantV2", workspaceSize, executor, [&] {
    const char* op = "aclnnAddRmsNormQuantV2";
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2"), g = requiredTensor(gamma, "gamma");
    at::Tensor s1 = requiredTensor(scales1, "scales1"), s2 = hostTensor(scales2Optional);
    at::Tensor z1 = hostTensor(zeroPoints1Optional), z2 = hostTensor(zeroPoints2Optional);
    at::Tensor beta = hostTensor(betaOptional);
    at::Tensor y1 = requiredTensor(y1Out, "y1Out"), y2 = requiredTensor(y2Out, "y2Out");
    at::Tensor sum = requiredTensor(xOut, "xOut"), normed = hostTensor(rmsNormOut);
    checkFloat(op, "x1", a);
    TORCH_CHECK(a.sizes().equals(b.sizes()) && a.scalar_type() == b.scalar_type(), op,
                ": x1 and x2 must have one shape and dtype, got ", a.sizes(), " and ", b.sizes());
    const std::vector<int64_t> dims = normDimsOf(op, a, g);
    const std::pair<const char*, at::Tensor> params[] = {
        {"scales1", s1}, {"scales2", s2}, {"zeroPoints1", z1}, {"zeroPoints2", z2}, {"beta", beta}};
    for (const auto& [what, p] : params) {
      if (!p.defined()) continue;
      checkNormParam(op, what, p, g);
      TORCH_CHECK(quant::isFloat(p) || p.scalar_type() == at::kInt, op, ": ", what, " must be a float type or int32, ",
                  "got ", p.scalar_type());
    }
    TORCH_CHECK(!z2.defined() || s2.defined(), op, ": zeroPoints2 needs scales2");
    const int64_t floatTarget = quant::floatTargetOf(y1Out);
    TORCH_CHECK(quant::floatTargetOf(y2Out) == floatTarget, op, ": y1Out and y2Out must hold one format");
    for (const at::Tensor& yi : {y1, y2}) {
      TORCH_CHECK((floatTarget != 0 || yi.scalar_type() == at::kChar) && yi.sizes().equals(a.sizes()), op,
                  ": y1Out / y2Out must be int8 (or hifloat8 / float8) ", a.sizes(), ", got ", yi.scalar_type(), " ",
                  yi.sizes());
    }
    TORCH_CHECK(sum.scalar_type() == a.scalar_type() && sum.sizes().equals(a.sizes()), op, ": xOut must be like x1");
    TORCH_CHECK(!normed.defined() || normed.sizes().equals(a.sizes()), op, ": rmsNormOut must have x1's shape");
    return Prepared{{a, b, g, s1, s2, z1, z2, beta}, [=]() mutable {
                      sum.copy_(a.to(at::kFloat) + b.to(at::kFloat));
                      const at::Tensor xf = sum.to(at::kFloat);
                      const at::Tensor n = rmsNormed(xf, g, dims, epsilon);
                      if (normed.defined()) normed.copy_(n);
                      const at::Tensor v = beta.defined() ? n + normParam(beta, xf, dims) : n;
                      auto quantize = [&](at::Tensor& out, const at::Tensor& scales, const at::Tensor& zero_points) {
                        const at::Tensor sc = normParam(scales, xf, dims);
                        at::Tensor q = divMode ? v / sc : v * sc;
                        if (zero_points.defined()) q = q + normParam(zero_points, xf, dims);
                        if (floatTarget != 0) {
                          const double top = quant::floatTargetMax(floatTarget);
                          quant::storeFloat(out, at::clamp(q, -top, top), floatTarget);
                        } else {
                          quant::store(out, at::round(q), quant::int8Grid());
                        }
                      };
                      quantize(y1, s1, z1);
                      if (s2.defined()) {
                        quantize(y2, s2, z2);
                      } else {
                        y2.zero_();
                      }
                    },
                    {y1, y2, sum, normed}};
  });
}
NPU_ATEN_OP(AddRmsNormQuantV2, "x1, x2, gamma, scales1, scales2Optional, zeroPoints1Optional, zeroPoints2Optional, betaOptional, axis, epsilon, divMode, y1Out, y2Out, xOut, rmsNormOut");

// x = x1 + x2 (xOut; the norm reads the float32 sum), y = x / rms(x) * gamma + beta; each enabled branch i:
// v = y * smoothScale_i, m = DMAX / amax(row of v), y_i = rint(v * m), scale_i = 1 / m, with DMAX 127 (int8 y_i)
// or 7 (int32 y_i carrying eight int4 values). outputMask (ours an int array, aclnn's a bool array) enables the
// branches; without it branch 1 always runs and branch 2 when both smooth scales are given. Disabled branches'
// outputs are zero-filled.
extern "C" NOP_API aclnnStatus aclnnAddRmsNormDynamicQuantV2GetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma, const aclTensor* smoothScale1Optional,
    const aclTensor* smoothScale2Optional, const aclTensor* betaOptional, double epsilon,
    const aclIntArray* outputMaskOptional, aclTensor* y1Out, aclTensor* y2Out, aclTensor* xOut, aclTensor* scale1Out,
    aclTensor* scale2Out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAddRmsNormDynamicQuantV2", workspaceSize, executor, [&] {
    const char* op = "aclnnAddRmsNormDynamicQuantV2";
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2"), g = requiredTensor(gamma, "gamma");
    at::Tensor smooth1 = hostTensor(smoothScale1Optional), smooth2 = hostTensor(smoothScale2Optional);
    at::Tensor beta = hostTensor(betaOptional);
    at::Tensor y1 = requiredTensor(y1Out, "y1Out"), y2 = requiredTensor(y2Out, "y2Out");
    at::Tensor sum = requiredTensor(xOut, "xOut");
    at::Tensor scale1 = requiredTensor(scale1Out, "scale1Out"), scale2 = requiredTensor(scale2Out, "scale2Out");
    checkFloat(op, "x1", a);
    TORCH_CHECK(a.dim() >= 2 && a.sizes().equals(b.sizes()) && a.scalar_type() == b.scalar_type(), op,
                ": x1 and x2 must have one shape (2 or more dimensions) and dtype, got ", a.sizes(), " and ",
                b.sizes());
    TORCH_CHECK(g.dim() == 1, op, ": gamma must be 1-d [", a.size(-1), "], got ", g.sizes());
    const std::vector<int64_t> dims = normDimsOf(op, a, g);
    const std::pair<const char*, at::Tensor> params[] = {
        {"smoothScale1", smooth1}, {"smoothScale2", smooth2}, {"beta", beta}};
    for (const auto& [what, p] : params) {
      if (!p.defined()) continue;
      checkFloat(op, what, p);
      checkNormParam(op, what, p, g);
    }
    const std::vector<int64_t> mask = intArray(outputMaskOptional);
    TORCH_CHECK(outputMaskOptional == nullptr || mask.size() == 2, op, ": outputMask must hold 2 values, got ",
                mask.size());
    const bool on1 = outputMaskOptional == nullptr || mask[0] != 0;
    const bool on2 = outputMaskOptional == nullptr ? smooth1.defined() && smooth2.defined() : mask[1] != 0;
    TORCH_CHECK(on1 || on2, op, ": outputMask must enable at least one of the two quantized outputs");
    std::vector<int64_t> rows = a.sizes().vec();
    rows.pop_back();
    quant::IntGrid grid1, grid2;
    if (on1) grid1 = int8OrPackedGrid(op, "y1Out", y1, a.sizes());
    if (on2) grid2 = int8OrPackedGrid(op, "y2Out", y2, a.sizes());
    for (const auto& [on, s] : {std::pair<bool, at::Tensor>{on1, scale1}, std::pair<bool, at::Tensor>{on2, scale2}}) {
      TORCH_CHECK(!on || (s.scalar_type() == at::kFloat && s.sizes().equals(rows)), op,
                  ": scale outputs must be float32 ", at::IntArrayRef(rows), ", got ", s.sizes());
    }
    TORCH_CHECK(sum.scalar_type() == a.scalar_type() && sum.sizes().equals(a.sizes()), op, ": xOut must be like x1");
    return Prepared{{a, b, g, smooth1, smooth2, beta}, [=]() mutable {
                      const at::Tensor xf = a.to(at::kFloat) + b.to(at::kFloat);
                      sum.copy_(xf);
                      at::Tensor v = rmsNormed(xf, g, dims, epsilon);
                      if (beta.defined()) v = v + normParam(beta, xf, dims);
                      auto branch = [&](bool on, const at::Tensor& smooth, at::Tensor& y, at::Tensor& scale,
                                        const quant::IntGrid& grid) {
                        if (!on) {
                          y.zero_();
                          scale.zero_();
                          return;
                        }
                        const at::Tensor w = smooth.defined() ? v * normParam(smooth, xf, dims) : v;
                        const at::Tensor m = quant::over(grid.hi, at::amax(w.abs(), {-1}, /*keepdim=*/true));
                        scale.copy_(at::reciprocal(m).reshape(scale.sizes()));
                        quant::store(y, at::round(w * m), grid);
                      };
                      branch(on1, smooth1, y1, scale1, grid1);
                      branch(on2, smooth2, y2, scale2, grid2);
                    },
                    {y1, y2, sum, scale1, scale2}};
  });
}
NPU_ATEN_OP(AddRmsNormDynamicQuantV2, "x1, x2, gamma, smoothScale1Optional, smoothScale2Optional, betaOptional, epsilon, outputMaskOptional, y1Out, y2Out, xOut, scale1Out, scale2Out");

// --- aclnnInplaceQuantScatterV2 --------------------------------------------------------------------------------

// updates are quantized per channel of their last dimension, q = rint(updates / quantScales + quantZeroPoints) as
// int8, then written into selfRef: with 1-d indices, batch row i of selfRef gets q[i] from offset indices[i] along
// `axis`; with [n, 2] indices, batch row indices[i][0] from offset indices[i][1]. axis is neither the first nor the
// last dimension; quantAxis is the last; reduction 1 (update) only. Indices out of range are an error (the device
// kernel does not check them).
extern "C" NOP_API aclnnStatus aclnnInplaceQuantScatterV2GetWorkspaceSize(
    aclTensor* selfRef, const aclTensor* indices, const aclTensor* updates, const aclTensor* quantScales,
    const aclTensor* quantZeroPoints, int64_t axis, int64_t quantAxis, int64_t reduction, char* roundMode,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnInplaceQuantScatterV2", workspaceSize, executor, [&] {
    const char* op = "aclnnInplaceQuantScatterV2";
    at::Tensor self = requiredTensor(selfRef, "selfRef"), idx = requiredTensor(indices, "indices");
    at::Tensor upd = requiredTensor(updates, "updates"), scales = requiredTensor(quantScales, "quantScales");
    at::Tensor zp = hostTensor(quantZeroPoints);
    const std::string rounding = roundMode == nullptr ? "rint" : roundMode;
    TORCH_CHECK(self.scalar_type() == at::kChar, op, ": selfRef must be int8, got ", self.scalar_type());
    TORCH_CHECK(self.dim() >= 3 && self.dim() <= 8 && upd.dim() == self.dim(), op, ": selfRef must have 3 to 8 ",
                "dimensions and updates as many, got ", self.sizes(), " and ", upd.sizes());
    checkFloat(op, "updates", upd);
    const int64_t dims = self.dim();
    TORCH_CHECK(axis >= -dims && axis < dims, op, ": axis ", axis, " is out of range for ", dims, " dimensions");
    const int64_t ax = axis < 0 ? axis + dims : axis;
    TORCH_CHECK(ax != 0 && ax != dims - 1, op, ": axis must be neither the first nor the last dimension, got ", axis);
    TORCH_CHECK(quantAxis == -1 || quantAxis == dims - 1, op, ": quantAxis must be the last dimension, got ",
                quantAxis);
    TORCH_CHECK(reduction == 1, op, ": reduction must be 1 (update), got ", reduction);
    TORCH_CHECK(rounding == "rint", op, ": roundMode must be 'rint' for an int8 selfRef ('round' / 'hybrid' are for ",
                "hifloat8), got '", rounding, "'");
    TORCH_CHECK(idx.scalar_type() == at::kInt || idx.scalar_type() == at::kLong, op,
                ": indices must be int32 or int64, got ", idx.scalar_type());
    TORCH_CHECK((idx.dim() == 1 || (idx.dim() == 2 && idx.size(1) == 2)) && idx.size(0) == upd.size(0), op,
                ": indices must be [", upd.size(0), "] or [", upd.size(0), ", 2] (updates' first dimension), got ",
                idx.sizes());
    for (int64_t d = 1; d < dims; ++d) {
      TORCH_CHECK(d == ax ? upd.size(d) <= self.size(d) : upd.size(d) == self.size(d), op, ": updates ", upd.sizes(),
                  " must match selfRef ", self.sizes(), " but along axis ", ax, " (where it may be shorter)");
    }
    TORCH_CHECK(upd.size(0) <= self.size(0), op, ": updates has more rows (", upd.size(0), ") than selfRef (",
                self.size(0), ")");
    const int64_t channels = upd.size(-1);
    TORCH_CHECK(quant::isFloat(scales) && scales.numel() == channels, op, ": quantScales must be a float tensor of ",
                channels, " values (updates' last dimension), got ", scales.sizes());
    TORCH_CHECK(!zp.defined() || ((quant::isFloat(zp) || zp.scalar_type() == at::kInt) && zp.numel() == channels), op,
                ": quantZeroPoints must be int32 or float, ", channels, " values, got ", zp.sizes());
    return Prepared{{self, idx, upd, scales, zp}, [=]() mutable {
                      at::Tensor v = upd.to(at::kFloat) / scales.to(at::kFloat).reshape({-1});
                      if (zp.defined()) v = v + zp.to(at::kFloat).reshape({-1});
                      const at::Tensor q = quant::saturate(at::round(v), -128, 127).to(at::kChar);
                      const at::Tensor positions = idx.to(at::kLong).contiguous();
                      const int64_t* w = positions.const_data_ptr<int64_t>();
                      const int64_t span = upd.size(ax);
                      for (int64_t i = 0; i < upd.size(0); ++i) {
                        const int64_t row = positions.dim() == 2 ? w[2 * i] : i;
                        const int64_t start = positions.dim() == 2 ? w[2 * i + 1] : w[i];
                        TORCH_CHECK(row >= 0 && row < self.size(0) && start >= 0 && start + span <= self.size(ax), op,
                                    ": update ", i, " (row ", row, ", offset ", start, ", ", span,
                                    " long) falls outside selfRef ", self.sizes());
                        self.select(0, row).narrow(ax - 1, start, span).copy_(q.select(0, i));
                      }
                    },
                    {self}};
  });
}
NPU_ATEN_OP(InplaceQuantScatterV2, "selfRef, indices, updates, quantScales, quantZeroPoints, axis, quantAxis, reduction, roundMode");
