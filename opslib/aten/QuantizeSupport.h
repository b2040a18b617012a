// QuantizeSupport.h - what the quantization device ops (QuantizeOps.cpp, QuantizeFusedOps.cpp) share: the integer
// grids their outputs store (int8, uint8, int32, int4 packed eight to an int32 or two to an int8), the NPU's
// rounding modes, saturation, int4 packing, and MoE row groups.
#pragma once

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/ceil.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/floor.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/nan_to_num.h>
#include <ATen/ops/round.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/trunc.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <npu/hifloat8.h>

#include "QuantPacking.h"

namespace npu::opslib::aten::quant {

// aclDataType codes of quantized outputs. Int4 and the chip formats are not in opslib's enum: no tensor of the
// software NPU holds them, but ops take them as `dstType` attributes.
constexpr int64_t kAclInt8 = 2;
constexpr int64_t kAclInt32 = 3;
constexpr int64_t kAclUInt8 = 4;
constexpr int64_t kAclInt4 = 29;
constexpr int64_t kAclHiFloat8 = 34;
constexpr int64_t kAclFloat8E5M2 = 35;
constexpr int64_t kAclFloat8E4M3 = 36;
constexpr int64_t kAclFloat4E2M1 = 40;
constexpr int64_t kAclFloat4E1M2 = 41;

inline bool isChipFormat(int64_t dstType) {
  return dstType == kAclHiFloat8 || dstType == kAclFloat8E5M2 || dstType == kAclFloat8E4M3 ||
         dstType == kAclFloat4E2M1 || dstType == kAclFloat4E1M2;
}

// The float targets a quantised output may take: float8 e5m2 / e4m3fn rounded to nearest even, as torch converts,
// and hifloat8 rounded half away from zero (npu/hifloat8.h), whose codes a uint8 tensor holds. A float8 output may
// be a float8 tensor or a uint8 one holding its bytes (the op's dstType then says which format).
inline bool isFloatTarget(int64_t dstType) {
  return dstType == kAclHiFloat8 || dstType == kAclFloat8E5M2 || dstType == kAclFloat8E4M3;
}

// The float target an output descriptor declares (ACL_HIFLOAT8 / ACL_FLOAT8_*), or 0 for any other dtype.
inline int64_t floatTargetOf(const aclTensor* out) {
  aclDataType type = ACL_DT_UNDEFINED;
  if (out == nullptr || aclGetDataType(out, &type) != ACLNN_SUCCESS) return 0;
  return isFloatTarget(type) ? static_cast<int64_t>(type) : 0;
}

// The largest finite value of a float target: the quantisers that saturate clamp to it before converting.
inline double floatTargetMax(int64_t dstType) {
  if (dstType == kAclHiFloat8) return npu::hifloat8::kMax;
  return dstType == kAclFloat8E5M2 ? 57344.0 : 448.0;
}

// Values (any floating dtype) converted to the float target and written into `out`.
inline void storeFloat(at::Tensor& out, const at::Tensor& values, int64_t dstType) {
  if (dstType != kAclHiFloat8) {
    const at::ScalarType f8 = dstType == kAclFloat8E5M2 ? at::ScalarType::Float8_e5m2 : at::ScalarType::Float8_e4m3fn;
    const at::Tensor v = values.to(f8);
    out.copy_((out.scalar_type() == at::kByte ? v.view(at::kByte) : v).reshape(out.sizes()));
    return;
  }
  const at::Tensor v = values.to(at::kFloat).contiguous();
  at::Tensor codes = at::empty(v.sizes(), v.options().dtype(at::kByte));
  const float* src = v.const_data_ptr<float>();
  uint8_t* dst = codes.mutable_data_ptr<uint8_t>();
  for (int64_t i = 0; i < v.numel(); ++i) dst[i] = npu::hifloat8::FromFloat(src[i]);
  out.copy_(codes.reshape(out.sizes()));
}

// How an output stores quantized values: their integer range, and how many int4 values one stored element
// carries (1: not packed; 8: int32 carrier, lowest nibble first; 2: int8 carrier, even element low).
struct IntGrid {
  double lo = -128;
  double hi = 127;
  int64_t pack = 1;
};

inline IntGrid int8Grid() { return {}; }
inline IntGrid int4Grid(int64_t pack) { return {-8, 7, pack}; }

// `out`'s grid for `dstType` in ops where an int32 output carries int4 (dynamic quant, AscendQuant, RmsNormQuant,
// GroupQuant): int8 (2) as it is, int32 (3) eight int4 values to an element, int4 (29) two to an int8 element.
// `values` is the unpacked shape the op computes.
inline IntGrid packedGrid(const char* op, int64_t dstType, const at::Tensor& out, at::IntArrayRef values) {
  TORCH_CHECK(!isChipFormat(dstType), op, ": dstType ", dstType,
              " is a chip number format (hifloat8 / float8 / float4) the software NPU does not have");
  IntGrid grid;
  at::ScalarType carrier = at::kChar;
  if (dstType == kAclInt32) {
    grid = int4Grid(8);
    carrier = at::kInt;
  } else if (dstType == kAclInt4) {
    grid = int4Grid(2);
  } else {
    TORCH_CHECK(dstType == kAclInt8, op, ": dstType must be 2 (int8), 3 (int4 packed into int32) or 29 (int4 packed ",
                "into int8), got ", dstType);
  }
  std::vector<int64_t> shape = values.vec();
  TORCH_CHECK(!shape.empty() && shape.back() % grid.pack == 0, op, ": int4 output packs ", grid.pack,
              " values to an element, so the last dimension (", values, ") must be a multiple of ", grid.pack);
  shape.back() /= grid.pack;
  TORCH_CHECK(out.scalar_type() == carrier && out.sizes().equals(shape), op, ": the output must be ", carrier, " ",
              at::IntArrayRef(shape), " for dstType ", dstType, ", got ", out.scalar_type(), " ", out.sizes());
  return grid;
}

// Rounding as the NPU's casts do it: "rint" half to even (CAST_RINT, the default everywhere), "round" half away
// from zero (CAST_ROUND), "floor", "ceil", "trunc".
inline bool isRoundMode(const std::string& mode) {
  return mode == "rint" || mode == "round" || mode == "floor" || mode == "ceil" || mode == "trunc";
}

inline at::Tensor roundBy(const at::Tensor& v, const std::string& mode) {
  if (mode == "round") return at::sign(v) * at::floor(v.abs() + 0.5);
  if (mode == "floor") return at::floor(v);
  if (mode == "ceil") return at::ceil(v);
  if (mode == "trunc") return at::trunc(v);
  return at::round(v);  // rint: half to even
}

// NaN becomes 0 (as the NPU casts it to integers), everything else saturates to [lo, hi]. In double, so that the
// bounds of int32 are exact.
inline at::Tensor saturate(const at::Tensor& rounded, double lo, double hi) {
  return at::clamp(at::nan_to_num(rounded.to(at::kDouble), 0.0), lo, hi);
}

// Integer values (already in [-8, 7]) packed `pack` to an element along the last dimension: eight to an int32
// (lowest nibble first) or two to an int8 (the even element in the low nibble).
inline at::Tensor packInt4(const at::Tensor& values, int64_t pack) {
  at::Tensor v = values.to(at::kLong).contiguous();
  std::vector<int64_t> shape = v.sizes().vec();
  shape.back() /= pack;
  const int64_t* src = v.const_data_ptr<int64_t>();
  if (pack == 8) {
    at::Tensor out = at::empty(shape, v.options().dtype(at::kInt));
    int32_t* dst = out.mutable_data_ptr<int32_t>();
    for (int64_t w = 0; w < out.numel(); ++w) {
      uint32_t word = 0;
      for (int64_t j = 0; j < 8; ++j) word |= (static_cast<uint32_t>(src[w * 8 + j]) & 0xFu) << (4 * j);
      dst[w] = static_cast<int32_t>(word);
    }
    return out;
  }
  at::Tensor out = at::empty(shape, v.options().dtype(at::kChar));
  int8_t* dst = out.mutable_data_ptr<int8_t>();
  for (int64_t w = 0; w < out.numel(); ++w) {
    const uint32_t low = static_cast<uint32_t>(src[w * 2]) & 0xFu;
    const uint32_t high = static_cast<uint32_t>(src[w * 2 + 1]) & 0xFu;
    dst[w] = static_cast<int8_t>(low | (high << 4));
  }
  return out;
}

// Rounded values saturated to `grid` and written into `out` (packed when the grid packs int4).
inline void store(at::Tensor& out, const at::Tensor& rounded, const IntGrid& grid) {
  const at::Tensor q = saturate(rounded, grid.lo, grid.hi);
  if (grid.pack == 1) {
    out.copy_(q.reshape(out.sizes()));
  } else {
    out.copy_(packInt4(q, grid.pack).reshape(out.sizes()));
  }
}

// numerator / t elementwise: a true division in t's dtype (not a reciprocal times numerator), as the kernels do.
inline at::Tensor over(double numerator, const at::Tensor& t) { return at::full_like(t, numerator) / t; }

// float32 1 / d, rounded once (the kernels' constant factors such as 1 / 127).
inline double reciprocalF32(double d) { return static_cast<double>(1.0f / static_cast<float>(d)); }

// The group of each of `rows` rows: groups are given by their cumulative row ends (or, with `counts`, by their
// row counts); a row's group is the number of ends at or below it, so rows past the last end get ends.numel().
inline at::Tensor rowGroups(int64_t rows, const at::Tensor& ends, bool counts) {
  const at::Tensor e = ends.to(at::kLong).contiguous();
  std::vector<int64_t> bounds(e.const_data_ptr<int64_t>(), e.const_data_ptr<int64_t>() + e.numel());
  for (size_t g = 1; counts && g < bounds.size(); ++g) bounds[g] += bounds[g - 1];
  at::Tensor group = at::empty({rows}, at::TensorOptions().dtype(at::kLong));
  int64_t* out = group.mutable_data_ptr<int64_t>();
  size_t g = 0;
  for (int64_t r = 0; r < rows; ++r) {
    while (g < bounds.size() && bounds[g] <= r) ++g;
    out[r] = static_cast<int64_t>(g);
  }
  return group;
}

// The rows of a tensor's last dimension: [prod(leading dims), last].
inline at::Tensor asRows(const at::Tensor& t) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) rows *= t.size(d);
  return t.reshape({rows, t.size(-1)});
}

inline bool isFloat(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
}

}  // namespace npu::opslib::aten::quant
