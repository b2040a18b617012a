// MxFormats.h - the element formats of MX (microscaling) quantisation and their shared scales: float8 e4m3fn /
// e5m2 and float4 e2m1 / e1m2 codes with the NPU's round modes (to nearest even, half away from zero, floor), the
// e8m0 block scale, and the three ways the quantisers choose a block's shared exponent. Scalar, torch-free code.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace npu::opslib::aten::mx {

// A small float: sign bit above ebits exponent and mbits mantissa bits. Magnitude codes 0 .. maxCode are the finite
// values in ascending order; float8 keeps NaN (and e5m2 infinity) above them, float4 has neither.
struct Format {
  const char* name;
  int ebits, mbits, bias;
  uint8_t maxCode;  // largest finite magnitude
  int emax;         // exponent of the largest normal value
  bool hasNaN;
  uint8_t signBit() const { return static_cast<uint8_t>(1u << (ebits + mbits)); }
};

inline constexpr Format kE4M3FN{"float8_e4m3fn", 4, 3, 7, 0x7e, 8, true};
inline constexpr Format kE5M2{"float8_e5m2", 5, 2, 15, 0x7b, 15, true};
inline constexpr Format kE2M1{"float4_e2m1", 2, 1, 1, 0x7, 2, false};
inline constexpr Format kE1M2{"float4_e1m2", 1, 2, 1, 0x7, 0, false};

inline float magnitude(const Format& f, uint8_t code) {
  const int e = code >> f.mbits;
  const int m = code & ((1 << f.mbits) - 1);
  if (e == 0) return std::ldexp(static_cast<float>(m), 1 - f.bias - f.mbits);
  return std::ldexp(1.0f + std::ldexp(static_cast<float>(m), -f.mbits), e - f.bias);
}

inline float maxValue(const Format& f) { return magnitude(f, f.maxCode); }

inline float decode(const Format& f, uint8_t code) {
  const uint8_t mag = code & static_cast<uint8_t>(f.signBit() - 1);
  float v;
  if (mag <= f.maxCode) {
    v = magnitude(f, mag);
  } else if (f.ebits == 5 && mag == 0x7c) {  // e5m2's infinity
    v = INFINITY;
  } else {
    v = NAN;
  }
  return (code & f.signBit()) ? -v : v;
}

enum class Round { kRint, kRound, kFloor };

inline Round roundOf(const std::string& mode, const char* op) {
  if (mode == "rint") return Round::kRint;
  if (mode == "round") return Round::kRound;
  if (mode == "floor") return Round::kFloor;
  throw std::invalid_argument(std::string(op) + ": round mode must be 'rint', 'round' or 'floor', got '" + mode + "'");
}

// The code of `v` in format f: values beyond the largest finite one (and infinities) saturate to it, as the MX
// quantisers do; negative values that round to zero give -0, as IEEE casts do; NaN gives NaN in float8 and zero in
// float4, which has no NaN.
inline uint8_t encode(const Format& f, float v, Round mode) {
  if (std::isnan(v)) return f.hasNaN ? static_cast<uint8_t>(f.signBit() - 1) : 0;
  const bool negative = std::signbit(v);
  const float a = std::fabs(v);
  uint8_t code = f.maxCode;
  if (a < maxValue(f)) {
    // The largest code whose magnitude is <= a (magnitudes ascend with the code).
    int lo = 0, hi = f.maxCode;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (magnitude(f, static_cast<uint8_t>(mid)) <= a) lo = mid; else hi = mid - 1;
    }
    const auto low = static_cast<uint8_t>(lo);
    const float below = a - magnitude(f, low), above = magnitude(f, static_cast<uint8_t>(low + 1)) - a;
    if (below == 0.0f) {
      code = low;
    } else if (mode == Round::kFloor) {
      code = negative ? static_cast<uint8_t>(low + 1) : low;  // toward minus infinity
    } else if (below < above) {
      code = low;
    } else if (above < below) {
      code = static_cast<uint8_t>(low + 1);
    } else {  // a tie: away from zero, or to the even code
      code = (mode == Round::kRound || (low & 1)) ? static_cast<uint8_t>(low + 1) : low;
    }
  }
  return negative ? static_cast<uint8_t>(code | f.signBit()) : code;  // a negative value keeps its sign, even at 0
}

// e8m0: an unsigned power-of-two exponent with bias 127; 255 is NaN.
constexpr int kE8M0Bias = 127;
constexpr uint8_t kE8M0NaN = 255;

// floor(log2(a)) of a positive finite float.
inline int floorLog2(float a) {
  int k = 0;
  std::frexp(a, &k);  // a = f * 2^k, f in [0.5, 1)
  return k - 1;
}

// The block scale's exponent for the block maximum `amax` (nullopt-like kE8M0NaN code for a NaN or infinite
// maximum), clamped to e8m0's range [-127, 127]:
//   scaleAlg 0 (OCP MX): floor(log2(amax)) - emax;
//   scaleAlg 1 (float8): ceil(log2(amax / M)), M = dstTypeMax or the format's largest value;
//   scaleAlg 2 (float4 e2m1): floor(log2(amax)) - emax, one higher when amax's significand exceeds M / 4 (M =
//   dstTypeMax 6 or 7; 0 means 6), so that amax / scale stays within M.
// A zero block takes the smallest scale, 2^-127 (code 0).
inline uint8_t scaleCode(float amax, const Format& f, int scaleAlg, double dstTypeMax) {
  if (!std::isfinite(amax)) return kE8M0NaN;
  int e = -kE8M0Bias;
  if (amax > 0.0f) {
    if (scaleAlg == 1) {
      const float top = dstTypeMax > 0.0 ? static_cast<float>(dstTypeMax) : maxValue(f);
      const float raw = amax / top;
      if (raw > 0.0f) {
        int k = 0;
        const float frac = std::frexp(raw, &k);
        e = frac == 0.5f ? k - 1 : k;  // ceil(log2(raw))
      }
    } else {
      const int k = floorLog2(amax);
      e = k - f.emax;
      if (scaleAlg == 2) {
        const float limit = static_cast<float>((dstTypeMax == 7.0 ? 7.0 : 6.0) / 4.0);
        if (std::ldexp(amax, -k) > limit) ++e;
      }
    }
  }
  return static_cast<uint8_t>(std::clamp(e, -kE8M0Bias, kE8M0Bias) + kE8M0Bias);
}

inline float scaleValue(uint8_t code) {
  return code == kE8M0NaN ? NAN : std::ldexp(1.0f, static_cast<int>(code) - kE8M0Bias);
}

}  // namespace npu::opslib::aten::mx
