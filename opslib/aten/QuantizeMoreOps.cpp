// QuantizeMoreOps.cpp - more quantization device ops: aclnnRmsNormQuantV3 (rms norm, then static int8 / int4
// quantization, optional rstd), aclnnFlatQuantV2 (two Kronecker factor matmuls, then dynamic int4 per batch),
// aclnnQuantMax / aclnnGroupedQuantMax (static quantization with the |x| maximum, per row group),
// aclnnGroupedDynamicBlockQuantV2 (dynamic block quantization within row groups) and aclnnMoeInitRoutingQuantV2
// (MoE token expansion by expert with static or dynamic int8 quantization). Float32 arithmetic; rounding half to
// even (CAST_RINT) unless a round mode says otherwise; integer outputs saturate. QuantMax also stores float8 and
// hifloat8; the other ops refuse the chip formats (float8, hifloat8, float4).
#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bincount.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/round.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <string>
#include <vector>

#include "AtenOpSupport.h"
#include "QuantizeSupport.h"

using namespace npu::opslib::aten;

namespace {

void checkFloat(const char* op, const char* what, const at::Tensor& t) {
  TORCH_CHECK(quant::isFloat(t), op, ": ", what, " must be float16, bfloat16 or float32, got ", t.scalar_type());
}

// Int8 is the only target of these ops the software NPU stores (besides FlatQuant's and RmsNormQuantV3's int4):
// chip formats get their own message.
void checkInt8Target(const char* op, int64_t dstType) {
  TORCH_CHECK(!quant::isChipFormat(dstType), op, ": dstType ", dstType,
              " is a chip number format (hifloat8 / float8 / float4) the software NPU does not have");
  TORCH_CHECK(dstType == quant::kAclInt8, op, ": dstType must be 2 (int8), got ", dstType);
}

// Cumulative row ends of groups (groupList[g] = one past group g's last row): checked when the kernel runs, as
// they are data. Non-decreasing, within [0, rows], the last one `rows` when `cover` is set.
std::vector<int64_t> groupEnds(const char* op, const at::Tensor& groupList, int64_t rows, bool cover) {
  const at::Tensor e = groupList.to(at::kLong).contiguous();
  std::vector<int64_t> ends(e.const_data_ptr<int64_t>(), e.const_data_ptr<int64_t>() + e.numel());
  for (size_t g = 0; g < ends.size(); ++g) {
    TORCH_CHECK(ends[g] >= (g == 0 ? 0 : ends[g - 1]) && ends[g] <= rows, op, ": groupList must be non-decreasing ",
                "cumulative row ends within [0, ", rows, "], got ", e);
  }
  TORCH_CHECK(!cover || ends.empty() || ends.back() == rows, op, ": groupList's last value must be the number of ",
              "rows (", rows, "), got ", ends.empty() ? 0 : ends.back());
  return ends;
}

}  // namespace

// --- aclnnRmsNormQuantV3 ---------------------------------------------------------------------------------------

// rstd = 1 / sqrt(mean(x^2 over the last dimension) + epsilon); v = x * rstd * gamma (+ beta); y = rint(v / scale
// (+ offset)) with divMode, rint(v * scale (+ offset)) without; int8, or int4 packed eight to an int32 when y is
// int32; a hifloat8 / float8 y takes v / scale (+ offset) in its own rounding. scale / offset hold one value or
// gamma's. rstdOut ([..., 1] float32) is written when outputRstd is set.
extern "C" NOP_API aclnnStatus aclnnRmsNormQuantV3GetWorkspaceSize(
    const aclTensor* x, const aclTensor* gamma, const aclTensor* scale, const aclTensor* offsetOptional,
    const aclTensor* betaOptional, double epsilon, bool divMode, bool outputRstd, aclTensor* yOut,
    aclTensor* rstdOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnRmsNormQuantV3", workspaceSize, executor, [&] {
    const char* op = "aclnnRmsNormQuantV3";
    at::Tensor xt = requiredTensor(x, "x"), g = requiredTensor(gamma, "gamma"), s = requiredTensor(scale, "scale");
    at::Tensor off = hostTensor(offsetOptional), beta = hostTensor(betaOptional);
    at::Tensor y = requiredTensor(yOut, "yOut"), rstd = hostTensor(rstdOut);
    checkFloat(op, "x", xt);
    checkFloat(op, "gamma", g);
    TORCH_CHECK(xt.dim() >= 1, op, ": x must have at least one dimension");
    const int64_t h = xt.size(-1);
    TORCH_CHECK((g.dim() == 1 || (g.dim() == 2 && g.size(0) == 1)) && g.size(-1) == h, op, ": gamma must be [", h,
                "] or [1, ", h, "] (x's last dimension), got ", g.sizes());
    checkFloat(op, "scale", s);
    TORCH_CHECK(s.numel() == 1 || s.numel() == h, op, ": scale must hold 1 or ", h, " values, got ", s.sizes());
    if (off.defined()) {
      TORCH_CHECK(quant::isFloat(off) || off.scalar_type() == at::kChar || off.scalar_type() == at::kInt, op,
                  ": offset must be a float type, int8 or int32, got ", off.scalar_type());
      TORCH_CHECK(off.numel() == 1 || off.numel() == h, op, ": offset must hold 1 or ", h, " values, got ",
                  off.sizes());
    }
    if (beta.defined()) {
      checkFloat(op, "beta", beta);
      TORCH_CHECK(beta.numel() == h, op, ": beta must have gamma's shape ", g.sizes(), ", got ", beta.sizes());
    }
    const int64_t floatTarget = quant::floatTargetOf(yOut);
    quant::IntGrid grid;
    if (floatTarget != 0) {
      TORCH_CHECK(y.sizes().equals(xt.sizes()), op, ": yOut must have x's shape ", xt.sizes(), ", got ", y.sizes());
    } else {
      TORCH_CHECK(y.scalar_type() == at::kChar || y.scalar_type() == at::kInt, op,
                  ": yOut must be int8, int32 carrying eight int4 values each, hifloat8 or float8, got ",
                  y.scalar_type());
      grid = quant::packedGrid(op, y.scalar_type() == at::kInt ? quant::kAclInt32 : quant::kAclInt8, y, xt.sizes());
    }
    std::vector<int64_t> rstd_shape = xt.sizes().vec();
    rstd_shape.back() = 1;
    TORCH_CHECK(!outputRstd || (rstd.defined() && rstd.scalar_type() == at::kFloat &&
                                rstd.sizes().equals(rstd_shape)),
                op, ": with outputRstd, rstdOut must be float32 ", at::IntArrayRef(rstd_shape));
    return Prepared{{xt, g, s, off, beta}, [=]() mutable {
                      const at::Tensor xf = xt.to(at::kFloat);
                      const std::vector<int64_t> last{-1};
                      const at::Tensor ms = at::mean(xf * xf, last, /*keepdim=*/true);
                      const at::Tensor r = at::reciprocal(at::sqrt(ms + epsilon));
                      at::Tensor v = xf * r * g.to(at::kFloat).reshape({h});
                      if (beta.defined()) v = v + beta.to(at::kFloat).reshape({h});
                      const at::Tensor sc = s.to(at::kFloat).reshape({-1});
                      v = divMode ? v / sc : v * sc;
                      if (off.defined()) v = v + off.to(at::kFloat).reshape({-1});
                      if (floatTarget != 0) {
                        quant::storeFloat(y, v, floatTarget);  // the format's own rounding
                      } else {
                        quant::store(y, at::round(v), grid);
                      }
                      if (outputRstd) rstd.copy_(r);
                    },
                    {y, rstd}};
  });
}
NPU_ATEN_OP(RmsNormQuantV3, "x, gamma, scale, offsetOptional, betaOptional, epsilon, divMode, outputRstd, yOut, rstdOut");

// --- aclnnFlatQuantV2 ------------------------------------------------------------------------------------------

// For each batch k of x [K, M, N]: t = kroneckerP1 @ (x[k] @ kroneckerP2) (float32 accumulation), m = 7 * clipRatio
// / max|t|, out[k] = rint(float16(t * m)) saturated to [-8, 7], packed eight to an int32 along N (lowest nibble
// first); quantScale[k] = max|t| / (7 * clipRatio). The kernel holds t * m in float16 before the integer cast.
// dstTypeMax tunes the float4 output only (a chip number format): 0 here.
extern "C" NOP_API aclnnStatus aclnnFlatQuantV2GetWorkspaceSize(const aclTensor* x, const aclTensor* kroneckerP1,
                                                               const aclTensor* kroneckerP2, double clipRatio,
                                                               double dstTypeMax, aclTensor* out,
                                                               aclTensor* quantScale, uint64_t* workspaceSize,
                                                               aclOpExecutor** executor) {
  return prepareOp("aclnnFlatQuantV2", workspaceSize, executor, [&] {
    const char* op = "aclnnFlatQuantV2";
    at::Tensor xt = requiredTensor(x, "x"), p1 = requiredTensor(kroneckerP1, "kroneckerP1");
    at::Tensor p2 = requiredTensor(kroneckerP2, "kroneckerP2");
    at::Tensor o = requiredTensor(out, "out"), qs = requiredTensor(quantScale, "quantScale");
    checkFloat(op, "x", xt);
    TORCH_CHECK(xt.dim() == 3, op, ": x must be 3-d [K, M, N], got ", xt.sizes());
    const int64_t m = xt.size(1), n = xt.size(2);
    TORCH_CHECK(p1.scalar_type() == xt.scalar_type() && p2.scalar_type() == xt.scalar_type(), op,
                ": kroneckerP1 and kroneckerP2 must have x's dtype ", xt.scalar_type(), ", got ", p1.scalar_type(),
                " and ", p2.scalar_type());
    TORCH_CHECK(p1.dim() == 2 && p1.size(0) == m && p1.size(1) == m, op, ": kroneckerP1 must be [", m, ", ", m,
                "], got ", p1.sizes());
    TORCH_CHECK(p2.dim() == 2 && p2.size(0) == n && p2.size(1) == n, op, ": kroneckerP2 must be [", n, ", ", n,
                "], got ", p2.sizes());
    TORCH_CHECK(clipRatio > 0 && clipRatio <= 1, op, ": clipRatio must be in (0, 1], got ", clipRatio);
    TORCH_CHECK(dstTypeMax == 0.0, op, ": dstTypeMax sets the float4 output's range; the int4 output takes 0, got ",
                dstTypeMax);
    const quant::IntGrid grid = quant::packedGrid(op, quant::kAclInt32, o, xt.sizes());
    TORCH_CHECK(qs.scalar_type() == at::kFloat && qs.dim() == 1 && qs.size(0) == xt.size(0), op,
                ": quantScale must be float32 [", xt.size(0), "], got ", qs.scalar_type(), " ", qs.sizes());
    return Prepared{{xt, p1, p2}, [=]() mutable {
                      if (xt.numel() == 0) return;
                      const at::Tensor t =
                          at::matmul(p1.to(at::kFloat), at::matmul(xt.to(at::kFloat), p2.to(at::kFloat)));
                      const at::Tensor top = at::amax(t.abs(), {1, 2}, /*keepdim=*/true);
                      const at::Tensor ratio = at::full_like(top, 7.0 * clipRatio);  // the int4 maximum, clipped
                      const at::Tensor mult = ratio / top;
                      qs.copy_((top / ratio).reshape({-1}));
                      const at::Tensor v = (t * mult).to(at::kHalf).to(at::kFloat);
                      quant::store(o, at::round(v), grid);
                    },
                    {o, qs}};
  });
}
NPU_ATEN_OP(FlatQuantV2, "x, kroneckerP1, kroneckerP2, clipRatio, dstTypeMax, out, quantScale");

// --- aclnnQuantMax / aclnnGroupedQuantMax ----------------------------------------------------------------------

namespace {

struct QuantMaxArgs {
  at::Tensor x, scale, groups, y, amax;
  std::string mode;
  int64_t dstType = quant::kAclInt8;
};

QuantMaxArgs checkQuantMax(const char* op, const aclTensor* x, const aclTensor* scale, const aclTensor* groupList,
                           const char* roundMode, int64_t dstType, aclTensor* yOut, aclTensor* amaxOut) {
  QuantMaxArgs a;
  a.x = requiredTensor(x, "x");
  a.scale = requiredTensor(scale, "scale");
  a.groups = groupList == nullptr ? at::Tensor() : requiredTensor(groupList, "groupList");
  a.y = requiredTensor(yOut, "yOut");
  a.amax = requiredTensor(amaxOut, "amaxOut");
  a.mode = roundMode == nullptr ? "rint" : roundMode;
  checkFloat(op, "x", a.x);
  TORCH_CHECK(a.x.dim() >= 1 && a.x.dim() <= 8, op, ": x must have 1 to 8 dimensions, got ", a.x.sizes());
  TORCH_CHECK(dstType == quant::kAclInt8 || quant::isFloatTarget(dstType), op, ": dstType must be 2 (int8), 34 ",
              "(hifloat8), 35 (float8_e5m2) or 36 (float8_e4m3fn), got ", dstType);
  a.dstType = dstType;
  TORCH_CHECK(a.mode != "hybrid", op, ": roundMode 'hybrid' (one of the chip's hifloat8 roundings) is not provided; ",
              "use 'round' for hifloat8");
  TORCH_CHECK(quant::isRoundMode(a.mode), op, ": roundMode must be 'rint', 'round', 'floor', 'ceil' or 'trunc', got '",
              a.mode, "'");
  if (dstType == quant::kAclHiFloat8) {
    TORCH_CHECK(a.mode == "round", op, ": hifloat8 rounds half away from zero: roundMode must be 'round', got '",
                a.mode, "'");
  } else if (dstType != quant::kAclInt8) {
    TORCH_CHECK(a.mode == "rint", op, ": float8 rounds to nearest even: roundMode must be 'rint', got '", a.mode, "'");
  }
  const int64_t count = a.groups.defined() ? a.groups.numel() : 1;
  if (a.groups.defined()) {
    TORCH_CHECK(a.groups.scalar_type() == at::kLong || a.groups.scalar_type() == at::kInt, op,
                ": groupList must be int64 or int32, got ", a.groups.scalar_type());
    TORCH_CHECK(a.groups.dim() == 1 && count >= 1, op, ": groupList must be a non-empty 1-d tensor, got ",
                a.groups.sizes());
  }
  TORCH_CHECK(a.scale.scalar_type() == at::kFloat && a.scale.dim() == 1 && a.scale.size(0) == count, op,
              ": scale must be float32 [", count, "] (one value per group), got ", a.scale.scalar_type(), " ",
              a.scale.sizes());
  const at::ScalarType carrier = dstType == quant::kAclInt8 ? at::kChar : at::kByte;
  TORCH_CHECK(a.y.scalar_type() == carrier && a.y.sizes().equals(a.x.sizes()), op, ": yOut must be ", carrier, " ",
              a.x.sizes(), " for dstType ", dstType, ", got ", a.y.scalar_type(), " ", a.y.sizes());
  TORCH_CHECK(a.amax.scalar_type() == a.x.scalar_type() && a.amax.dim() == 1 && a.amax.size(0) == count, op,
              ": amaxOut must be ", a.x.scalar_type(), " [", count, "], got ", a.amax.scalar_type(), " ",
              a.amax.sizes());
  return a;
}

// y = round(x * scale[g]) for the rows (along dimension 0) of group g; amax[g] = max |x| over the group (0 for an
// empty group). Without groups one group holds all of x.
void runQuantMax(const char* op, QuantMaxArgs a) {
  const at::Tensor xf = a.x.to(at::kFloat);
  const int64_t rows = a.x.size(0);
  const std::vector<int64_t> ends =
      a.groups.defined() ? groupEnds(op, a.groups, rows, /*cover=*/true) : std::vector<int64_t>{rows};
  const at::Tensor s = a.scale.to(at::kFloat);
  at::Tensor q = at::zeros_like(xf);
  at::Tensor top = at::zeros({static_cast<int64_t>(ends.size())}, xf.options());
  int64_t start = 0;
  for (size_t g = 0; g < ends.size(); ++g) {
    const int64_t len = ends[g] - start;
    if (len > 0) {
      const at::Tensor part = xf.narrow(0, start, len);
      const at::Tensor scaled = part * s[static_cast<int64_t>(g)];
      // Float targets round in their own conversion (storeFloat).
      q.narrow(0, start, len).copy_(a.dstType == quant::kAclInt8 ? quant::roundBy(scaled, a.mode) : scaled);
      top.select(0, static_cast<int64_t>(g)).copy_(part.abs().max());
    }
    start = ends[g];
  }
  if (a.dstType == quant::kAclInt8) {
    quant::store(a.y, q, quant::int8Grid());
  } else {
    quant::storeFloat(a.y, q, a.dstType);
  }
  a.amax.copy_(top);
}

}  // namespace

// y = round(x * scale) as int8 (roundMode: rint half to even, round half away from zero, floor, ceil, trunc), or
// x * scale as hifloat8 (roundMode 'round') or float8 e5m2 / e4m3fn (roundMode 'rint'), whose bytes a uint8 yOut
// holds; amax = max |x| in x's dtype ([1]).
extern "C" NOP_API aclnnStatus aclnnQuantMaxGetWorkspaceSize(const aclTensor* x, const aclTensor* scale,
                                                            char* roundMode, int64_t dstType, aclTensor* yOut,
                                                            aclTensor* amaxOut, uint64_t* workspaceSize,
                                                            aclOpExecutor** executor) {
  return prepareOp("aclnnQuantMax", workspaceSize, executor, [&] {
    const char* op = "aclnnQuantMax";
    QuantMaxArgs a = checkQuantMax(op, x, scale, nullptr, roundMode, dstType, yOut, amaxOut);
    return Prepared{{a.x, a.scale}, [=]() { runQuantMax(op, a); }, {a.y, a.amax}};
  });
}
NPU_ATEN_OP(QuantMax, "x, scale, roundMode, dstType, yOut, amaxOut");

// As aclnnQuantMax per row group along x's first dimension: groupList holds cumulative row ends (its last value
// x's first dimension), scale and amaxOut one value per group.
extern "C" NOP_API aclnnStatus aclnnGroupedQuantMaxGetWorkspaceSize(const aclTensor* x, const aclTensor* scale,
                                                                   const aclTensor* groupList, char* roundMode,
                                                                   int64_t dstType, aclTensor* yOut,
                                                                   aclTensor* amaxOut, uint64_t* workspaceSize,
                                                                   aclOpExecutor** executor) {
  return prepareOp("aclnnGroupedQuantMax", workspaceSize, executor, [&] {
    const char* op = "aclnnGroupedQuantMax";
    TORCH_CHECK(groupList != nullptr, op, ": groupList is required");
    QuantMaxArgs a = checkQuantMax(op, x, scale, groupList, roundMode, dstType, yOut, amaxOut);
    return Prepared{{a.x, a.scale, a.groups}, [=]() { runQuantMax(op, a); }, {a.y, a.amax}};
  });
}
NPU_ATEN_OP(GroupedQuantMax, "x, scale, groupList, roundMode, dstType, yOut, amaxOut");

// --- aclnnGroupedDynamicBlockQuantV2 ---------------------------------------------------------------------------

// x is [M, N] or [B, M, N]; groupList (cumulative row ends along M, groupListType 0) splits the rows into groups,
// and blocks of rowBlockSize x colBlockSize never cross a group: group g's row blocks start at its first row and
// the last one may be partial. Per block: amax of |x|, scale = amax * (1 / T) lowered to 1 / minScale, m = (1 /
// amax) * T raised to minScale (minScale > 0), y = rint(x * m) as int8 (T = 127), or x * m in a float target's
// own rounding (T its largest value: 448 / 57344 for float8 e4m3fn / e5m2; dstTypeMax, else 32768, for hifloat8;
// a zero block gives zeros). Group g's scale rows start at row
// floor(start_g / rowBlockSize) + g of scaleOut ([.., M / rowBlockSize + G, ceil(N / colBlockSize)]); scale rows
// no block maps to hold 0.
extern "C" NOP_API aclnnStatus aclnnGroupedDynamicBlockQuantV2GetWorkspaceSize(
    const aclTensor* x, const aclTensor* groupList, double minScale, char* roundModeOptional, int64_t dstType,
    int64_t rowBlockSize, int64_t colBlockSize, int64_t groupListType, double dstTypeMax, aclTensor* yOut,
    aclTensor* scaleOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnGroupedDynamicBlockQuantV2", workspaceSize, executor, [&] {
    const char* op = "aclnnGroupedDynamicBlockQuantV2";
    at::Tensor xt = requiredTensor(x, "x"), groups = requiredTensor(groupList, "groupList");
    at::Tensor y = requiredTensor(yOut, "yOut"), scale = requiredTensor(scaleOut, "scaleOut");
    const std::string mode = roundModeOptional == nullptr ? "rint" : roundModeOptional;
    checkFloat(op, "x", xt);
    TORCH_CHECK(xt.dim() == 2 || xt.dim() == 3, op, ": x must be 2-d [M, N] or 3-d [B, M, N], got ", xt.sizes());
    const int64_t floatTarget = quant::floatTargetOf(yOut);
    if (floatTarget == 0) checkInt8Target(op, dstType);
    TORCH_CHECK(floatTarget == 0 || floatTarget == dstType, op, ": yOut holds format ", floatTarget,
                " but dstType is ", dstType);
    const std::string expected_mode = floatTarget == quant::kAclHiFloat8 ? "round" : "rint";
    TORCH_CHECK(mode == expected_mode, op, ": roundMode must be '", expected_mode, "' for this dstType (", dstType,
                "), got '", mode, "'");
    TORCH_CHECK(minScale >= 0, op, ": minScale must not be negative, got ", minScale);
    TORCH_CHECK(rowBlockSize > 0 && colBlockSize > 0, op, ": rowBlockSize and colBlockSize must be positive, got ",
                rowBlockSize, " and ", colBlockSize);
    TORCH_CHECK(groupListType == 0, op, ": groupListType must be 0 (cumulative row ends), got ", groupListType);
    TORCH_CHECK(dstTypeMax == 0.0 || (floatTarget == quant::kAclHiFloat8 && dstTypeMax > 0), op,
                ": dstTypeMax sets a hifloat8 output's range (positive, or 0); other targets take 0, got ", dstTypeMax);
    const double target_max = floatTarget == 0 ? 127.0
                              : floatTarget == quant::kAclHiFloat8 && dstTypeMax > 0 ? dstTypeMax
                                                                                      : quant::floatTargetMax(floatTarget);
    TORCH_CHECK(groups.scalar_type() == at::kInt || groups.scalar_type() == at::kLong, op,
                ": groupList must be int32 or int64, got ", groups.scalar_type());
    TORCH_CHECK(groups.dim() == 1, op, ": groupList must be 1-d, got ", groups.sizes());
    const int64_t rows = xt.size(-2), cols = xt.size(-1), count = groups.numel();
    const int64_t col_blocks = (cols + colBlockSize - 1) / colBlockSize;
    std::vector<int64_t> scale_shape = xt.sizes().vec();
    scale_shape[scale_shape.size() - 2] = rows / rowBlockSize + count;
    scale_shape.back() = col_blocks;
    TORCH_CHECK((floatTarget != 0 || y.scalar_type() == at::kChar) && y.sizes().equals(xt.sizes()), op,
                ": yOut must be int8 (or a float target) ", xt.sizes(), ", got ", y.scalar_type(), " ", y.sizes());
    TORCH_CHECK(scale.scalar_type() == at::kFloat && scale.sizes().equals(scale_shape), op,
                ": scaleOut must be float32 ", at::IntArrayRef(scale_shape), ", got ", scale.scalar_type(), " ",
                scale.sizes());
    return Prepared{{xt, groups}, [=]() mutable {
                      const std::vector<int64_t> ends = groupEnds(op, groups, rows, /*cover=*/true);
                      scale.zero_();
                      y.view(at::kByte).zero_();  // every target's zero is all-zero bytes
                      if (xt.numel() == 0) return;
                      const at::Tensor xf = xt.to(at::kFloat);
                      int64_t start = 0;
                      for (size_t g = 0; g < ends.size(); ++g) {
                        const int64_t len = ends[g] - start;
                        if (len > 0) {
                          const int64_t row_blocks = (len + rowBlockSize - 1) / rowBlockSize;
                          const at::Tensor part = xf.narrow(-2, start, len);
                          const at::Tensor padded = at::constant_pad_nd(
                              part.abs(), {0, col_blocks * colBlockSize - cols, 0, row_blocks * rowBlockSize - len}, 0);
                          std::vector<int64_t> blocked(part.sizes().begin(), part.sizes().end() - 2);
                          blocked.insert(blocked.end(), {row_blocks, rowBlockSize, col_blocks, colBlockSize});
                          const at::Tensor top = at::amax(padded.reshape(blocked), {-3, -1});
                          at::Tensor s = top * quant::reciprocalF32(target_max);
                          at::Tensor m = at::reciprocal(top) * target_max;
                          if (minScale > 0) {
                            s = at::clamp_max(s, quant::reciprocalF32(minScale));
                            m = at::clamp_min(m, minScale);
                          }
                          if (floatTarget != 0) m = at::where(top > 0, m, at::zeros_like(m));  // zero blocks
                          const int64_t first = start / rowBlockSize + static_cast<int64_t>(g);
                          scale.narrow(-2, first, row_blocks).copy_(s);
                          const at::Tensor per_element =
                              at::repeat_interleave(at::repeat_interleave(m, rowBlockSize, -2), colBlockSize, -1)
                                  .narrow(-2, 0, len)
                                  .narrow(-1, 0, cols);
                          at::Tensor yq = y.narrow(-2, start, len);
                          if (floatTarget != 0) {
                            quant::storeFloat(yq, at::clamp(part * per_element, -target_max, target_max), floatTarget);
                          } else {
                            quant::store(yq, at::round(part * per_element), quant::int8Grid());
                          }
                        }
                        start = ends[g];
                      }
                    },
                    {y, scale}};
  });
}
NPU_ATEN_OP(GroupedDynamicBlockQuantV2, "x, groupList, minScale, roundModeOptional, dstType, rowBlockSize, colBlockSize, groupListType, dstTypeMax, yOut, scaleOut");

// --- aclnnMoeInitRoutingQuantV2 --------------------------------------------------------------------------------

namespace {

struct RoutingQuant {
  int64_t active_num, capacity, expert_num, drop_pad, tokens_mode, quant_mode;
  bool before_capacity;
};

// The stable ascending order of a 1-d tensor (of equal values the lower position first).
at::Tensor stableOrder(const at::Tensor& values) {
  return std::get<1>(at::sort(values, /*stable=*/true, /*dim=*/0, /*descending=*/false));
}

void runInitRoutingQuant(const char* op, const at::Tensor& x, const at::Tensor& expert_idx, const at::Tensor& scale,
                         const at::Tensor& offset, const RoutingQuant& a, at::Tensor& ex, at::Tensor& row_idx,
                         at::Tensor& tokens_out, at::Tensor& before_out, at::Tensor& scale_out) {
  const int64_t k = expert_idx.size(1), h = x.size(1);
  const at::Tensor flat = expert_idx.reshape({-1}).to(at::kLong);
  if (flat.numel() > 0) {
    const int64_t lo = flat.min().item<int64_t>(), hi = flat.max().item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < a.expert_num, op, ": expertIdx values must be in [0, expertNum = ", a.expert_num,
                "), got values in [", lo, ", ", hi, "]");
  }
  const at::Tensor order = stableOrder(flat);  // positions by expert
  const at::Tensor sorted = flat.index_select(0, order);
  const at::Tensor counts = flat.bincount({}, a.expert_num);
  const int64_t nk = flat.numel();
  at::Tensor slots, sources;  // expandedX rows and the [tokens * k] positions they come from
  at::Tensor rows_idx;
  if (a.drop_pad == 0) {
    const int64_t used = a.active_num > 0 ? std::min(a.active_num, nk) : nk;
    slots = at::arange(used, flat.options());
    sources = order.narrow(0, 0, used);
    rows_idx = at::empty({nk}, flat.options());
    rows_idx.index_copy_(0, order, at::arange(nk, flat.options()));
    if (tokens_out.defined()) tokens_out.copy_(a.tokens_mode == 1 ? counts.cumsum(0) : counts);
  } else {
    // Each expert keeps its first `capacity` tokens (in sorted order) at expert * capacity + rank; the others drop.
    const at::Tensor first = counts.cumsum(0) - counts;
    const at::Tensor rank = at::arange(nk, flat.options()) - first.index_select(0, sorted);
    const at::Tensor keep = rank < a.capacity;
    slots = (sorted * a.capacity + rank).masked_select(keep);
    sources = order.masked_select(keep);
    rows_idx = at::full({nk}, -1, flat.options());
    rows_idx.index_copy_(0, sources, slots);
    if (before_out.defined()) before_out.copy_(counts);
  }
  row_idx.copy_(rows_idx);
  const at::Tensor src_rows = x.index_select(0, sources.div(k, "floor"));
  at::Tensor values, row_scale;
  if (a.quant_mode == 0) {
    // Static quantization in float16 arithmetic (x * scale + offset), as the kernel computes it.
    at::Tensor v = src_rows.to(at::kHalf) * scale.reshape({-1})[0].to(at::kHalf);
    if (offset.defined()) v = v + offset.reshape({-1})[0].to(at::kHalf);
    values = quant::saturate(at::round(v.to(at::kFloat)), -128, 127).to(at::kChar);
  } else {
    at::Tensor v = src_rows.to(at::kFloat);
    if (scale.defined()) {
      // Smoothing: one [H] row for all tokens, or one per expert.
      const at::Tensor smooth = scale.to(at::kFloat).reshape({-1, h});
      v = v * (smooth.size(0) == 1 ? smooth : smooth.index_select(0, flat.index_select(0, sources)));
    }
    row_scale = at::amax(v.abs(), {-1}) * quant::reciprocalF32(127.0);
    const at::Tensor q = at::round(v / row_scale.unsqueeze(-1));  // an all-zero row: NaN, stored as 0
    values = quant::saturate(q, -128, 127).to(at::kChar);
  }
  at::Tensor expanded = at::zeros({ex.numel() / std::max<int64_t>(h, 1), h}, ex.options());
  expanded.index_copy_(0, slots, values);
  ex.copy_(expanded.view(ex.sizes()));
  if (scale_out.defined()) {
    at::Tensor scales = at::zeros({scale_out.numel()}, scale_out.options());
    scales.index_copy_(0, slots, row_scale);
    scale_out.copy_(scales);
  }
}

}  // namespace

// MoE token expansion by expert with int8 quantization. The [tokens, k] positions are sorted stably by expert.
// Dropless (dropPadMode 0): expandedX row i is x[order[i] / k] for the first activeNum positions (all when
// activeNum <= 0); expandedRowIdx[order[i]] = i; expertTokensCountOrCumsum per expert, cumulative (flag 1) or counts
// (2). Drop / pad (1): [expertNum, expertCapacity, H], each expert's first expertCapacity tokens, zeros elsewhere;
// expandedRowIdx the slot of each position or -1 when dropped; expertTokensBeforeCapacity the counts before
// dropping. quantMode 0: static, rint(x * scale + offset) in float16 (scale / offset one value); 1: dynamic per row,
// x optionally times a smoothing scale ([1, H] or [expertNum, H], by the row's expert), scale = max|row| / 127, y
// = rint(row / scale) (dynamicQuantScaleOut, 0 for unused rows).
extern "C" NOP_API aclnnStatus aclnnMoeInitRoutingQuantV2GetWorkspaceSize(
    const aclTensor* x, const aclTensor* expertIdx, const aclTensor* scaleOptional, const aclTensor* offsetOptional,
    int64_t activeNum, int64_t expertCapacity, int64_t expertNum, int64_t dropPadMode,
    int64_t expertTokensCountOrCumsumFlag, bool expertTokensBeforeCapacityFlag, int64_t quantMode,
    aclTensor* expandedXOut, aclTensor* expandedRowIdxOut, aclTensor* expertTokensCountOrCumsumOutOptional,
    aclTensor* expertTokensBeforeCapacityOutOptional, aclTensor* dynamicQuantScaleOutOptional,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMoeInitRoutingQuantV2", workspaceSize, executor, [&] {
    const char* op = "aclnnMoeInitRoutingQuantV2";
    at::Tensor xt = requiredTensor(x, "x"), experts = requiredTensor(expertIdx, "expertIdx");
    at::Tensor scale = hostTensor(scaleOptional), offset = hostTensor(offsetOptional);
    at::Tensor ex = requiredTensor(expandedXOut, "expandedXOut");
    at::Tensor row_idx = requiredTensor(expandedRowIdxOut, "expandedRowIdxOut");
    at::Tensor tokens_out = hostTensor(expertTokensCountOrCumsumOutOptional);
    at::Tensor before_out = hostTensor(expertTokensBeforeCapacityOutOptional);
    at::Tensor scale_out = hostTensor(dynamicQuantScaleOutOptional);
    const RoutingQuant a{activeNum,  expertCapacity, expertNum, dropPadMode, expertTokensCountOrCumsumFlag,
                         quantMode, expertTokensBeforeCapacityFlag};
    checkFloat(op, "x", xt);
    TORCH_CHECK(xt.dim() == 2, op, ": x must be 2-d [tokens, H], got ", xt.sizes());
    TORCH_CHECK(experts.dim() == 2 && experts.size(0) == xt.size(0) && experts.scalar_type() == at::kInt, op,
                ": expertIdx must be int32 [tokens = ", xt.size(0), ", k], got ", experts.scalar_type(), " ",
                experts.sizes());
    TORCH_CHECK(expertNum >= 1, op, ": expertNum must be >= 1, got ", expertNum);
    TORCH_CHECK(dropPadMode == 0 || dropPadMode == 1, op, ": dropPadMode must be 0 or 1, got ", dropPadMode);
    TORCH_CHECK(quantMode == 0 || quantMode == 1, op, ": quantMode must be 0 (static) or 1 (dynamic), got ",
                quantMode);
    TORCH_CHECK(expertTokensCountOrCumsumFlag >= 0 && expertTokensCountOrCumsumFlag <= 2, op,
                ": expertTokensCountOrCumsumFlag must be 0, 1 or 2, got ", expertTokensCountOrCumsumFlag);
    TORCH_CHECK(dropPadMode == 0 || expertCapacity >= 1, op, ": drop / pad needs expertCapacity >= 1, got ",
                expertCapacity);
    const int64_t h = xt.size(1), nk = experts.numel();
    if (quantMode == 0) {
      TORCH_CHECK(scale.defined() && quant::isFloat(scale) && scale.numel() == 1, op,
                  ": static quantization needs a float scale of one value");
      TORCH_CHECK(!offset.defined() || (quant::isFloat(offset) && offset.numel() == 1), op,
                  ": offset must be a float tensor of one value");
    } else {
      TORCH_CHECK(!offset.defined(), op, ": dynamic quantization takes no offset");
      TORCH_CHECK(!scale.defined() || (quant::isFloat(scale) && scale.dim() == 2 && scale.size(1) == h &&
                                       (scale.size(0) == 1 || scale.size(0) == expertNum)),
                  op, ": dynamic quantization's smoothing scale must be [1, ", h, "] or [", expertNum, ", ", h, "]");
    }
    const int64_t rows = dropPadMode == 1 ? expertNum * expertCapacity : (activeNum > 0 ? std::min(activeNum, nk) : nk);
    TORCH_CHECK(ex.scalar_type() == at::kChar && ex.numel() == rows * h, op, ": expandedXOut must be int8 with ",
                rows, " rows of ", h);
    TORCH_CHECK(row_idx.numel() == nk && row_idx.scalar_type() == at::kInt, op, ": expandedRowIdxOut must be int32 [",
                nk, "]");
    const bool want_tokens = dropPadMode == 0 && expertTokensCountOrCumsumFlag > 0;
    const bool want_before = dropPadMode == 1 && expertTokensBeforeCapacityFlag;
    TORCH_CHECK(!want_tokens || (tokens_out.defined() && tokens_out.numel() == expertNum), op,
                ": expertTokensCountOrCumsumOut must hold expertNum (", expertNum, ") values");
    TORCH_CHECK(!want_before || (before_out.defined() && before_out.numel() == expertNum), op,
                ": expertTokensBeforeCapacityOut must hold expertNum (", expertNum, ") values");
    TORCH_CHECK(quantMode == 0 || (scale_out.defined() && scale_out.scalar_type() == at::kFloat &&
                                   scale_out.numel() == rows),
                op, ": dynamicQuantScaleOut must be float32 [", rows, "]");
    if (!want_tokens) tokens_out = at::Tensor();
    if (!want_before) before_out = at::Tensor();
    if (quantMode == 0) scale_out = at::Tensor();
    return Prepared{{xt, experts, scale, offset}, [=]() mutable {
                      runInitRoutingQuant(op, xt, experts, scale, offset, a, ex, row_idx, tokens_out, before_out,
                                          scale_out);
                    },
                    {ex, row_idx, tokens_out, before_out, scale_out}};
  });
}
NPU_ATEN_OP(MoeInitRoutingQuantV2, "x, expertIdx, scaleOptional, offsetOptional, activeNum, expertCapacity, expertNum, dropPadMode, expertTokensCountOrCumsumFlag, expertTokensBeforeCapacityFlag, quantMode, expandedXOut, expandedRowIdxOut, expertTokensCountOrCumsumOutOptional, expertTokensBeforeCapacityOutOptional, dynamicQuantScaleOutOptional");
