// QuantizeOps.cpp - quantization device ops: aclnnDynamicQuantV4 (dynamic, per token / tensor / channel,
// symmetric or with an offset), aclnnQuantize and aclnnAscendQuantV3 (static, dividing or multiplying by scales),
// aclnnAscendAntiQuant, aclnnGroupQuant, aclnnConvertWeightToInt4Pack and aclnnDynamicBlockQuantV2. Arithmetic is
// float32 in the device kernels' order (a reciprocal where they multiply by one, a division where they divide);
// rounding is half to even (CAST_RINT); integer outputs saturate, NaN becomes 0.
#include <ATen/TensorOperators.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/round.h>
#include <ATen/ops/zeros.h>

#include <string>
#include <vector>

#include "AtenOpSupport.h"
#include "QuantizeSupport.h"

using namespace npu::opslib::aten;

namespace {

void checkFloat(const char* op, const char* what, const at::Tensor& t) {
  TORCH_CHECK(quant::isFloat(t), op, ": ", what, " must be float16, bfloat16 or float32, got ", t.scalar_type());
}

// --- aclnnDynamicQuantV4 -------------------------------------------------------------------------------------

// x * smoothScales in float32: one row for every row, or (with groupIndex, cumulative row ends) row g for the rows
// of group g. Rows past the last group are not smoothed (the kernels find no group for them).
at::Tensor smoothRows(const at::Tensor& x, const at::Tensor& smooth, const at::Tensor& groups) {
  const at::Tensor v = x.to(at::kFloat);
  if (!smooth.defined()) return v;
  if (!groups.defined()) return v * smooth.to(at::kFloat).reshape({-1});
  const at::Tensor rows = quant::asRows(v);
  const at::Tensor table = at::cat({smooth.to(at::kFloat), at::ones({1, rows.size(1)}, rows.options())});
  return (rows * table.index_select(0, quant::rowGroups(rows.size(0), groups, false))).reshape(v.sizes());
}

// The dimensions a quant mode reduces over (none listed: all of them) and the scale shape it gives.
std::vector<int64_t> reducedDims(const std::string& mode) {
  if (mode == "pertoken") return {-1};
  if (mode == "perchannel") return {-2};
  return {};
}

std::vector<int64_t> dynamicScaleShape(const std::string& mode, at::IntArrayRef x) {
  std::vector<int64_t> shape = x.vec();
  if (mode == "pertensor") return {1};
  shape.erase(shape.end() - (mode == "pertoken" ? 1 : 2));
  return shape;
}

void checkSmoothing(const char* op, const std::string& mode, const at::Tensor& x, const at::Tensor& smooth,
                    const at::Tensor& groups) {
  TORCH_CHECK(!groups.defined() || smooth.defined(), op, ": groupIndex needs smoothScales");
  TORCH_CHECK(!groups.defined() || mode == "pertoken", op, ": groupIndex is taken in pertoken mode only");
  if (!smooth.defined()) return;
  checkFloat(op, "smoothScales", smooth);
  const int64_t hidden = x.size(-1);
  if (mode == "perchannel") {
    TORCH_CHECK(smooth.dim() <= 2 && smooth.numel() == x.size(-2), op, ": perchannel smoothScales must hold one value ",
                "per row of a matrix (", x.size(-2), "), got ", smooth.sizes());
  } else if (groups.defined()) {
    TORCH_CHECK(groups.scalar_type() == at::kInt || groups.scalar_type() == at::kLong, op,
                ": groupIndex must be int32 or int64, got ", groups.scalar_type());
    TORCH_CHECK(smooth.dim() == 2 && smooth.size(1) == hidden && groups.dim() == 1 && groups.size(0) == smooth.size(0),
                op, ": with groupIndex, smoothScales must be [groups, ", hidden, "] and groupIndex [groups], got ",
                smooth.sizes(), " and ", groups.sizes());
  } else {
    TORCH_CHECK(smooth.numel() == hidden && (smooth.dim() == 1 || (smooth.dim() == 2 && smooth.size(0) == 1)), op,
                ": smoothScales must be [", hidden, "] (x's last dimension), got ", smooth.sizes());
  }
}

}  // namespace

// Symmetric: scale = amax * (1 / DMAX), y = rint(x' * (DMAX / amax)). Asymmetric: scale = max((max - min) /
// (2 DMAX + 1), 1e-12), offset = DMAX - max / scale, y = rint(x' * (1 / scale) + offset). x' = x * smoothScales;
// amax, max and min are taken over a row (pertoken), the whole tensor (pertensor) or a column of each matrix
// (perchannel). DMAX is 127 for int8 and 7 for int4 (dstType 3: eight to an int32; 29: two to an int8). A row of
// zeros quantizes to 0 with scale 0 (symmetric). dstTypeMax only tunes hifloat8, which is refused.
extern "C" NOP_API aclnnStatus aclnnDynamicQuantV4GetWorkspaceSize(
    const aclTensor* x, const aclTensor* smoothScalesOptional, const aclTensor* groupIndexOptional, int64_t dstType,
    bool isSymmetrical, char* quantMode, float dstTypeMax, aclTensor* yOut, aclTensor* scaleOut, aclTensor* offsetOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnDynamicQuantV4", workspaceSize, executor, [&] {
    const char* op = "aclnnDynamicQuantV4";
    at::Tensor xt = requiredTensor(x, "x"), smooth = hostTensor(smoothScalesOptional);
    at::Tensor groups = hostTensor(groupIndexOptional);
    at::Tensor y = requiredTensor(yOut, "yOut"), scale = requiredTensor(scaleOut, "scaleOut");
    at::Tensor offset = hostTensor(offsetOut);
    const std::string mode = quantMode == nullptr ? "pertoken" : quantMode;
    checkFloat(op, "x", xt);
    TORCH_CHECK(xt.dim() >= 2 && xt.dim() <= 8, op, ": x must have 2 to 8 dimensions, got ", xt.sizes());
    TORCH_CHECK(mode == "pertoken" || mode == "pertensor" || mode == "perchannel", op,
                ": quantMode must be 'pertoken', 'pertensor' or 'perchannel', got '", mode, "'");
    checkSmoothing(op, mode, xt, smooth, groups);
    const quant::IntGrid grid = quant::packedGrid(op, dstType, y, xt.sizes());
    const std::vector<int64_t> scale_shape = dynamicScaleShape(mode, xt.sizes());
    TORCH_CHECK(scale.scalar_type() == at::kFloat && scale.sizes().equals(scale_shape), op,
                ": scaleOut must be float32 ", at::IntArrayRef(scale_shape), ", got ", scale.scalar_type(), " ",
                scale.sizes());
    TORCH_CHECK(offset.defined() != isSymmetrical, op, ": offsetOut is ",
                isSymmetrical ? "not taken by symmetric" : "needed by asymmetric", " quantization");
    TORCH_CHECK(!offset.defined() || (offset.scalar_type() == at::kFloat && offset.sizes().equals(scale_shape)), op,
                ": offsetOut must be float32 ", at::IntArrayRef(scale_shape), ", got ", offset.sizes());
    return Prepared{{xt, smooth, groups}, [=]() mutable {
                      if (xt.numel() == 0) {
                        scale.zero_();
                        if (offset.defined()) offset.zero_();
                        return;
                      }
                      const at::Tensor v = mode == "perchannel" && smooth.defined()
                                               ? xt.to(at::kFloat) * smooth.to(at::kFloat).reshape({-1, 1})
                                               : smoothRows(xt, mode == "perchannel" ? at::Tensor() : smooth, groups);
                      const std::vector<int64_t> dims = reducedDims(mode);
                      const double dmax = grid.hi;
                      if (isSymmetrical) {
                        const at::Tensor top = at::amax(v.abs(), dims, /*keepdim=*/true);
                        scale.copy_((top * quant::reciprocalF32(dmax)).reshape(scale.sizes()));
                        quant::store(y, at::round(v * quant::over(dmax, top)), grid);
                        return;
                      }
                      const at::Tensor hi = at::amax(v, dims, /*keepdim=*/true);
                      const at::Tensor lo = at::amin(v, dims, /*keepdim=*/true);
                      const at::Tensor s = at::clamp_min((hi - lo) / (2 * dmax + 1), 1e-12);
                      const at::Tensor shift = dmax - hi / s;
                      scale.copy_(s.reshape(scale.sizes()));
                      offset.copy_(shift.reshape(offset.sizes()));
                      quant::store(y, at::round(v * at::reciprocal(s) + shift), grid);
                    },
                    {y, scale, offset}};
  });
}
NPU_ATEN_OP(DynamicQuantV4, "x, smoothScalesOptional, groupIndexOptional, dstType, isSymmetrical, quantMode, dstTypeMax, yOut, scaleOut, offsetOut");

// --- aclnnQuantize / aclnnAscendQuantV3 ------------------------------------------------------------------------

namespace {

// A per-channel parameter of `count` values laid along dimension `axis` of a `dims`-dimensional tensor.
at::Tensor alongAxis(const at::Tensor& param, int64_t dims, int64_t axis) {
  std::vector<int64_t> shape(static_cast<size_t>(dims), 1);
  if (dims > 0) shape[static_cast<size_t>(axis)] = param.numel();
  return param.reshape(shape);
}

int64_t wrapAxis(const char* op, int64_t axis, int64_t dims) {
  const int64_t n = std::max<int64_t>(dims, 1);
  TORCH_CHECK(axis >= -n && axis < n, op, ": axis ", axis, " is out of range for a ", dims, "-d x");
  return axis < 0 ? axis + n : axis;
}

// The grid of a plain (unpacked) int8 / uint8 / int32 output named by aclDataType `dtype`.
quant::IntGrid plainGrid(const char* op, int64_t dtype, const at::Tensor& out) {
  TORCH_CHECK(!quant::isChipFormat(dtype), op, ": dtype ", dtype,
              " is a chip number format (hifloat8 / float8) the software NPU does not have");
  quant::IntGrid grid;
  at::ScalarType expected = at::kChar;
  if (dtype == quant::kAclUInt8) {
    grid = {0, 255, 1};
    expected = at::kByte;
  } else if (dtype == quant::kAclInt32) {
    grid = {-2147483648.0, 2147483647.0, 1};
    expected = at::kInt;
  } else {
    TORCH_CHECK(dtype == quant::kAclInt8, op, ": dtype must be 2 (int8), 4 (uint8) or 3 (int32), got ", dtype);
  }
  TORCH_CHECK(out.scalar_type() == expected, op, ": out must be ", expected, " for dtype ", dtype, ", got ",
              out.scalar_type());
  return grid;
}

// A scale / offset of aclnnAscendQuantV3: 1-d of one value or x.size(axis) values, or x's rank with every
// dimension 1 but `axis` (1 or x.size(axis)).
void checkAxisParam(const char* op, const char* what, const at::Tensor& p, const at::Tensor& x, int64_t axis) {
  checkFloat(op, what, p);
  const int64_t n = x.dim() == 0 ? 1 : x.size(axis);
  bool ok = p.dim() == 1 && (p.numel() == 1 || p.numel() == n);
  if (p.dim() == x.dim() && p.dim() > 1) {
    ok = true;
    for (int64_t d = 0; d < p.dim(); ++d) ok = ok && (p.size(d) == 1 || (d == axis && p.size(d) == n));
  }
  TORCH_CHECK(ok, op, ": ", what, " must be [1], [", n, "] (x's axis ", axis, ") or x's rank with only that axis ",
              "not 1, got ", p.sizes());
}

at::Tensor broadcastAxisParam(const at::Tensor& p, const at::Tensor& x, int64_t axis) {
  const at::Tensor f = p.to(at::kFloat);
  return f.dim() == x.dim() && f.dim() > 1 ? f : alongAxis(f, x.dim(), axis);
}

}  // namespace

// out = rint(x / scales + zeroPoints) saturated to int8 / uint8 / int32 (dtype); scales and zeroPoints hold one
// value or one per index of x's `axis`.
extern "C" NOP_API aclnnStatus aclnnQuantizeGetWorkspaceSize(const aclTensor* x, const aclTensor* scales,
                                                            const aclTensor* zeroPoints, aclDataType dtype,
                                                            int32_t axis, aclTensor* out, uint64_t* workspaceSize,
                                                            aclOpExecutor** executor) {
  return prepareOp("aclnnQuantize", workspaceSize, executor, [&] {
    const char* op = "aclnnQuantize";
    at::Tensor xt = requiredTensor(x, "x"), s = requiredTensor(scales, "scales"), zp = hostTensor(zeroPoints);
    at::Tensor o = requiredTensor(out, "out");
    checkFloat(op, "x", xt);
    checkFloat(op, "scales", s);
    const int64_t ax = wrapAxis(op, axis, xt.dim());
    const int64_t n = xt.dim() == 0 ? 1 : xt.size(ax);
    TORCH_CHECK(s.dim() <= 1 && (s.numel() == 1 || s.numel() == n), op, ": scales must hold 1 or ", n,
                " values (x's axis ", ax, "), got ", s.sizes());
    TORCH_CHECK(!zp.defined() || zp.numel() == s.numel(), op, ": zeroPoints must have as many values as scales (",
                s.numel(), "), got ", zp.sizes());
    TORCH_CHECK(!zp.defined() || zp.scalar_type() == at::kInt || zp.scalar_type() == at::kChar ||
                    zp.scalar_type() == at::kByte || quant::isFloat(zp),
                op, ": zeroPoints must be int32, int8, uint8 or a float type, got ", zp.scalar_type());
    TORCH_CHECK(o.sizes().equals(xt.sizes()), op, ": out must have x's shape ", xt.sizes(), ", got ", o.sizes());
    const quant::IntGrid grid = plainGrid(op, static_cast<int64_t>(dtype), o);
    return Prepared{{xt, s, zp}, [=]() mutable {
                      at::Tensor v = xt.to(at::kFloat) / alongAxis(s.to(at::kFloat), xt.dim(), ax);
                      if (zp.defined()) v = v + alongAxis(zp.to(at::kFloat), xt.dim(), ax);
                      quant::store(o, at::round(v), grid);
                    },
                    {o}};
  });
}
NPU_ATEN_OP(Quantize, "x, scales, zeroPoints, dtype, axis, out");

// y = round(x * scale [* scale with sqrtMode] + offset) to int8 (dstType 2) or int4 (3: eight to an int32, 29: two
// to an int8). roundMode "round" is the kernel's CAST_RINT (half to even); "floor", "ceil", "trunc" as named.
extern "C" NOP_API aclnnStatus aclnnAscendQuantV3GetWorkspaceSize(const aclTensor* x, const aclTensor* scale,
                                                                 const aclTensor* offset, bool sqrtMode,
                                                                 char* roundMode, int32_t dstType, int32_t axis,
                                                                 aclTensor* y, uint64_t* workspaceSize,
                                                                 aclOpExecutor** executor) {
  return prepareOp("aclnnAscendQuantV3", workspaceSize, executor, [&] {
    const char* op = "aclnnAscendQuantV3";
    at::Tensor xt = requiredTensor(x, "x"), s = requiredTensor(scale, "scale"), off = hostTensor(offset);
    at::Tensor out = requiredTensor(y, "y");
    checkFloat(op, "x", xt);
    const int64_t ax = wrapAxis(op, axis, xt.dim());
    checkAxisParam(op, "scale", s, xt, ax);
    if (off.defined()) {
      checkAxisParam(op, "offset", off, xt, ax);
      TORCH_CHECK(off.sizes().equals(s.sizes()), op, ": offset must have scale's shape ", s.sizes(), ", got ",
                  off.sizes());
    }
    std::string mode = roundMode == nullptr ? "round" : roundMode;
    TORCH_CHECK(mode == "round" || mode == "rint" || mode == "floor" || mode == "ceil" || mode == "trunc", op,
                ": roundMode must be 'round', 'floor', 'ceil' or 'trunc' for integer outputs ('hybrid' is for ",
                "hifloat8), got '", mode, "'");
    if (mode == "round") mode = "rint";  // AscendQuant's "round" casts with CAST_RINT
    const quant::IntGrid grid = quant::packedGrid(op, dstType, out, xt.sizes());
    return Prepared{{xt, s, off}, [=]() mutable {
                      const at::Tensor sc = broadcastAxisParam(s, xt, ax);
                      at::Tensor v = xt.to(at::kFloat) * sc;
                      if (sqrtMode) v = v * sc;
                      if (off.defined()) v = v + broadcastAxisParam(off, xt, ax);
                      quant::store(out, quant::roundBy(v, mode), grid);
                    },
                    {out}};
  });
}
NPU_ATEN_OP(AscendQuantV3, "x, scale, offset, sqrtMode, roundMode, dstType, axis, y");

// --- aclnnAscendAntiQuant --------------------------------------------------------------------------------------

namespace {

at::ScalarType floatTypeOf(const char* op, int64_t dstType) {
  if (dstType == ACL_FLOAT16) return at::kHalf;
  if (dstType == ACL_BF16) return at::kBFloat16;
  TORCH_CHECK(dstType == ACL_FLOAT, op, ": dstType must be 1 (float16), 27 (bfloat16) or 0 (float32), got ", dstType);
  return at::kFloat;
}

// A dequantization parameter for values of shape `values`: one value; 1-d, one per column (or, failing that, one per
// row of the last two dimensions); or of the values' rank with non-1 sizes only in the last two dimensions.
at::Tensor antiQuantParam(const char* op, const char* what, const at::Tensor& p, at::IntArrayRef values) {
  checkFloat(op, what, p);
  const int64_t dims = static_cast<int64_t>(values.size());
  const int64_t cols = dims == 0 ? 1 : values.back(), rows = dims >= 2 ? values[dims - 2] : 1;
  const at::Tensor f = p.to(at::kFloat);
  if (p.dim() <= 1) {
    if (p.numel() == 1 || p.numel() == cols) return f.reshape({-1});
    TORCH_CHECK(dims >= 2 && p.numel() == rows, op, ": ", what, " must hold 1, ", cols, " (columns) or ", rows,
                " (rows) values, got ", p.sizes());
    return f.reshape({rows, 1});
  }
  bool ok = p.dim() == dims;
  for (int64_t d = 0; ok && d < dims; ++d) {
    ok = p.size(d) == 1 || (d >= dims - 2 && p.size(d) == values[d]);
  }
  TORCH_CHECK(ok, op, ": ", what, " ", p.sizes(), " must broadcast to ", values,
              " with non-1 sizes only in the last two dimensions");
  return f;
}

}  // namespace

// y = ((x + offset) * scale [* scale with sqrtMode]) in float32, cast to float16 (dstType 1), bfloat16 (27) or
// float32 (0). x is int8, or int32 carrying eight int4 values each (lowest nibble first).
extern "C" NOP_API aclnnStatus aclnnAscendAntiQuantGetWorkspaceSize(const aclTensor* x, const aclTensor* scale,
                                                                   const aclTensor* offset, int64_t dstType,
                                                                   bool sqrtMode, aclTensor* y,
                                                                   uint64_t* workspaceSize,
                                                                   aclOpExecutor** executor) {
  return prepareOp("aclnnAscendAntiQuant", workspaceSize, executor, [&] {
    const char* op = "aclnnAscendAntiQuant";
    at::Tensor xt = requiredTensor(x, "x"), s = requiredTensor(scale, "scale"), off = hostTensor(offset);
    at::Tensor out = requiredTensor(y, "y");
    const bool int4 = xt.scalar_type() == at::kInt;
    TORCH_CHECK(int4 || xt.scalar_type() == at::kChar, op, ": x must be int8, or int32 carrying eight int4 values ",
                "each, got ", xt.scalar_type());
    TORCH_CHECK(!int4 || xt.dim() >= 1, op, ": int32 (int4) x needs at least one dimension");
    std::vector<int64_t> values = xt.sizes().vec();
    if (int4) values.back() *= 8;
    const at::ScalarType type = floatTypeOf(op, dstType);
    TORCH_CHECK(out.scalar_type() == type && out.sizes().equals(values), op, ": y must be ", type, " ",
                at::IntArrayRef(values), ", got ", out.scalar_type(), " ", out.sizes());
    antiQuantParam(op, "scale", s, values);
    TORCH_CHECK(!off.defined() || off.sizes().equals(s.sizes()), op, ": offset must have scale's shape ", s.sizes(),
                ", got ", off.sizes());
    if (off.defined()) antiQuantParam(op, "offset", off, values);
    return Prepared{{xt, s, off}, [=]() mutable {
                      at::Tensor v = (int4 ? quant::unpackInt4(xt) : xt).to(at::kFloat);
                      const at::Tensor sc = antiQuantParam(op, "scale", s, values);
                      if (off.defined()) v = v + antiQuantParam(op, "offset", off, values);
                      v = v * sc;
                      if (sqrtMode) v = v * sc;
                      out.copy_(v);
                    },
                    {out}};
  });
}
NPU_ATEN_OP(AscendAntiQuant, "x, scale, offset, dstType, sqrtMode, y");

// --- aclnnConvertWeightToInt4Pack ------------------------------------------------------------------------------

// out = the int4 values of weight (the low four bits of each int32) packed eight to an int32 along the last
// dimension, lowest nibble first: the layout aclnnWeightQuantBatchMatmulV2 / aclnnQuantMatmulV4 read. Not an
// Ascend aclnn op (torch_npu packs on the host, outside stream order); named in their style.
extern "C" NOP_API aclnnStatus aclnnConvertWeightToInt4PackGetWorkspaceSize(const aclTensor* weight, aclTensor* out,
                                                                           uint64_t* workspaceSize,
                                                                           aclOpExecutor** executor) {
  return prepareOp("aclnnConvertWeightToInt4Pack", workspaceSize, executor, [&] {
    const char* op = "aclnnConvertWeightToInt4Pack";
    at::Tensor w = requiredTensor(weight, "weight"), o = requiredTensor(out, "out");
    TORCH_CHECK(w.scalar_type() == at::kInt, op, ": weight must be int32 (one int4 value each), got ",
                w.scalar_type());
    TORCH_CHECK(w.dim() >= 1 && w.size(-1) % 8 == 0, op, ": weight's last dimension must be a multiple of 8, got ",
                w.sizes());
    std::vector<int64_t> shape = w.sizes().vec();
    shape.back() /= 8;
    TORCH_CHECK(o.scalar_type() == at::kInt && o.sizes().equals(shape), op, ": out must be int32 ",
                at::IntArrayRef(shape), ", got ", o.scalar_type(), " ", o.sizes());
    return Prepared{{w}, [=]() mutable { o.copy_(quant::packInt4(w, 8)); }, {o}};
  });
}
NPU_ATEN_OP(ConvertWeightToInt4Pack, "weight, out");

// --- aclnnGroupQuant -------------------------------------------------------------------------------------------

// y = rint(x * scale[g] + offset) for the rows of group g: groupIndex holds the groups' cumulative row ends,
// non-decreasing from 0 to x.size(0) (checked when the kernel runs, as the device kernel traps on it). y is int8
// (dstType 2) or int4 (3: eight to an int32; 29: two to an int8).
extern "C" NOP_API aclnnStatus aclnnGroupQuantGetWorkspaceSize(const aclTensor* x, const aclTensor* scale,
                                                              const aclTensor* groupIndex,
                                                              const aclTensor* offsetOptional, int64_t dstType,
                                                              aclTensor* y, uint64_t* workspaceSize,
                                                              aclOpExecutor** executor) {
  return prepareOp("aclnnGroupQuant", workspaceSize, executor, [&] {
    const char* op = "aclnnGroupQuant";
    at::Tensor xt = requiredTensor(x, "x"), s = requiredTensor(scale, "scale");
    at::Tensor groups = requiredTensor(groupIndex, "groupIndex"), off = hostTensor(offsetOptional);
    at::Tensor out = requiredTensor(y, "y");
    checkFloat(op, "x", xt);
    checkFloat(op, "scale", s);
    TORCH_CHECK(xt.dim() == 2, op, ": x must be 2-d [rows, H], got ", xt.sizes());
    TORCH_CHECK(s.dim() == 2 && s.size(0) >= 1 && s.size(1) == xt.size(1), op, ": scale must be [groups, ",
                xt.size(1), "], got ", s.sizes());
    TORCH_CHECK(groups.scalar_type() == at::kInt || groups.scalar_type() == at::kLong, op,
                ": groupIndex must be int32 or int64, got ", groups.scalar_type());
    TORCH_CHECK(groups.dim() == 1 && groups.size(0) == s.size(0), op, ": groupIndex must be [", s.size(0),
                "] (one end per scale row), got ", groups.sizes());
    TORCH_CHECK(!off.defined() || (quant::isFloat(off) && off.numel() == 1), op,
                ": offset must be a float tensor of one value, got ", off.sizes());
    const quant::IntGrid grid = quant::packedGrid(op, dstType, out, xt.sizes());
    return Prepared{{xt, s, groups, off}, [=]() mutable {
                      const at::Tensor ends = groups.to(at::kLong).contiguous();
                      const int64_t* e = ends.const_data_ptr<int64_t>();
                      const int64_t rows = xt.size(0);
                      for (int64_t i = 0; i < ends.numel(); ++i) {
                        TORCH_CHECK(e[i] >= (i == 0 ? 0 : e[i - 1]) && e[i] <= rows, op,
                                    ": groupIndex must be non-decreasing within [0, ", rows, "], got ", ends);
                      }
                      TORCH_CHECK(e[ends.numel() - 1] == rows, op, ": groupIndex's last value must be x's rows (",
                                  rows, "), got ", e[ends.numel() - 1]);
                      const at::Tensor group = quant::rowGroups(rows, ends, /*counts=*/false);
                      at::Tensor v = xt.to(at::kFloat) * s.to(at::kFloat).index_select(0, group);
                      if (off.defined()) v = v + off.to(at::kFloat).reshape({});
                      quant::store(out, at::round(v), grid);
                    },
                    {out}};
  });
}
NPU_ATEN_OP(GroupQuant, "x, scale, groupIndex, offsetOptional, dstType, y");

// --- aclnnDynamicBlockQuantV2 ----------------------------------------------------------------------------------

// Over blocks of rowBlockSize x colBlockSize of the last two dimensions (edge blocks are partial): amax of |x|,
// scale = amax * (1 / 127) lowered to 1 / minScale, m = (1 / amax) * 127 raised to minScale (minScale > 0),
// y = rint(x * m) as int8. dstTypeMax only tunes hifloat8 (refused).
extern "C" NOP_API aclnnStatus aclnnDynamicBlockQuantV2GetWorkspaceSize(const aclTensor* x, double minScale,
                                                                       char* roundModeOptional, int64_t dstType,
                                                                       int64_t rowBlockSize, int64_t colBlockSize,
                                                                       double dstTypeMax, aclTensor* yOut,
                                                                       aclTensor* scaleOut, uint64_t* workspaceSize,
                                                                       aclOpExecutor** executor) {
  return prepareOp("aclnnDynamicBlockQuantV2", workspaceSize, executor, [&] {
    const char* op = "aclnnDynamicBlockQuantV2";
    at::Tensor xt = requiredTensor(x, "x"), y = requiredTensor(yOut, "yOut");
    at::Tensor scale = requiredTensor(scaleOut, "scaleOut");
    const std::string mode = roundModeOptional == nullptr ? "rint" : roundModeOptional;
    checkFloat(op, "x", xt);
    TORCH_CHECK(xt.dim() == 2 || xt.dim() == 3, op, ": x must be 2-d [M, N] or 3-d [B, M, N], got ", xt.sizes());
    TORCH_CHECK(!quant::isChipFormat(dstType), op, ": dstType ", dstType,
                " is a chip number format (hifloat8 / float8) the software NPU does not have");
    TORCH_CHECK(dstType == quant::kAclInt8, op, ": dstType must be 2 (int8), got ", dstType);
    TORCH_CHECK(mode == "rint", op, ": roundMode must be 'rint' for int8, got '", mode, "'");
    TORCH_CHECK(minScale >= 0, op, ": minScale must not be negative, got ", minScale);
    TORCH_CHECK(rowBlockSize > 0 && colBlockSize > 0, op, ": block sizes must be positive, got ", rowBlockSize, " x ",
                colBlockSize);
    const int64_t rows = xt.size(-2), cols = xt.size(-1);
    const int64_t row_blocks = (rows + rowBlockSize - 1) / rowBlockSize;
    const int64_t col_blocks = (cols + colBlockSize - 1) / colBlockSize;
    std::vector<int64_t> scale_shape = xt.sizes().vec();
    scale_shape[scale_shape.size() - 2] = row_blocks;
    scale_shape.back() = col_blocks;
    TORCH_CHECK(y.scalar_type() == at::kChar && y.sizes().equals(xt.sizes()), op, ": yOut must be int8 ", xt.sizes(),
                ", got ", y.scalar_type(), " ", y.sizes());
    TORCH_CHECK(scale.scalar_type() == at::kFloat && scale.sizes().equals(scale_shape), op,
                ": scaleOut must be float32 ", at::IntArrayRef(scale_shape), ", got ", scale.sizes());
    return Prepared{{xt}, [=]() mutable {
                      if (xt.numel() == 0) return;
                      const at::Tensor xf = xt.to(at::kFloat);
                      const at::Tensor padded = at::constant_pad_nd(
                          xf.abs(), {0, col_blocks * colBlockSize - cols, 0, row_blocks * rowBlockSize - rows}, 0);
                      std::vector<int64_t> blocked(xf.sizes().begin(), xf.sizes().end() - 2);
                      blocked.insert(blocked.end(), {row_blocks, rowBlockSize, col_blocks, colBlockSize});
                      const at::Tensor top = at::amax(padded.reshape(blocked), {-3, -1});
                      at::Tensor s = top * quant::reciprocalF32(127.0);
                      at::Tensor m = at::reciprocal(top) * 127.0;
                      if (minScale > 0) {
                        s = at::clamp_max(s, quant::reciprocalF32(minScale));
                        m = at::clamp_min(m, minScale);
                      }
                      scale.copy_(s);
                      const at::Tensor per_element = at::repeat_interleave(at::repeat_interleave(m, rowBlockSize, -2),
                                                                           colBlockSize, -1)
                                                         .narrow(-2, 0, rows)
                                                         .narrow(-1, 0, cols);
                      quant::store(y, at::round(xf * per_element), quant::int8Grid());
                    },
                    {y, scale}};
  });
}
NPU_ATEN_OP(DynamicBlockQuantV2, "x, minScale, roundModeOptional, dstType, rowBlockSize, colBlockSize, dstTypeMax, yOut, scaleOut");
