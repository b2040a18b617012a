// hifloat8.h - HiFloat8, the Ascend 8-bit float with tapered precision: the value of each of its 256 codes and
// the rounding of a float to the nearest one (ties away from zero). Header-only and torch-free: the op library's
// quantisers and torch_npu's casts share it.
#ifndef NPU_OPSLIB_HIFLOAT8_H_
#define NPU_OPSLIB_HIFLOAT8_H_

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace npu::hifloat8 {

// Layout of a code: a sign bit, then a prefix ("dot") that says how many exponent bits follow, the exponent in
// sign-magnitude form with an implicit leading 1 of its magnitude, and the mantissa in the remaining bits:
//   11 -> 4 exponent bits, 1 mantissa bit     10 -> 3 and 2     01 -> 2 and 3     001 -> 1 and 3
//   0001 -> exponent 0, 3 mantissa bits       0000 -> denormal: the 3 low bits m give 2^(m - 23), m = 0 is zero
// 0x80 (a negative zero) is NaN and 0x6f / 0xef (the pattern just above 2^15 * 1.0) are +-infinity.
constexpr uint8_t kNaN = 0x80;
constexpr uint8_t kInf = 0x6f;
constexpr float kMax = 32768.0f;

constexpr float Pow2(int e) {
  float v = 1.0f;
  for (; e > 0; --e) v *= 2.0f;
  for (; e < 0; ++e) v *= 0.5f;
  return v;
}

// The magnitude of a code without its sign bit (0 .. 0x7f); kInf's slot counts as 1.5 * 2^15 here, the value a
// 1-bit mantissa would give it, which puts the rounding boundary to infinity at 1.25 * 2^15.
constexpr float SlotMagnitude(uint8_t b) {
  if (b < 0x08) return b == 0 ? 0.0f : Pow2(static_cast<int>(b) - 23);
  if (b < 0x10) return 1.0f + static_cast<float>(b & 7) / 8.0f;
  int sign = 0, magnitude = 0, mantissa = 0, mantissa_bits = 0;
  if (b < 0x20) {
    sign = (b >> 3) & 1, magnitude = 1, mantissa = b & 7, mantissa_bits = 3;
  } else if (b < 0x40) {
    const int e = (b >> 3) & 3;
    sign = e >> 1, magnitude = 2 | (e & 1), mantissa = b & 7, mantissa_bits = 3;
  } else if (b < 0x60) {
    const int e = (b >> 2) & 7;
    sign = e >> 2, magnitude = 4 | (e & 3), mantissa = b & 3, mantissa_bits = 2;
  } else {
    const int e = (b >> 1) & 15;
    sign = e >> 3, magnitude = 8 | (e & 7), mantissa = b & 1, mantissa_bits = 1;
  }
  const float fraction = 1.0f + static_cast<float>(mantissa) / static_cast<float>(1 << mantissa_bits);
  return fraction * Pow2(sign ? -magnitude : magnitude);
}

constexpr float ToFloat(uint8_t code) {
  if (code == kNaN) return std::numeric_limits<float>::quiet_NaN();
  const uint8_t b = code & 0x7f;
  const float magnitude = b == kInf ? std::numeric_limits<float>::infinity() : SlotMagnitude(b);
  return (code & 0x80) ? -magnitude : magnitude;
}

// The 128 magnitude slots in ascending order with their codes, and the midpoints between neighbours: a value
// rounds to slot i when midpoint[i - 1] <= |value| < midpoint[i] (a tie goes to the larger magnitude).
struct Table {
  std::array<float, 128> magnitude{};
  std::array<uint8_t, 128> code{};
  std::array<float, 127> midpoint{};
};

constexpr Table MakeTable() {
  Table t;
  std::array<uint8_t, 128> order{};
  for (int i = 0; i < 128; ++i) order[i] = static_cast<uint8_t>(i);
  std::sort(order.begin(), order.end(), [](uint8_t a, uint8_t b) { return SlotMagnitude(a) < SlotMagnitude(b); });
  for (int i = 0; i < 128; ++i) {
    t.code[i] = order[i];
    t.magnitude[i] = SlotMagnitude(order[i]);
  }
  for (int i = 0; i < 127; ++i) t.midpoint[i] = (t.magnitude[i] + t.magnitude[i + 1]) / 2.0f;
  return t;
}

inline constexpr Table kTable = MakeTable();

// Round to nearest, ties away from zero; beyond 1.25 * 2^15 (and infinity) gives infinity, NaN gives NaN, and a
// value that rounds to zero gives code 0 whatever its sign (0x80 is NaN).
inline uint8_t FromFloat(float value) {
  if (std::isnan(value)) return kNaN;
  const float a = std::fabs(value);
  const auto slot = std::upper_bound(kTable.midpoint.begin(), kTable.midpoint.end(), a) - kTable.midpoint.begin();
  const uint8_t code = kTable.code[static_cast<size_t>(slot)];
  return (code != 0 && std::signbit(value)) ? static_cast<uint8_t>(code | 0x80) : code;
}

}  // namespace npu::hifloat8

#endif  // NPU_OPSLIB_HIFLOAT8_H_
