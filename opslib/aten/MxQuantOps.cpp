// MxQuantOps.cpp - MX (microscaling) quantisation device ops: aclnnDynamicMxQuantV2 (blocks along one axis),
// aclnnGroupedDynamicMxQuantV2 (blocks of rows that restart at each group), aclnnDynamicBlockMxQuant (32 x 32
// blocks, the scale given per row and per column) and aclnnAntiMxQuant (dequantisation). Elements are float8
// e4m3fn / e5m2 (float8 tensors) or float4 e2m1 / e1m2 (two to a uint8, the even element in the low nibble), block
// scales e8m0 codes in uint8, two blocks to a pair along the blocked axis (MxQuantSupport.h, MxFormats.h).
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "AtenOpSupport.h"
#include "MxQuantSupport.h"

using namespace npu::opslib::aten;
using namespace npu::opslib::aten::mx;

// Per block of blocksize elements along axis: the e8m0 scale (scaleAlg, dstTypeMax) and the elements divided by it,
// converted to dstType in roundMode, saturating.
extern "C" NOP_API aclnnStatus aclnnDynamicMxQuantV2GetWorkspaceSize(const aclTensor* x, int64_t axis,
                                                                    char* roundMode, int64_t dstType,
                                                                    int64_t blocksize, int64_t scaleAlg,
                                                                    double dstTypeMax, aclTensor* yOut,
                                                                    aclTensor* mxscaleOut, uint64_t* workspaceSize,
                                                                    aclOpExecutor** executor) {
  return prepareOp("aclnnDynamicMxQuantV2", workspaceSize, executor, [&] {
    const char* op = "aclnnDynamicMxQuantV2";
    at::Tensor xt = requiredTensor(x, "x"), y = requiredTensor(yOut, "yOut");
    at::Tensor scales = requiredTensor(mxscaleOut, "mxscaleOut");
    checkHalfInput(op, xt);
    TORCH_CHECK(xt.dim() >= 1 && xt.dim() <= 7, op, ": x must have 1 to 7 dimensions, got ", xt.sizes());
    const int64_t ax = normalisedAxis(op, axis, xt.dim());
    TORCH_CHECK(blocksize > 0 && blocksize % 32 == 0 && blocksize <= 1024, op,
                ": blocksize must be a multiple of 32 up to 1024, got ", blocksize);
    const Quantiser q = quantiserOf(op, dstType, roundMode, scaleAlg, dstTypeMax);
    checkMxOutput(op, *q.format, y, xt.sizes());
    checkScaleOut(op, "mxscaleOut", mxscaleOut, scales, pairedScaleShape(xt.sizes(), ax, blocksize));
    return Prepared{{xt}, [=]() mutable { quantiseInto(xt, ax, blocksize, q, y, scales); }, {y, scales}};
  });
}
NPU_ATEN_OP(DynamicMxQuantV2, "x, axis, roundMode, dstType, blocksize, scaleAlg, dstTypeMax, yOut, mxscaleOut");

// x [M, N] with groupIndex (cumulative row ends, the last one M): MX blocks of 32 rows along M that restart at each
// group. Group g's block pairs start at row floor(start_g / 64) + g of mxscaleOut [M / 64 + G, N, 2]; pairs no block
// maps to hold 0.
extern "C" NOP_API aclnnStatus aclnnGroupedDynamicMxQuantV2GetWorkspaceSize(
    const aclTensor* x, const aclTensor* groupIndex, char* roundMode, int64_t dstType, int64_t blocksize,
    int64_t scaleAlg, double dstTypeMax, aclTensor* yOut, aclTensor* mxscaleOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnGroupedDynamicMxQuantV2", workspaceSize, executor, [&] {
    const char* op = "aclnnGroupedDynamicMxQuantV2";
    at::Tensor xt = requiredTensor(x, "x"), groups = requiredTensor(groupIndex, "groupIndex");
    at::Tensor y = requiredTensor(yOut, "yOut"), scales = requiredTensor(mxscaleOut, "mxscaleOut");
    checkHalfInput(op, xt);
    TORCH_CHECK(xt.dim() == 2, op, ": x must be 2-d [M, N], got ", xt.sizes());
    TORCH_CHECK(groups.dim() == 1 && (groups.scalar_type() == at::kInt || groups.scalar_type() == at::kLong), op,
                ": groupIndex must be a 1-d int32 / int64 tensor, got ", groups.scalar_type(), " ", groups.sizes());
    TORCH_CHECK(blocksize == 32, op, ": blocksize must be 32, got ", blocksize);
    const Quantiser q = quantiserOf(op, dstType, roundMode, scaleAlg, dstTypeMax);
    const Format& f = *q.format;
    checkMxOutput(op, f, y, xt.sizes());
    const int64_t rows = xt.size(0), cols = xt.size(1), count = groups.numel();
    checkScaleOut(op, "mxscaleOut", mxscaleOut, scales, {rows / 64 + count, cols, 2});
    return Prepared{{xt, groups}, [=]() mutable {
                      const at::Tensor ends_t = groups.to(at::kLong).contiguous();
                      const int64_t* ends = ends_t.const_data_ptr<int64_t>();
                      for (int64_t g = 0; g < count; ++g) {
                        TORCH_CHECK(ends[g] >= (g == 0 ? 0 : ends[g - 1]) && ends[g] <= rows, op,
                                    ": groupIndex must be non-decreasing cumulative row ends within [0, ", rows,
                                    "], got ", ends_t);
                      }
                      TORCH_CHECK(count == 0 || ends[count - 1] == rows, op, ": groupIndex's last value must be ",
                                  "the number of rows (", rows, ")");
                      const at::Tensor xf = xt.to(at::kFloat).contiguous();
                      at::Tensor codes = at::zeros(xf.sizes(), xf.options().dtype(at::kByte));
                      at::Tensor sc = at::zeros(scales.sizes(), scales.options());
                      const float* src = xf.const_data_ptr<float>();
                      int64_t start = 0;
                      for (int64_t g = 0; g < count; ++g) {
                        const int64_t len = ends[g] - start;
                        if (len > 0) {
                          // The group as its own [1, len, cols] tensor; its pairs land at row start / 64 + g.
                          const int64_t pairs = pairsOf(len, 32), first = start / 64 + g;
                          std::vector<uint8_t> part(static_cast<size_t>(pairs * cols * 2), 0);
                          quantiseAlong(src + start * cols, 1, len, cols, 32, q,
                                        codes.mutable_data_ptr<uint8_t>() + start * cols, part.data());
                          std::copy(part.begin(), part.end(), sc.mutable_data_ptr<uint8_t>() + first * cols * 2);
                        }
                        start = ends[g];
                      }
                      storeCodes(y, codes, f);
                      scales.copy_(sc);
                    },
                    {y, scales}};
  });
}
NPU_ATEN_OP(GroupedDynamicMxQuantV2, "x, groupIndex, roundMode, dstType, blocksize, scaleAlg, dstTypeMax, yOut, mxscaleOut");

// x [..., M, N] in 32 x 32 blocks over its last two dimensions, one e8m0 scale per block: scale1Out [..., M,
// pairs(N), 2] gives it for each row of the block, scale2Out [..., pairs(M), N, 2] for each column.
extern "C" NOP_API aclnnStatus aclnnDynamicBlockMxQuantGetWorkspaceSize(const aclTensor* x, char* roundMode,
                                                                       int64_t dstType, int64_t scaleAlg,
                                                                       double dstTypeMax, aclTensor* yOut,
                                                                       aclTensor* scale1Out, aclTensor* scale2Out,
                                                                       uint64_t* workspaceSize,
                                                                       aclOpExecutor** executor) {
  return prepareOp("aclnnDynamicBlockMxQuant", workspaceSize, executor, [&] {
    const char* op = "aclnnDynamicBlockMxQuant";
    at::Tensor xt = requiredTensor(x, "x"), y = requiredTensor(yOut, "yOut");
    at::Tensor s1 = requiredTensor(scale1Out, "scale1Out"), s2 = requiredTensor(scale2Out, "scale2Out");
    checkHalfInput(op, xt);
    TORCH_CHECK(xt.dim() >= 2 && xt.dim() <= 7, op, ": x must have 2 to 7 dimensions, got ", xt.sizes());
    const Quantiser q = quantiserOf(op, dstType, roundMode, scaleAlg, dstTypeMax);
    const Format& f = *q.format;
    checkMxOutput(op, f, y, xt.sizes());
    const int64_t d = xt.dim();
    checkScaleOut(op, "scale1Out", scale1Out, s1, pairedScaleShape(xt.sizes(), d - 1, 32));
    checkScaleOut(op, "scale2Out", scale2Out, s2, pairedScaleShape(xt.sizes(), d - 2, 32));
    return Prepared{{xt}, [=]() mutable {
                      const at::Tensor xf = xt.to(at::kFloat).contiguous();
                      const int64_t rows = xf.size(-2), cols = xf.size(-1), batch = xf.numel() / std::max<int64_t>(
                                                                                       1, rows * cols);
                      const int64_t row_pairs = pairsOf(rows, 32), col_pairs = pairsOf(cols, 32);
                      at::Tensor codes = at::empty(xf.sizes(), xf.options().dtype(at::kByte));
                      at::Tensor c1 = at::zeros(s1.sizes(), s1.options()), c2 = at::zeros(s2.sizes(), s2.options());
                      const float* src = xf.const_data_ptr<float>();
                      uint8_t* out = codes.mutable_data_ptr<uint8_t>();
                      uint8_t* p1 = c1.mutable_data_ptr<uint8_t>();
                      uint8_t* p2 = c2.mutable_data_ptr<uint8_t>();
                      for (int64_t bt = 0; bt < batch && rows * cols > 0; ++bt) {
                        const float* xb = src + bt * rows * cols;
                        for (int64_t rb = 0; rb * 32 < rows; ++rb) {
                          for (int64_t cb = 0; cb * 32 < cols; ++cb) {
                            const int64_t r1 = std::min(rows, rb * 32 + 32), k1 = std::min(cols, cb * 32 + 32);
                            BlockMax amax;
                            for (int64_t r = rb * 32; r < r1; ++r) {
                              for (int64_t k = cb * 32; k < k1; ++k) amax.add(xb[r * cols + k]);
                            }
                            const uint8_t sc = q.scale(amax.value());
                            for (int64_t r = rb * 32; r < r1; ++r) {
                              p1[((bt * rows + r) * col_pairs + cb / 2) * 2 + cb % 2] = sc;
                              for (int64_t k = cb * 32; k < k1; ++k) {
                                out[(bt * rows + r) * cols + k] = q.element(xb[r * cols + k], sc);
                              }
                            }
                            for (int64_t k = cb * 32; k < k1; ++k) {
                              p2[((bt * row_pairs + rb / 2) * cols + k) * 2 + rb % 2] = sc;
                            }
                          }
                        }
                      }
                      storeCodes(y, codes, f);
                      s1.copy_(c1);
                      s2.copy_(c2);
                    },
                    {y, s1, s2}};
  });
}
NPU_ATEN_OP(DynamicBlockMxQuant, "x, roundMode, dstType, scaleAlg, dstTypeMax, yOut, scale1Out, scale2Out");

// y = x * 2^(scale - 127) per block of 32 along axis: x holds float8 (a float8 tensor) or float4 (uint8 pairs,
// described as FLOAT4_E2M1 / _E1M2) elements, mxscale e8m0 codes paired along axis; y is float16, bfloat16 or
// float32 (dstType is its aclDataType).
extern "C" NOP_API aclnnStatus aclnnAntiMxQuantGetWorkspaceSize(const aclTensor* x, const aclTensor* mxscale,
                                                               int64_t axis, int64_t dstType, aclTensor* yOut,
                                                               uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAntiMxQuant", workspaceSize, executor, [&] {
    const char* op = "aclnnAntiMxQuant";
    at::Tensor xt = requiredTensor(x, "x"), sc = requiredTensor(mxscale, "mxscale"), y = requiredTensor(yOut, "yOut");
    const Format& f = formatOf(op, static_cast<int64_t>(declaredType(x)));
    TORCH_CHECK(xt.dim() >= 1 && xt.dim() <= 7, op, ": x must have 1 to 7 dimensions, got ", xt.sizes());
    std::vector<int64_t> shape = xt.sizes().vec();
    if (isFloat4(f)) shape.back() *= 2;
    const int64_t ax = normalisedAxis(op, axis, xt.dim());
    TORCH_CHECK(dstType == ACL_FLOAT16 || dstType == ACL_BF16 || dstType == ACL_FLOAT, op,
                ": dstType must be 1 (float16), 27 (bfloat16) or 0 (float32), got ", dstType);
    TORCH_CHECK(y.scalar_type() == toScalarType(static_cast<aclDataType>(dstType)) && y.sizes().equals(shape), op,
                ": yOut must be ", toScalarType(static_cast<aclDataType>(dstType)), " ", at::IntArrayRef(shape),
                ", got ", y.scalar_type(), " ", y.sizes());
    checkScaleOut(op, "mxscale", mxscale, sc, pairedScaleShape(shape, ax, 32));
    return Prepared{{xt, sc}, [=]() mutable {
                      const at::Tensor codes = loadCodes(xt, f);
                      const at::Tensor scales = sc.contiguous();
                      at::Tensor v = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
                      const auto [outer, len, inner] = aroundAxis(shape, ax);
                      const int64_t pairs = pairsOf(len, 32);
                      const uint8_t* c = codes.const_data_ptr<uint8_t>();
                      const uint8_t* s = scales.const_data_ptr<uint8_t>();
                      float* out = v.mutable_data_ptr<float>();
                      for (int64_t o = 0; o < outer; ++o) {
                        for (int64_t j = 0; j < len; ++j) {
                          const int64_t b = j / 32;
                          for (int64_t i = 0; i < inner; ++i) {
                            const float scale = scaleValue(s[((o * pairs + b / 2) * inner + i) * 2 + b % 2]);
                            const int64_t at = (o * len + j) * inner + i;
                            out[at] = decode(f, c[at]) * scale;
                          }
                        }
                      }
                      y.copy_(v);
                    },
                    {y}};
  });
}
NPU_ATEN_OP(AntiMxQuant, "x, mxscale, axis, dstType, yOut");
