// VectorMath.h - float exp and tanh written as straight-line arithmetic, so that loops calling them
// vectorise (libm's expf / tanhf are opaque calls and keep the loops scalar).
#ifndef NPU_OPSLIB_SRC_VECTOR_MATH_H_
#define NPU_OPSLIB_SRC_VECTOR_MATH_H_

#include <bit>
#include <cmath>
#include <cstdint>

namespace npu::opslib {

// e^x in float, within about 1 ulp; NaN -> NaN, overflow -> inf, underflow -> (subnormal or) 0.
// Every step is branch-free (selects only), which is what lets the compiler vectorise it.
inline float ExpFloat(float x) {
  // Beyond these bounds the result is inf or 0 anyway; clamping keeps the exponent arithmetic
  // below in range. Comparisons are false for NaN, so NaN passes through to the result.
  x = x > 100.0f ? 100.0f : x;
  x = x < -110.0f ? -110.0f : x;
  // x = n * ln2 + r with n an integer and |r| <= ln2 / 2. Adding and removing 1.5 * 2^23 rounds
  // to the nearest integer without a rounding instruction (SSE2 has none).
  const float shifter = 12582912.0f;
  const float n_float = (x * 1.44269504088896341f + shifter) - shifter;
  // ln2 in two parts: the high part has few enough bits that n * high is exact (Cody-Waite).
  const float r = (x - n_float * 0.693145751953125f) - n_float * 1.428606820309417232e-6f;
  // e^r by its Taylor series to r^7: on |r| <= 0.35 the remainder is below 1e-8 relative.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // Times 2^n, in two factors so that each is a normal float even when the result is subnormal
  // (n down to -159) or overflows (n up to 145).
  // NaN (whose r and p are NaN already) gets n = 0: converting NaN to an integer is undefined.
  const auto n = static_cast<int32_t>(n_float == n_float ? n_float : 0.0f);
  const int32_t n1 = n / 2;
  const int32_t n2 = n - n1;
  const float scale1 = std::bit_cast<float>(static_cast<uint32_t>(n1 + 127) << 23);
  const float scale2 = std::bit_cast<float>(static_cast<uint32_t>(n2 + 127) << 23);
  return p * scale1 * scale2;
}

// tanh in float, within about 2 ulp. Near 0 an odd polynomial (fitted by least squares on
// |x| <= 0.625 for relative error, 0.8 ulp there): the exp form would cancel catastrophically.
// Elsewhere 1 - 2 / (e^(2|x|) + 1) with x's sign, which saturates to +-1 and keeps NaN.
inline float TanhFloat(float x) {
  const float t = x * x;
  float q = 0.0021427848841995f;
  q = q * t - 0.008177073672413826f;
  q = q * t + 0.02170049212872982f;
  q = q * t - 0.05394670367240906f;
  q = q * t + 0.1333320587873459f;
  q = q * t - 0.3333333134651184f;
  const float small = x + x * t * q;
  const float magnitude = std::fabs(x);
  const float large = std::copysign(1.0f - 2.0f / (ExpFloat(2.0f * magnitude) + 1.0f), x);
  return magnitude < 0.625f ? small : large;
}

// 1 / (1 + e^-x), written as e^x / (1 + e^x) for negative x so that e^-x cannot overflow and
// tiny results keep their value instead of flushing to 0. Saturates to 0 and 1; NaN stays NaN.
inline float SigmoidFloat(float x) {
  const float e = ExpFloat(-std::fabs(x));
  return (x < 0.0f ? e : 1.0f) / (1.0f + e);
}

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_VECTOR_MATH_H_
