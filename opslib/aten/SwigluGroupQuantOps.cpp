// SwigluGroupQuantOps.cpp - aclnnSwigluGroupQuant (swiglu of x's two halves, optionally weighted per row, then
// dynamic hifloat8 quantisation per token group) and aclnnSwigluGroupQuantGrad (the gradients of the swiglu and of
// the row weights). Float32 arithmetic; hifloat8 codes in uint8 (npu/hifloat8.h).
#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <vector>

#include "AtenOpSupport.h"
#include "QuantizeSupport.h"

using namespace npu::opslib::aten;

namespace {

constexpr double kAmaxFloor = 1e-8;  // a group's maximum is raised to this before it becomes a scale

void checkFloat(const char* op, const char* what, const at::Tensor& t) {
  TORCH_CHECK(quant::isFloat(t), op, ": ", what, " must be float16, bfloat16 or float32, got ", t.scalar_type());
}

// x [..., 2H] as float32 rows [R, 2H].
at::Tensor rowsOf(const char* op, const at::Tensor& x) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) % 2 == 0, op, ": x's last dimension must be even (two halves), got ",
              x.sizes());
  return x.to(at::kFloat).reshape({-1, x.size(-1)});
}

// The row weights [R] (given as [R, 1], [R] or x's leading shape).
at::Tensor rowWeights(const char* op, const at::Tensor& weight, int64_t rows) {
  checkFloat(op, "weight", weight);
  TORCH_CHECK(weight.numel() == rows, op, ": weight must hold one value per row of x (", rows, "), got ",
              weight.sizes());
  return weight.to(at::kFloat).reshape({rows, 1});
}

// Token counts per group; the rows after their sum belong to no group.
std::vector<int64_t> groupCounts(const char* op, const at::Tensor& groupIndex) {
  TORCH_CHECK(groupIndex.dim() == 1 && (groupIndex.scalar_type() == at::kLong || groupIndex.scalar_type() == at::kInt),
              op, ": groupIndex must be a 1-d int64 / int32 tensor of token counts, got ", groupIndex.scalar_type(),
              " ", groupIndex.sizes());
  const at::Tensor c = groupIndex.to(at::kLong).contiguous();
  std::vector<int64_t> counts(c.const_data_ptr<int64_t>(), c.const_data_ptr<int64_t>() + c.numel());
  for (int64_t n : counts) TORCH_CHECK(n >= 0, op, ": groupIndex holds token counts, which must not be negative");
  return counts;
}

// The halves after clamping (clampLimit > 0: x0 <= limit, -limit <= x1 <= limit).
std::pair<at::Tensor, at::Tensor> clampedHalves(const at::Tensor& rows, double clampLimit) {
  const int64_t h = rows.size(1) / 2;
  at::Tensor x0 = rows.narrow(1, 0, h), x1 = rows.narrow(1, h, h);
  if (clampLimit > 0) {
    x0 = at::clamp_max(x0, clampLimit);
    x1 = at::clamp(x1, -clampLimit, clampLimit);
  }
  return {x0, x1};
}

}  // namespace

// y = silu(x0) * x1 (* weight per row) over x = [x0, x1]; yOrigin = y in x's dtype (outputOrigin). quantMode 3:
// per group of rows (groupIndex: token counts; one group of all rows without it) scale = max(amax |y|, 1e-8) /
// dstTypeMax and yOut = hifloat8(y / scale); rows after the groups hold code 0.
extern "C" NOP_API aclnnStatus aclnnSwigluGroupQuantGetWorkspaceSize(
    const aclTensor* x, const aclTensor* weightOptional, const aclTensor* groupIndexOptional,
    const aclTensor* scaleOptional, int64_t dstType, int64_t quantMode, int64_t blockSize, bool roundScale,
    double clampLimit, double dstTypeMax, bool outputOrigin, aclTensor* yOut, aclTensor* yScaleOut,
    aclTensor* yOriginOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnSwigluGroupQuant", workspaceSize, executor, [&] {
    const char* op = "aclnnSwigluGroupQuant";
    at::Tensor xt = requiredTensor(x, "x"), weight = hostTensor(weightOptional);
    at::Tensor groups = hostTensor(groupIndexOptional), scale = hostTensor(scaleOptional);
    at::Tensor y = requiredTensor(yOut, "yOut"), yScale = requiredTensor(yScaleOut, "yScaleOut");
    at::Tensor yOrigin = hostTensor(yOriginOut);
    checkFloat(op, "x", xt);
    TORCH_CHECK(dstType == quant::kAclHiFloat8 && quant::floatTargetOf(yOut) == quant::kAclHiFloat8, op,
                ": the output is hifloat8 (dstType 34, yOut uint8 described as HIFLOAT8), got dstType ", dstType);
    TORCH_CHECK(quantMode == 3, op, ": quantMode must be 3 (dynamic, per token group); 2 (static with scale) is not ",
                "provided, got ", quantMode);
    TORCH_CHECK(!roundScale, op, ": roundScale is not provided; pass False");
    TORCH_CHECK(dstTypeMax > 0, op, ": dstTypeMax (the hifloat8 value a group's maximum maps to) must be positive, ",
                "got ", dstTypeMax);
    (void)blockSize;  // quantMode 3 quantises whole groups
    (void)scale;      // the static scale of quantMode 2
    const int64_t two_h = xt.size(-1);
    TORCH_CHECK(two_h % 2 == 0, op, ": x's last dimension must be even (two halves), got ", xt.sizes());
    std::vector<int64_t> y_shape = xt.sizes().vec();
    y_shape.back() = two_h / 2;
    TORCH_CHECK(y.sizes().equals(y_shape), op, ": yOut must be ", at::IntArrayRef(y_shape), ", got ", y.sizes());
    const int64_t rows = xt.numel() / std::max<int64_t>(two_h, 1);
    const int64_t count = groups.defined() ? groups.numel() : 1;
    TORCH_CHECK(yScale.scalar_type() == at::kFloat && yScale.dim() == 1 && yScale.size(0) == count, op,
                ": yScaleOut must be float32 [", count, "], got ", yScale.scalar_type(), " ", yScale.sizes());
    if (weight.defined()) rowWeights(op, weight, rows);
    TORCH_CHECK(!outputOrigin || (yOrigin.defined() && yOrigin.sizes().equals(y_shape) &&
                                  yOrigin.scalar_type() == xt.scalar_type()),
                op, ": with outputOrigin, yOriginOut must be ", xt.scalar_type(), " ", at::IntArrayRef(y_shape));
    return Prepared{{xt, weight, groups}, [=]() mutable {
                      const at::Tensor r = rowsOf(op, xt);
                      const auto [x0, x1] = clampedHalves(r, clampLimit);
                      at::Tensor v = x0 * at::sigmoid(x0) * x1;
                      if (weight.defined()) v = v * rowWeights(op, weight, rows);
                      if (outputOrigin) yOrigin.copy_(v.reshape(y_shape));
                      const std::vector<int64_t> counts =
                          groups.defined() ? groupCounts(op, groups) : std::vector<int64_t>{rows};
                      at::Tensor q = at::zeros_like(v);
                      at::Tensor s = at::zeros({count}, v.options());
                      int64_t start = 0;
                      for (int64_t g = 0; g < count; ++g) {
                        const int64_t end = std::min(rows, start + counts[static_cast<size_t>(g)]);
                        const at::Tensor part = v.narrow(0, start, end - start);
                        const at::Tensor top = part.numel() ? at::amax(part.abs()) : at::zeros({}, v.options());
                        const at::Tensor sg = at::clamp_min(top, kAmaxFloor) / dstTypeMax;
                        s.select(0, g).copy_(sg);
                        q.narrow(0, start, end - start).copy_(part / sg);
                        start = end;
                      }
                      at::Tensor codes = at::zeros(y_shape, y.options());
                      // Rows after the groups stay code 0: quantise only the grouped ones.
                      at::Tensor grouped_rows = codes.reshape({rows, two_h / 2}).narrow(0, 0, start);
                      quant::storeFloat(grouped_rows, q.narrow(0, 0, start), quant::kAclHiFloat8);
                      y.copy_(codes);
                      yScale.copy_(s);
                    },
                    {y, yScale, yOrigin}};
  });
}
NPU_ATEN_OP(SwigluGroupQuant, "x, weightOptional, groupIndexOptional, scaleOptional, dstType, quantMode, blockSize, roundScale, clampLimit, dstTypeMax, outputOrigin, yOut, yScaleOut, yOriginOut");

// The backward of the swiglu (with its clamp, clampLimit > 0) and of the row weights: g0 = gradY * weight; gradX =
// [g0 * x1 * silu'(x0), g0 * silu(x0)], zero where the clamp cut x; gradWeight = sum(gradY * yOrigin) per row
// (weight's gradient when yOrigin is the unweighted swiglu). Rows after the groups' token counts get zero
// gradients.
extern "C" NOP_API aclnnStatus aclnnSwigluGroupQuantGradGetWorkspaceSize(
    const aclTensor* gradY, const aclTensor* x, const aclTensor* weightOptional, const aclTensor* yOriginOptional,
    const aclTensor* groupIndexOptional, double clampLimit, aclTensor* gradXOut, aclTensor* gradWeightOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnSwigluGroupQuantGrad", workspaceSize, executor, [&] {
    const char* op = "aclnnSwigluGroupQuantGrad";
    at::Tensor gy = requiredTensor(gradY, "gradY"), xt = requiredTensor(x, "x");
    at::Tensor weight = hostTensor(weightOptional), origin = hostTensor(yOriginOptional);
    at::Tensor groups = hostTensor(groupIndexOptional);
    at::Tensor gx = requiredTensor(gradXOut, "gradXOut"), gw = hostTensor(gradWeightOut);
    checkFloat(op, "x", xt);
    checkFloat(op, "gradY", gy);
    TORCH_CHECK(xt.dim() >= 1 && xt.size(-1) % 2 == 0, op, ": x's last dimension must be even, got ", xt.sizes());
    const int64_t h = xt.size(-1) / 2, rows = xt.numel() / std::max<int64_t>(2 * h, 1);
    TORCH_CHECK(gy.numel() == rows * h && gy.size(-1) == h, op, ": gradY must have x's rows and half its last ",
                "dimension (", h, "), got ", gy.sizes());
    TORCH_CHECK(gx.sizes().equals(xt.sizes()) && gx.scalar_type() == xt.scalar_type(), op, ": gradXOut must be like x");
    if (weight.defined()) {
      rowWeights(op, weight, rows);
      TORCH_CHECK(origin.defined() && origin.numel() == rows * h, op, ": a weighted backward needs yOrigin (the ",
                  "forward's unquantised output, ", rows, " x ", h, " values)");
      TORCH_CHECK(gw.defined() && gw.sizes().equals(weight.sizes()), op, ": gradWeightOut must have weight's shape ",
                  weight.sizes());
    }
    return Prepared{{gy, xt, weight, origin, groups}, [=]() mutable {
                      const at::Tensor r = rowsOf(op, xt);
                      const at::Tensor g = gy.to(at::kFloat).reshape({rows, h});
                      at::Tensor keep = at::ones({rows, 1}, r.options());
                      if (groups.defined()) {
                        int64_t total = 0;
                        for (int64_t n : groupCounts(op, groups)) total += n;
                        keep = (at::arange(rows, r.options()) < static_cast<double>(total)).to(at::kFloat).unsqueeze(1);
                      }
                      at::Tensor g0 = g;
                      if (weight.defined()) {
                        const at::Tensor w = rowWeights(op, weight, rows);
                        const at::Tensor o = origin.to(at::kFloat).reshape({rows, h});
                        gw.copy_((at::sum(g * o, {1}, /*keepdim=*/true) * keep).reshape(gw.sizes()));
                        g0 = g * w;
                      }
                      const at::Tensor raw0 = r.narrow(1, 0, h), raw1 = r.narrow(1, h, h);
                      const auto [x0, x1] = clampedHalves(r, clampLimit);
                      const at::Tensor sig = at::sigmoid(x0);
                      at::Tensor d0 = g0 * x1 * sig * (1 + x0 * (1 - sig));
                      at::Tensor d1 = g0 * x0 * sig;
                      if (clampLimit > 0) {
                        d0 = d0 * (raw0 < clampLimit).to(at::kFloat);
                        d1 = d1 * ((raw1 > -clampLimit) & (raw1 < clampLimit)).to(at::kFloat);
                      }
                      gx.copy_((at::cat({d0, d1}, 1) * keep).reshape(gx.sizes()));
                    },
                    {gx, gw}};
  });
}
NPU_ATEN_OP(SwigluGroupQuantGrad, "gradY, x, weightOptional, yOriginOptional, groupIndexOptional, clampLimit, gradXOut, gradWeightOut");
