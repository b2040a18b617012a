// QuantMatmulVariantOps.cpp - device ops for the quantized-matmul variants: aclnnFusedQuantMatmul
// (int8 / int4 matmul, per-token x per-channel dequantisation, bias, then GELU),
// aclnnQuantMatmulReduceSumWeightNz (batched int8 matmuls dequantised and summed over the batch),
// aclnnRotateQuant (block rotation, then per-token dynamic int8 / int4 quantization),
// aclnnDequantBias (int32 accumulators to float16 / bfloat16), aclnnGeluQuant (GELU, then int8 quantization) and
// aclnnQuantMatmulDequant / aclnnQuantGroupedMatmulDequant (float activations quantized, int8 matmul, dequantised).
//
// Integer products are formed exactly (int64 accumulation) and dequantised in float32, as the cube units
// accumulate; the activation runs in float32 before the single rounding to the output dtype.
#include <ATen/ExpandUtils.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>

#include <string>
#include <vector>

#include "AtenOpSupport.h"
#include "QuantizeSupport.h"

using namespace npu::opslib::aten;

namespace {

// int8 operands as they are; int32 operands carry eight int4 values each along the last dimension.
at::Tensor integerValues(const at::Tensor& t) {
  return (t.scalar_type() == at::kInt ? quant::unpackInt4(t) : t).to(at::kLong);
}

// Shape checks only: the data is read in the kernel, once the stream has produced it.
// A per-channel scale of n columns: (1,) or (n,), also (1, 1) / (1, n).
void checkChannelScale(const char* op, const char* what, const at::Tensor& t, int64_t n) {
  TORCH_CHECK(t.dim() >= 1 && t.dim() <= 2 && (t.dim() == 1 || t.size(0) == 1) &&
                  (t.size(-1) == 1 || t.size(-1) == n),
              op, ": ", what, " must have shape (1,) or (n,) with n = ", n, ", got ", t.sizes());
}

// A per-token scale of m rows: (m,) or (m, 1).
void checkTokenScale(const char* op, const char* what, const at::Tensor& t, int64_t m) {
  TORCH_CHECK((t.dim() == 1 && t.size(0) == m) || (t.dim() == 2 && t.size(0) == m && t.size(1) == 1), op, ": ",
              what, " must have shape (m,) or (m, 1) with m = ", m, ", got ", t.sizes());
}

bool isFloatingScale(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf;
}

// The activations of the dequantising matmuls quantized to int8: xs = x [* smooth]; scale = given (one per tensor or
// per row) or amax|xs| per row / 127; q = saturate(rint(xs * (1 / scale) [+ offset])). `values` holds q [- offset]
// exactly (double), ready to multiply; `scale` is a float32 column.
struct QuantizedActivations {
  at::Tensor values;
  at::Tensor scale;
};

QuantizedActivations quantizeActivations(const at::Tensor& x, const at::Tensor& smooth, const at::Tensor& scale,
                                         const at::Tensor& offset) {
  at::Tensor v = x.to(at::kFloat);
  if (smooth.defined()) v = v * smooth.to(at::kFloat);
  at::Tensor s = scale.defined() ? scale.to(at::kFloat).reshape({-1, 1})
                                 : at::amax(v.abs(), {-1}, /*keepdim=*/true) * quant::reciprocalF32(127);
  at::Tensor shifted = v * at::reciprocal(s);
  const at::Tensor shift = offset.defined() ? offset.to(at::kFloat).reshape({-1, 1}) : at::Tensor();
  if (shift.defined()) shifted = shifted + shift;
  at::Tensor q = quant::saturate(at::round(shifted), -128, 127);  // double, exact integers
  if (shift.defined()) q = q - shift.to(at::kDouble);
  return {q, s};
}

}  // namespace

// out = gelu((x1 @ x2 [+ int32 bias]) * x1Scale[m, 1] * x2Scale[n] [+ float bias]), gelu by fusedOpType.
extern "C" NOP_API aclnnStatus aclnnFusedQuantMatmulGetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* x1Scale, const aclTensor* x2Scale,
    const aclTensor* yScaleOptional, const aclTensor* x1OffsetOptional, const aclTensor* x2OffsetOptional,
    const aclTensor* yOffsetOptional, const aclTensor* biasOptional, const aclTensor* x3Optional, char* fusedOpType,
    int64_t groupSize, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnFusedQuantMatmul", workspaceSize, executor, [&] {
    const char* op = "aclnnFusedQuantMatmul";
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2");
    at::Tensor s1 = requiredTensor(x1Scale, "x1Scale"), s2 = requiredTensor(x2Scale, "x2Scale");
    at::Tensor bi = hostTensor(biasOptional), o = requiredTensor(out, "out");
    // Only the GELU fusion exists on the software NPU; the other optional operands belong to other fusions.
    TORCH_CHECK(hostTensor(yScaleOptional).defined() == false && hostTensor(x1OffsetOptional).defined() == false &&
                    hostTensor(x2OffsetOptional).defined() == false && hostTensor(yOffsetOptional).defined() == false &&
                    hostTensor(x3Optional).defined() == false,
                op, ": yScale, x1Offset, x2Offset, yOffset and x3 are not taken by the gelu fusion; pass NULL");
    const std::string mode = fusedOpType == nullptr ? "" : fusedOpType;
    TORCH_CHECK(mode == "gelu_erf" || mode == "gelu_tanh", op, ": fusedOpType must be \"gelu_erf\" or \"gelu_tanh\", "
                "got \"", mode, "\"");
    TORCH_CHECK(groupSize == 0, op, ": groupSize must be 0 (no block-wise quantization), got ", groupSize);
    TORCH_CHECK(a.scalar_type() == b.scalar_type() && (a.scalar_type() == at::kChar || a.scalar_type() == at::kInt),
                op, ": x1 and x2 must both be int8 (or int32 carrying int4), got ", a.scalar_type(), " and ",
                b.scalar_type());
    TORCH_CHECK(a.dim() >= 2 && b.dim() >= 2, op, ": x1 and x2 must be at least 2-D, got ", a.sizes(), " and ",
                b.sizes());
    const int64_t pack = a.scalar_type() == at::kInt ? 8 : 1;
    TORCH_CHECK(a.size(-1) * pack == b.size(-2), op, ": x1 ", a.sizes(), " and x2 ", b.sizes(),
                " do not multiply (k differs)");
    const int64_t m = a.size(-2), n = b.size(-1) * pack;
    TORCH_CHECK(isFloatingScale(s1) && isFloatingScale(s2), op,
                ": x1Scale and x2Scale must be float32, float16 or bfloat16, got ", s1.scalar_type(), " and ",
                s2.scalar_type());
    checkTokenScale(op, "x1Scale", s1, m);
    checkChannelScale(op, "x2Scale", s2, n);
    TORCH_CHECK(!bi.defined() || bi.scalar_type() == at::kInt || isFloatingScale(bi), op,
                ": bias must be int32, float32, float16 or bfloat16, got ", bi.scalar_type());
    TORCH_CHECK(!bi.defined() || (bi.dim() >= 1 && bi.size(-1) == n), op, ": bias must end in n = ", n, ", got ",
                bi.sizes());
    TORCH_CHECK(o.scalar_type() == at::kHalf || o.scalar_type() == at::kBFloat16 || o.scalar_type() == at::kFloat, op,
                ": out must be float16, bfloat16 or float32, got ", o.scalar_type());
    std::vector<int64_t> shape = at::infer_size(a.sizes().slice(0, a.dim() - 2), b.sizes().slice(0, b.dim() - 2));
    shape.push_back(m);
    shape.push_back(n);
    TORCH_CHECK(o.sizes().equals(shape), op, ": out must have shape ", at::IntArrayRef(shape), ", got ", o.sizes());
    const std::string gelu_mode = mode == "gelu_tanh" ? "tanh" : "none";
    return Prepared{{a, b, s1, s2, bi}, [=]() mutable {
                      at::Tensor acc = at::matmul(integerValues(a), integerValues(b));
                      const bool int_bias = bi.defined() && bi.scalar_type() == at::kInt;
                      if (int_bias) acc = acc + bi.to(at::kLong);
                      // x1Scale scales output rows (tokens), x2Scale output columns (channels).
                      const at::Tensor row_scale = s1.reshape({m, 1}).to(at::kFloat);
                      const at::Tensor col_scale = s2.reshape({s2.size(-1)}).to(at::kFloat);
                      at::Tensor v = acc.to(at::kFloat) * row_scale * col_scale;
                      if (bi.defined() && !int_bias) v = v + bi.to(at::kFloat);
                      o.copy_(at::gelu(v, gelu_mode).to(o.scalar_type()));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(FusedQuantMatmul, "x1, x2, x1Scale, x2Scale, yScaleOptional, x1OffsetOptional, x2OffsetOptional, yOffsetOptional, biasOptional, x3Optional, fusedOpType, groupSize, out");

// out = sum over dims (the batch) of (x1_b @ x2_b) * x1Scale[b, m, 1] * x2Scale[n]. x2 arrives in NZ on the
// chip; hostTensor hands the kernel its logical (batch, k, n) values either way.
extern "C" NOP_API aclnnStatus aclnnQuantMatmulReduceSumWeightNzGetWorkspaceSize(
    const aclTensor* x1, const aclTensor* x2, const aclTensor* x1Scale, const aclTensor* x2Scale,
    const aclTensor* yScale, const aclTensor* x1Offset, const aclTensor* x2Offset, const aclTensor* yOffset,
    const aclTensor* bias, bool transposeX1, bool transposeX2, int64_t groupSize, const aclIntArray* dims,
    bool keepDims, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnQuantMatmulReduceSumWeightNz", workspaceSize, executor, [&] {
    const char* op = "aclnnQuantMatmulReduceSumWeightNz";
    at::Tensor a = requiredTensor(x1, "x1"), b = requiredTensor(x2, "x2");
    at::Tensor s1 = requiredTensor(x1Scale, "x1Scale"), s2 = requiredTensor(x2Scale, "x2Scale");
    at::Tensor o = requiredTensor(out, "out");
    TORCH_CHECK(!hostTensor(yScale).defined() && !hostTensor(x1Offset).defined() && !hostTensor(x2Offset).defined() &&
                    !hostTensor(yOffset).defined() && !hostTensor(bias).defined(),
                op, ": yScale, x1Offset, x2Offset, yOffset and bias are not supported; pass NULL");
    TORCH_CHECK(!transposeX1 && !transposeX2, op, ": transposed operands are not supported");
    TORCH_CHECK(groupSize == -1 || groupSize == 0, op, ": groupSize must be -1 (no groups), got ", groupSize);
    const std::vector<int64_t> reduce = intArray(dims);
    TORCH_CHECK(reduce.size() == 1 && reduce[0] == 0 && !keepDims, op,
                ": only the sum over dimension 0 without keepDims is supported");
    TORCH_CHECK(a.scalar_type() == at::kChar && b.scalar_type() == at::kChar, op, ": x1 and x2 must be int8, got ",
                a.scalar_type(), " and ", b.scalar_type());
    TORCH_CHECK(a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1), op,
                ": x1 (batch, m, k) and x2 (batch, k, n) must share batch and k, got ", a.sizes(), " and ", b.sizes());
    const int64_t batch = a.size(0), m = a.size(1), n = b.size(2);
    TORCH_CHECK(s1.scalar_type() == at::kFloat && s1.dim() == 2 && s1.size(0) == batch && s1.size(1) == m, op,
                ": x1Scale must be float32 (batch, m) = (", batch, ", ", m, "), got ", s1.scalar_type(), " ",
                s1.sizes());
    TORCH_CHECK(s2.scalar_type() == at::kBFloat16 && s2.dim() == 1 && s2.size(0) == n, op,
                ": x2Scale must be bfloat16 (n,) = (", n, ",), got ", s2.scalar_type(), " ", s2.sizes());
    TORCH_CHECK(o.scalar_type() == at::kBFloat16 && o.dim() == 2 && o.size(0) == m && o.size(1) == n, op,
                ": out must be bfloat16 (m, n) = (", m, ", ", n, "), got ", o.scalar_type(), " ", o.sizes());
    return Prepared{{a, b, s1, s2}, [=]() mutable {
                      // Each batch's exact integer product is dequantised in float32 before the batch sum.
                      const at::Tensor acc = at::matmul(a.to(at::kLong), b.to(at::kLong)).to(at::kFloat);
                      const at::Tensor scaled = acc * s1.to(at::kFloat).unsqueeze(-1) * s2.to(at::kFloat);
                      o.copy_(scaled.sum(0).to(at::kBFloat16));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(QuantMatmulReduceSumWeightNz, "x1, x2, x1Scale, x2Scale, yScale, x1Offset, x2Offset, yOffset, bias, transposeX1, transposeX2, groupSize, dims, keepDims, out");

// v = x with every K-wide block of its last dimension multiplied by rotation (float32 accumulation, rounded to x's
// dtype as the matmul stores it); then per row: scale = amax|v| * (1 / DMAX), y = round(v * (DMAX / amax)) with
// DMAX 127 (int8 y) or 7 (int32 y carrying eight int4). alpha, scaleAlg and dstTypeMax only serve mx targets.
extern "C" NOP_API aclnnStatus aclnnRotateQuantGetWorkspaceSize(const aclTensor* x, const aclTensor* rotation,
                                                               const aclTensor* alphaOptional, int64_t axis,
                                                               char* roundMode, int64_t scaleAlg, double dstTypeMax,
                                                               bool transposeY, aclTensor* yOut, aclTensor* scaleOut,
                                                               uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnRotateQuant", workspaceSize, executor, [&] {
    const char* op = "aclnnRotateQuant";
    at::Tensor xt = requiredTensor(x, "x"), rot = requiredTensor(rotation, "rotation");
    at::Tensor y = requiredTensor(yOut, "yOut"), scale = requiredTensor(scaleOut, "scaleOut");
    TORCH_CHECK(!hostTensor(alphaOptional).defined(), op, ": alpha only serves the mx targets; pass NULL");
    TORCH_CHECK(scaleAlg == 0 && dstTypeMax == 0.0 && !transposeY, op,
                ": scaleAlg must be 0, dstTypeMax 0.0 and transposeY false");
    const std::string mode = roundMode == nullptr ? "rint" : roundMode;
    TORCH_CHECK(mode == "rint" || mode == "round" || mode == "floor", op,
                ": roundMode must be \"rint\", \"round\" or \"floor\", got \"", mode, "\"");
    TORCH_CHECK((xt.scalar_type() == at::kHalf || xt.scalar_type() == at::kBFloat16) &&
                    rot.scalar_type() == xt.scalar_type(),
                op, ": x and rotation must both be float16 or both bfloat16, got ", xt.scalar_type(), " and ",
                rot.scalar_type());
    TORCH_CHECK(xt.dim() == 2 && (axis == -1 || axis == 1), op, ": x must be 2-D, quantized along axis -1, got ",
                xt.sizes(), " and axis ", axis);
    TORCH_CHECK(rot.dim() == 2 && rot.size(0) == rot.size(1) && rot.size(0) > 0 && xt.size(1) % rot.size(0) == 0, op,
                ": rotation must be (K, K) with K dividing x's last dimension, got ", rot.sizes(), " for x ",
                xt.sizes());
    const int64_t dst_code = y.scalar_type() == at::kInt ? quant::kAclInt32 : quant::kAclInt8;
    const quant::IntGrid grid = quant::packedGrid(op, dst_code, y, xt.sizes());
    TORCH_CHECK(scale.scalar_type() == at::kFloat && scale.dim() == 1 && scale.size(0) == xt.size(0), op,
                ": scaleOut must be float32 (", xt.size(0), ",), got ", scale.scalar_type(), " ", scale.sizes());
    const int64_t k = rot.size(0);
    return Prepared{{xt, rot}, [=]() mutable {
                      const at::Tensor blocks = xt.to(at::kFloat).reshape({-1, k});
                      const at::Tensor rotated =
                          at::matmul(blocks, rot.to(at::kFloat)).reshape(xt.sizes()).to(xt.scalar_type());
                      const at::Tensor v = rotated.to(at::kFloat);
                      const at::Tensor top = at::amax(v.abs(), {-1}, /*keepdim=*/true);
                      scale.copy_((top * quant::reciprocalF32(grid.hi)).reshape(scale.sizes()));
                      quant::store(y, quant::roundBy(v * quant::over(grid.hi, top), mode), grid);
                    },
                    {y, scale}};
  });
}
NPU_ATEN_OP(RotateQuant, "x, rotation, alphaOptional, axis, roundMode, scaleAlg, dstTypeMax, transposeY, yOut, scaleOut");

// out = (x [+ int32 bias]) * weightScale[n] [* activateScale[m]] [+ float bias], in float32, rounded once to the
// output type (outputDtype: aclDataType 1 float16 or 27 bfloat16, which must match out).
extern "C" NOP_API aclnnStatus aclnnDequantBiasGetWorkspaceSize(const aclTensor* x, const aclTensor* weightScale,
                                                               const aclTensor* activateScaleOptional,
                                                               const aclTensor* biasOptional, int64_t outputDtype,
                                                               aclTensor* out, uint64_t* workspaceSize,
                                                               aclOpExecutor** executor) {
  return prepareOp("aclnnDequantBias", workspaceSize, executor, [&] {
    const char* op = "aclnnDequantBias";
    at::Tensor xt = requiredTensor(x, "x"), ws = requiredTensor(weightScale, "weightScale");
    at::Tensor as = hostTensor(activateScaleOptional), bi = hostTensor(biasOptional), o = requiredTensor(out, "out");
    TORCH_CHECK(xt.scalar_type() == at::kInt && xt.dim() == 2, op, ": x must be int32 (m, n), got ",
                xt.scalar_type(), " ", xt.sizes());
    const int64_t m = xt.size(0), n = xt.size(1);
    TORCH_CHECK(isFloatingScale(ws) && ws.dim() == 1 && ws.size(0) == n, op,
                ": weightScale must be a float (n,) = (", n, ",) tensor, got ", ws.scalar_type(), " ", ws.sizes());
    TORCH_CHECK(!as.defined() || (as.scalar_type() == at::kFloat && as.dim() == 1 && as.size(0) == m), op,
                ": activateScale must be float32 (m,) = (", m, ",), got ", as.sizes());
    TORCH_CHECK(!bi.defined() || ((bi.scalar_type() == at::kInt || isFloatingScale(bi)) && bi.dim() == 1 &&
                                  bi.size(0) == n),
                op, ": bias must be int32, float32, float16 or bfloat16 (n,) = (", n, ",), got ", bi.sizes());
    const at::ScalarType expected = outputDtype == 27 ? at::kBFloat16 : at::kHalf;
    TORCH_CHECK((outputDtype == 1 || outputDtype == 27) && o.scalar_type() == expected && o.sizes().equals(xt.sizes()),
                op, ": outputDtype must be 1 (float16) or 27 (bfloat16) and out x's shape in that dtype, got ",
                outputDtype, " and ", o.scalar_type(), " ", o.sizes());
    return Prepared{{xt, ws, as, bi}, [=]() mutable {
                      const bool int_bias = bi.defined() && bi.scalar_type() == at::kInt;
                      // An int32 bias joins the integer accumulator before scaling, exactly (int64).
                      at::Tensor acc = int_bias ? xt.to(at::kLong) + bi.to(at::kLong) : xt;
                      at::Tensor v = acc.to(at::kFloat) * ws.to(at::kFloat);
                      if (as.defined()) v = v * as.to(at::kFloat).unsqueeze(-1);
                      if (bi.defined() && !int_bias) v = v + bi.to(at::kFloat);
                      o.copy_(v.to(o.scalar_type()));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(DequantBias, "x, weightScale, activateScaleOptional, biasOptional, outputDtype, out");

// g = gelu(self) in float32 (erf, or tanh with approximate "tanh"). Static: y = round(g * inputScale + inputOffset).
// Dynamic: g' = g [* inputScale], scale = amax|g'| over the last dimension * (1 / 127), y = round(g' / scale);
// inputOffset plays no part there. y saturates to int8; roundMode as the NPU's casts.
extern "C" NOP_API aclnnStatus aclnnGeluQuantGetWorkspaceSize(
    const aclTensor* self, const aclTensor* inputScaleOptional, const aclTensor* inputOffsetOptional, char* approximate,
    char* quantMode, char* roundMode, int64_t dstType, aclTensor* y, aclTensor* outScaleOptional,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnGeluQuant", workspaceSize, executor, [&] {
    const char* op = "aclnnGeluQuant";
    at::Tensor x = requiredTensor(self, "self"), sc = hostTensor(inputScaleOptional);
    at::Tensor off = hostTensor(inputOffsetOptional), out = requiredTensor(y, "y");
    at::Tensor out_scale = hostTensor(outScaleOptional);
    const std::string approx = approximate == nullptr ? "none" : approximate;
    const std::string mode = quantMode == nullptr ? "dynamic" : quantMode;
    const std::string rounding = roundMode == nullptr ? "rint" : roundMode;
    TORCH_CHECK(approx == "none" || approx == "tanh", op, ": approximate must be \"none\" or \"tanh\", got \"", approx,
                "\"");
    TORCH_CHECK(mode == "static" || mode == "dynamic", op, ": quantMode must be \"static\" or \"dynamic\", got \"",
                mode, "\"");
    TORCH_CHECK(quant::isRoundMode(rounding), op, ": unknown roundMode \"", rounding, "\"");
    TORCH_CHECK(isFloatingScale(x) && x.dim() >= 1, op, ": self must be a float tensor, got ", x.scalar_type());
    const quant::IntGrid grid = quant::packedGrid(op, dstType, out, x.sizes());
    TORCH_CHECK(grid.pack == 1, op, ": dstType must be 2 (int8), got ", dstType);
    const int64_t channels = x.size(-1);
    for (const at::Tensor& p : {sc, off}) {
      TORCH_CHECK(!p.defined() || (p.dim() == 1 && (p.size(0) == channels || p.size(0) == 1)), op,
                  ": inputScale / inputOffset must be (", channels, ",) or (1,), got ", p.sizes());
    }
    if (mode == "static") {
      TORCH_CHECK(sc.defined() && !out_scale.defined(), op, ": static mode needs inputScale and takes no outScale");
    } else {
      TORCH_CHECK(out_scale.defined() && out_scale.scalar_type() == at::kFloat &&
                      out_scale.sizes().equals(x.sizes().slice(0, x.dim() - 1)),
                  op, ": dynamic mode needs a float32 outScale of self's shape without the last dimension");
    }
    return Prepared{{x, sc, off}, [=]() mutable {
                      at::Tensor g = at::gelu(x.to(at::kFloat), approx);
                      if (mode == "static") {
                        at::Tensor v = g * sc.to(at::kFloat);
                        if (off.defined()) v = v + off.to(at::kFloat);
                        quant::store(out, quant::roundBy(v, rounding), grid);
                        return;
                      }
                      if (sc.defined()) g = g * sc.to(at::kFloat);
                      const at::Tensor top = at::amax(g.abs(), {-1}, /*keepdim=*/true);
                      const at::Tensor s = top * quant::reciprocalF32(grid.hi);
                      out_scale.copy_(s.squeeze(-1));
                      quant::store(out, quant::roundBy(g / s, rounding), grid);
                    },
                    {out, out_scale}};
  });
}
NPU_ATEN_OP(GeluQuant, "self, inputScaleOptional, inputOffsetOptional, approximate, quantMode, roundMode, dstType, y, outScaleOptional");

// xs = x [* smoothScale[k]]; s = xScale (pertensor: (1,); pertoken: (m,)) or, without xScale in pertoken mode,
// amax|xs| per row / 127; xq = saturate(rint(xs * (1 / s) [+ xOffset])) int8;
// out = ((xq [- xOffset]) @ W^T [+ int32 bias]) * weightScale[n] * s [+ float bias], in x's dtype.
extern "C" NOP_API aclnnStatus aclnnQuantMatmulDequantGetWorkspaceSize(
    const aclTensor* x, const aclTensor* quantizedWeight, const aclTensor* weightScale, const aclTensor* biasOptional,
    const aclTensor* xScaleOptional, const aclTensor* xOffsetOptional, const aclTensor* smoothScaleOptional,
    char* xQuantMode, bool transposeWeight, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnQuantMatmulDequant", workspaceSize, executor, [&] {
    const char* op = "aclnnQuantMatmulDequant";
    at::Tensor xt = requiredTensor(x, "x"), w = requiredTensor(quantizedWeight, "quantizedWeight");
    at::Tensor ws = requiredTensor(weightScale, "weightScale"), bi = hostTensor(biasOptional);
    at::Tensor xs = hostTensor(xScaleOptional), xo = hostTensor(xOffsetOptional);
    at::Tensor sm = hostTensor(smoothScaleOptional), o = requiredTensor(out, "out");
    const std::string mode = xQuantMode == nullptr ? "pertoken" : xQuantMode;
    TORCH_CHECK(mode == "pertoken" || mode == "pertensor", op, ": xQuantMode must be \"pertoken\" or \"pertensor\", "
                "got \"", mode, "\"");
    TORCH_CHECK(isFloatingScale(xt) && xt.dim() == 2, op, ": x must be a 2-D float tensor, got ", xt.scalar_type(),
                " ", xt.sizes());
    TORCH_CHECK(w.scalar_type() == at::kChar && w.dim() == 2, op, ": quantizedWeight must be 2-D int8, got ",
                w.scalar_type(), " ", w.sizes());
    at::Tensor wk = transposeWeight ? w.transpose(0, 1) : w;  // (k, n)
    const int64_t m = xt.size(0), k = xt.size(1), n = wk.size(1);
    TORCH_CHECK(wk.size(0) == k, op, ": x ", xt.sizes(), " and quantizedWeight ", w.sizes(), " do not multiply");
    TORCH_CHECK(isFloatingScale(ws) && ws.dim() == 1 && ws.size(0) == n, op, ": weightScale must be float (", n,
                ",), got ", ws.sizes());
    TORCH_CHECK(!bi.defined() || ((bi.scalar_type() == at::kInt || isFloatingScale(bi)) && bi.dim() == 1 &&
                                  bi.size(0) == n),
                op, ": bias must be (", n, ",), got ", bi.sizes());
    TORCH_CHECK(!sm.defined() || (isFloatingScale(sm) && sm.dim() == 1 && sm.size(0) == k), op,
                ": smoothScale must be float (", k, ",), got ", sm.sizes());
    const int64_t scale_len = mode == "pertensor" ? 1 : m;
    TORCH_CHECK(mode == "pertoken" || xs.defined(), op, ": pertensor mode needs xScale");
    TORCH_CHECK(!xs.defined() || (isFloatingScale(xs) && xs.dim() == 1 && xs.size(0) == scale_len), op,
                ": xScale must be float (", scale_len, ",) in ", mode, " mode, got ", xs.sizes());
    TORCH_CHECK(!xo.defined() || (xs.defined() && xo.dim() == 1 && xo.size(0) == scale_len), op,
                ": xOffset needs xScale and must have its shape, got ", xo.sizes());
    TORCH_CHECK(o.scalar_type() == xt.scalar_type() && o.dim() == 2 && o.size(0) == m && o.size(1) == n, op,
                ": out must be x's dtype (", m, ", ", n, "), got ", o.scalar_type(), " ", o.sizes());
    return Prepared{{xt, w, ws, bi, xs, xo, sm}, [=]() mutable {
                      const QuantizedActivations qa = quantizeActivations(xt, sm, xs, xo);
                      const at::Tensor& xq = qa.values;
                      const at::Tensor& s = qa.scale;
                      at::Tensor acc = at::matmul(xq, wk.to(at::kDouble));
                      const bool int_bias = bi.defined() && bi.scalar_type() == at::kInt;
                      if (int_bias) acc = acc + bi.to(at::kDouble);
                      at::Tensor y = acc.to(at::kFloat) * ws.to(at::kFloat) * s;
                      if (bi.defined() && !int_bias) y = y + bi.to(at::kFloat);
                      o.copy_(y.to(o.scalar_type()));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(QuantMatmulDequant, "x, quantizedWeight, weightScale, biasOptional, xScaleOptional, xOffsetOptional, smoothScaleOptional, xQuantMode, transposeWeight, out");

// As aclnnQuantMatmulDequant, with one (n, k) weight, weight scale and bias per group: groupList holds each group's
// cumulative end row; rows past the last end are left zero.
extern "C" NOP_API aclnnStatus aclnnQuantGroupedMatmulDequantGetWorkspaceSize(
    const aclTensor* x, const aclTensor* quantizedWeight, const aclTensor* weightScale, const aclTensor* groupList,
    const aclTensor* biasOptional, const aclTensor* xScaleOptional, const aclTensor* xOffsetOptional,
    const aclTensor* smoothScaleOptional, char* xQuantMode, bool transposeWeight, aclTensor* out,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnQuantGroupedMatmulDequant", workspaceSize, executor, [&] {
    const char* op = "aclnnQuantGroupedMatmulDequant";
    at::Tensor xt = requiredTensor(x, "x"), w = requiredTensor(quantizedWeight, "quantizedWeight");
    at::Tensor ws = requiredTensor(weightScale, "weightScale"), gl = requiredTensor(groupList, "groupList");
    at::Tensor bi = hostTensor(biasOptional), xs = hostTensor(xScaleOptional), xo = hostTensor(xOffsetOptional);
    at::Tensor sm = hostTensor(smoothScaleOptional), o = requiredTensor(out, "out");
    const std::string mode = xQuantMode == nullptr ? "pertoken" : xQuantMode;
    TORCH_CHECK(mode == "pertoken" || mode == "pertensor", op, ": xQuantMode must be \"pertoken\" or \"pertensor\", "
                "got \"", mode, "\"");
    TORCH_CHECK(isFloatingScale(xt) && xt.dim() == 2, op, ": x must be a 2-D float tensor, got ", xt.scalar_type(),
                " ", xt.sizes());
    TORCH_CHECK(w.scalar_type() == at::kChar && w.dim() == 3, op, ": quantizedWeight must be 3-D int8 (groups, n, k), "
                "got ", w.scalar_type(), " ", w.sizes());
    at::Tensor wk = transposeWeight ? w.transpose(1, 2) : w;  // (groups, k, n)
    const int64_t m = xt.size(0), k = xt.size(1), groups = wk.size(0), n = wk.size(2);
    TORCH_CHECK(wk.size(1) == k, op, ": x ", xt.sizes(), " and quantizedWeight ", w.sizes(), " do not multiply");
    TORCH_CHECK((gl.scalar_type() == at::kLong || gl.scalar_type() == at::kInt) && gl.dim() == 1 &&
                    gl.size(0) == groups,
                op, ": groupList must be int64 (", groups, ",) cumulative end rows, got ", gl.sizes());
    TORCH_CHECK(isFloatingScale(ws) && ws.dim() == 2 && ws.size(0) == groups && ws.size(1) == n, op,
                ": weightScale must be float (", groups, ", ", n, "), got ", ws.sizes());
    TORCH_CHECK(!bi.defined() || ((bi.scalar_type() == at::kInt || isFloatingScale(bi)) && bi.dim() == 2 &&
                                  bi.size(0) == groups && bi.size(1) == n),
                op, ": bias must be (", groups, ", ", n, "), got ", bi.sizes());
    TORCH_CHECK(!sm.defined() || (isFloatingScale(sm) && sm.dim() == 1 && sm.size(0) == k), op,
                ": smoothScale must be float (", k, ",), got ", sm.sizes());
    const int64_t scale_len = mode == "pertensor" ? 1 : m;
    TORCH_CHECK(mode == "pertoken" || xs.defined(), op, ": pertensor mode needs xScale");
    TORCH_CHECK(!xs.defined() || (isFloatingScale(xs) && xs.dim() == 1 && xs.size(0) == scale_len), op,
                ": xScale must be float (", scale_len, ",) in ", mode, " mode, got ", xs.sizes());
    TORCH_CHECK(!xo.defined() || (xs.defined() && xo.dim() == 1 && xo.size(0) == scale_len), op,
                ": xOffset needs xScale and must have its shape, got ", xo.sizes());
    TORCH_CHECK(o.scalar_type() == xt.scalar_type() && o.dim() == 2 && o.size(0) == m && o.size(1) == n, op,
                ": out must be x's dtype (", m, ", ", n, "), got ", o.scalar_type(), " ", o.sizes());
    return Prepared{{xt, w, ws, gl, bi, xs, xo, sm}, [=]() mutable {
                      const QuantizedActivations qa = quantizeActivations(xt, sm, xs, xo);
                      const at::Tensor ends = gl.to(at::kLong).contiguous();
                      const int64_t* end_ptr = ends.const_data_ptr<int64_t>();
                      at::Tensor result = at::zeros({m, n}, at::TensorOptions().dtype(at::kFloat));
                      int64_t start = 0;
                      for (int64_t g = 0; g < groups; ++g) {
                        const int64_t end = end_ptr[g];
                        TORCH_CHECK(end >= start && end <= m, op, ": groupList must be non-decreasing cumulative "
                                    "row ends within [0, ", m, "], got ", end, " after ", start);
                        if (end == start) continue;
                        at::Tensor acc = at::matmul(qa.values.narrow(0, start, end - start), wk[g].to(at::kDouble));
                        const bool int_bias = bi.defined() && bi.scalar_type() == at::kInt;
                        if (int_bias) acc = acc + bi[g].to(at::kDouble);
                        const at::Tensor row_scale =
                            qa.scale.size(0) == 1 ? qa.scale : qa.scale.narrow(0, start, end - start);
                        at::Tensor y = acc.to(at::kFloat) * ws[g].to(at::kFloat) * row_scale;
                        if (bi.defined() && !int_bias) y = y + bi[g].to(at::kFloat);
                        result.narrow(0, start, end - start).copy_(y);
                        start = end;
                      }
                      o.copy_(result.to(o.scalar_type()));
                    },
                    {o}};
  });
}
NPU_ATEN_OP(QuantGroupedMatmulDequant, "x, quantizedWeight, weightScale, groupList, biasOptional, xScaleOptional, xOffsetOptional, smoothScaleOptional, xQuantMode, transposeWeight, out");
