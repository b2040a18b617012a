// MxQuantSupport.h - what the MX quantisation device ops share: the element format a dstType names, the checks of
// their block-scale algorithm, outputs and e8m0 scale tensors, and the blocked quantisation of float32 data along
// one axis (element codes in x's layout, scale codes paired along the axis). Arithmetic in MxFormats.h.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "AtenOpSupport.h"
#include "Float8Dtypes.h"
#include "MxFormats.h"

namespace npu::opslib::aten::mx {

inline const Format& formatOf(const char* op, int64_t dstType) {
  switch (dstType) {
    case 35: return kE5M2;
    case 36: return kE4M3FN;
    case 40: return kE2M1;
    case 41: return kE1M2;
    default: break;
  }
  TORCH_CHECK(false, op, ": the MX element type must be 35 (float8_e5m2), 36 (float8_e4m3fn), 40 (float4_e2m1) or ",
              "41 (float4_e1m2), got ", dstType);
  return kE4M3FN;  // not reached
}

inline bool isFloat4(const Format& f) { return f.ebits + f.mbits == 3; }

inline aclDataType declaredType(const aclTensor* t) {
  aclDataType type = ACL_DT_UNDEFINED;
  aclGetDataType(t, &type);
  return type;
}

inline void checkHalfInput(const char* op, const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kFloat, op,
              ": x must be float16, bfloat16 or float32, got ", x.scalar_type());
}

// Which block scales an element format takes: 0 (OCP) for all, 1 for float8, 2 for float4 e2m1; dstTypeMax
// tunes 1 (a positive maximum, or 0 for the format's) and 2 (0, 6 or 7).
inline void checkScaleAlg(const char* op, const Format& f, int64_t scaleAlg, double dstTypeMax) {
  TORCH_CHECK(scaleAlg >= 0 && scaleAlg <= 2, op, ": scaleAlg must be 0, 1 or 2, got ", scaleAlg);
  TORCH_CHECK(scaleAlg != 1 || !isFloat4(f), op, ": scaleAlg 1 is for float8 outputs, got ", f.name);
  TORCH_CHECK(scaleAlg != 2 || (f.ebits == 2 && f.mbits == 1), op,
              ": scaleAlg 2 is for float4_e2m1 outputs, got ", f.name);
  if (scaleAlg == 0) {
    TORCH_CHECK(dstTypeMax == 0.0, op, ": dstTypeMax tunes scaleAlg 1 and 2; scaleAlg 0 takes 0, got ", dstTypeMax);
  } else if (scaleAlg == 1) {
    TORCH_CHECK(dstTypeMax >= 0.0, op, ": dstTypeMax must be 0 (the format's maximum) or positive, got ", dstTypeMax);
  } else {
    TORCH_CHECK(dstTypeMax == 0.0 || dstTypeMax == 6.0 || dstTypeMax == 7.0, op,
                ": with scaleAlg 2 dstTypeMax must be 0, 6 or 7, got ", dstTypeMax);
  }
}

// The y a quantiser writes: x's shape as a float8 tensor, or its last dimension halved in uint8 for float4.
inline void checkMxOutput(const char* op, const Format& f, const at::Tensor& y, at::IntArrayRef xShape) {
  std::vector<int64_t> shape = xShape.vec();
  if (isFloat4(f)) {
    TORCH_CHECK(!shape.empty() && shape.back() % 2 == 0, op, ": float4 output packs two values to a byte, so x's ",
                "last dimension must be even, got ", xShape);
    shape.back() /= 2;
  }
  const at::ScalarType holder = isFloat4(f) ? at::kByte
                                : f.ebits == 5 ? at::ScalarType::Float8_e5m2
                                               : at::ScalarType::Float8_e4m3fn;
  TORCH_CHECK(y.scalar_type() == holder && y.sizes().equals(shape), op, ": yOut must be ", holder, " ",
              at::IntArrayRef(shape), " for ", f.name, ", got ", y.scalar_type(), " ", y.sizes());
}

inline int64_t pairsOf(int64_t length, int64_t block) { return ((length + block - 1) / block + 1) / 2; }

// Element codes (one per byte, x's layout) written into y: float8 as they are, float4 two to a byte.
inline void storeCodes(at::Tensor& y, const at::Tensor& codes, const Format& f) {
  if (!isFloat4(f)) {
    y.view(at::kByte).copy_(codes.view(y.sizes()));
    return;
  }
  const at::Tensor c = codes.contiguous();
  at::Tensor packed = at::empty(y.sizes(), c.options());
  const uint8_t* src = c.const_data_ptr<uint8_t>();
  uint8_t* dst = packed.mutable_data_ptr<uint8_t>();
  for (int64_t i = 0; i < packed.numel(); ++i) {
    dst[i] = static_cast<uint8_t>((src[2 * i] & 0xF) | ((src[2 * i + 1] & 0xF) << 4));
  }
  y.copy_(packed);
}

// One element code per byte of a float8 tensor or of a uint8 tensor of float4 pairs.
inline at::Tensor loadCodes(const at::Tensor& x, const Format& f) {
  if (!isFloat4(f)) return x.contiguous().view(at::kByte);
  const at::Tensor p = x.contiguous();
  std::vector<int64_t> shape = p.sizes().vec();
  shape.back() *= 2;
  at::Tensor codes = at::empty(shape, p.options());
  const uint8_t* src = p.const_data_ptr<uint8_t>();
  uint8_t* dst = codes.mutable_data_ptr<uint8_t>();
  for (int64_t i = 0; i < p.numel(); ++i) {
    dst[2 * i] = src[i] & 0xF;
    dst[2 * i + 1] = src[i] >> 4;
  }
  return codes;
}

// The largest magnitude of a block; NaN if the block holds one (its scale is then NaN).
struct BlockMax {
  float top = 0.0f;
  bool nan = false;
  void add(float v) {
    if (std::isnan(v)) nan = true;
    top = std::max(top, std::fabs(v));
  }
  float value() const { return nan ? NAN : top; }
};

struct Quantiser {
  const Format* format;
  Round mode;
  int scaleAlg;
  double dstTypeMax;

  // The scale code of a block whose largest magnitude is amax, and the block's element codes.
  uint8_t scale(float amax) const { return scaleCode(amax, *format, scaleAlg, dstTypeMax); }
  uint8_t element(float v, uint8_t scaleCode) const {
    const float s = scaleValue(scaleCode);
    return encode(*format, scaleAlg == 1 ? v * (1.0f / s) : v / s, mode);
  }
};

// x (float32, contiguous) as [outer, len, inner]: blocks of `block` elements along len. codes takes x's layout;
// scales is [outer, pairsOf(len, block), inner, 2], zero-filled beforehand (an odd block count pads with 0).
inline void quantiseAlong(const float* x, int64_t outer, int64_t len, int64_t inner, int64_t block,
                          const Quantiser& q, uint8_t* codes, uint8_t* scales) {
  const int64_t pairs = pairsOf(len, block);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t b = 0; b * block < len; ++b) {
      const int64_t begin = b * block, end = std::min(len, begin + block);
      for (int64_t i = 0; i < inner; ++i) {
        BlockMax amax;
        for (int64_t j = begin; j < end; ++j) amax.add(x[(o * len + j) * inner + i]);
        const uint8_t sc = q.scale(amax.value());
        scales[((o * pairs + b / 2) * inner + i) * 2 + b % 2] = sc;
        for (int64_t j = begin; j < end; ++j) {
          const int64_t at = (o * len + j) * inner + i;
          codes[at] = q.element(x[at], sc);
        }
      }
    }
  }
}

// [outer, len, inner] of a tensor for the blocked dimension `axis`.
inline std::array<int64_t, 3> aroundAxis(at::IntArrayRef shape, int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (int64_t d = axis + 1; d < static_cast<int64_t>(shape.size()); ++d) inner *= shape[d];
  return {outer, shape[axis], inner};
}

inline int64_t normalisedAxis(const char* op, int64_t axis, int64_t dims) {
  TORCH_CHECK(axis >= -dims && axis < dims, op, ": axis must be in [", -dims, ", ", dims, "), got ", axis);
  return axis < 0 ? axis + dims : axis;
}

inline std::vector<int64_t> pairedScaleShape(at::IntArrayRef shape, int64_t axis, int64_t block) {
  std::vector<int64_t> s = shape.vec();
  s[axis] = pairsOf(shape[axis], block);
  s.push_back(2);
  return s;
}

inline void checkScaleOut(const char* op, const char* what, const aclTensor* desc, const at::Tensor& t,
                   const std::vector<int64_t>& shape) {
  TORCH_CHECK(declaredType(desc) == kAclFloat8E8M0 && t.sizes().equals(shape), op, ": ", what,
              " must be e8m0 codes (uint8 described as FLOAT8_E8M0) ", at::IntArrayRef(shape), ", got ",
              t.scalar_type(), " ", t.sizes());
}

// The quantiser the attributes of an op describe (its element format, round mode and block-scale algorithm), checked.
inline Quantiser quantiserOf(const char* op, int64_t dstType, const char* roundMode, int64_t scaleAlg,
                             double dstTypeMax) {
  const Format& f = formatOf(op, dstType);
  checkScaleAlg(op, f, scaleAlg, dstTypeMax);
  return {&f, roundOf(roundMode == nullptr ? "rint" : roundMode, op), static_cast<int>(scaleAlg), dstTypeMax};
}

// values (any float dtype) quantised in blocks of `block` along `axis` into y (checkMxOutput) and scales (e8m0
// codes, pairedScaleShape).
inline void quantiseInto(const at::Tensor& values, int64_t axis, int64_t block, const Quantiser& q, at::Tensor& y,
                         at::Tensor& scales) {
  const at::Tensor xf = values.to(at::kFloat).contiguous();
  at::Tensor codes = at::empty(xf.sizes(), xf.options().dtype(at::kByte));
  at::Tensor sc = at::zeros(scales.sizes(), scales.options());
  const auto [outer, len, inner] = aroundAxis(xf.sizes(), axis);
  quantiseAlong(xf.const_data_ptr<float>(), outer, len, inner, block, q, codes.mutable_data_ptr<uint8_t>(),
                sc.mutable_data_ptr<uint8_t>());
  storeCodes(y, codes, *q.format);
  scales.copy_(sc);
}

}  // namespace npu::opslib::aten::mx
