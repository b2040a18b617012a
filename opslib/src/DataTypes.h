// DataTypes.h - element types: sizes, names, categories, C++ storage types and the conversions
// between them (float16 / bfloat16 with round-to-nearest-even).
#ifndef NPU_OPSLIB_SRC_DATA_TYPES_H_
#define NPU_OPSLIB_SRC_DATA_TYPES_H_

#include <bit>
#include <cstdint>
#include <type_traits>

#include "npu/opslib.h"

namespace npu::opslib {

// 16-bit floats are stored as their bit patterns; arithmetic always happens in float.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Rounds to nearest, ties to even;
// overflow gives infinity, NaN stays a (quiet) NaN.
constexpr uint16_t FloatToHalfBits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;  // NaN
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent > 15) return sign | 0x7c00u;  // beyond the half range (or infinity)
  if (exponent >= -14) {
    // Normal half: keep the top 10 mantissa bits and round on the 13 dropped ones. A carry out of
    // the mantissa correctly bumps the exponent, up to infinity (0x7bff + 1 == 0x7c00).
    const uint32_t mantissa = magnitude & 0x7fffffu;
    uint32_t result = (static_cast<uint32_t>(exponent + 15) << 10) | (mantissa >> 13);
    const uint32_t dropped = mantissa & 0x1fffu;
    if (dropped > 0x1000u || (dropped == 0x1000u && (result & 1u))) ++result;
    return sign | static_cast<uint16_t>(result);
  }
  if (exponent >= -25) {
    // Subnormal half: the value in units of 2^-24 is significand * 2^(exponent + 1), i.e. the
    // 24-bit significand shifted right by -(exponent + 1) bits (14 .. 24). Rounding up from the
    // largest subnormal yields the smallest normal, which is again the right encoding.
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const int shift = -(exponent + 1);
    uint32_t result = significand >> shift;
    const uint32_t dropped = significand & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (dropped > halfway || (dropped == halfway && (result & 1u))) ++result;
    return sign | static_cast<uint16_t>(result);
  }
  return sign;  // below half of the smallest subnormal: rounds to zero
}

constexpr float HalfBitsToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Subnormal (or zero): mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// bfloat16 is the top half of a float: round the dropped 16 bits to nearest even. Overflow carries
// into the exponent and gives infinity, as it should.
constexpr uint16_t FloatToBFloat16Bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

constexpr float BFloat16BitsToFloat(uint16_t bf16) {
  return std::bit_cast<float>(static_cast<uint32_t>(bf16) << 16);
}

// Value conversion between storage and compute types. Conversions to bool test for non-zero (NaN
// is true, as in PyTorch); everything else is a C++ conversion, through float for the 16-bit floats.
template <typename To, typename From>
inline To Convert(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<From, Half>) {
    return Convert<To>(HalfBitsToFloat(value.bits));
  } else if constexpr (std::is_same_v<From, BFloat16>) {
    return Convert<To>(BFloat16BitsToFloat(value.bits));
  } else if constexpr (std::is_same_v<To, Half>) {
    return Half{FloatToHalfBits(static_cast<float>(value))};
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return BFloat16{FloatToBFloat16Bits(static_cast<float>(value))};
  } else if constexpr (std::is_same_v<To, bool>) {
    return value != From(0);
  } else {
    return static_cast<To>(value);
  }
}

// Reads element i of a storage array. Bool memory is read as bytes: a byte other than 0 / 1 read
// as a C++ bool would be undefined behaviour, and device memory can hold anything.
template <typename T>
inline T LoadElement(const T* data, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    return reinterpret_cast<const uint8_t*>(data)[i] != 0;
  } else {
    return data[i];
  }
}

// The C++ storage type of each element type.
template <aclDataType kType>
struct StorageType;
template <> struct StorageType<ACL_FLOAT> { using type = float; };
template <> struct StorageType<ACL_FLOAT16> { using type = Half; };
template <> struct StorageType<ACL_BF16> { using type = BFloat16; };
template <> struct StorageType<ACL_DOUBLE> { using type = double; };
template <> struct StorageType<ACL_INT8> { using type = int8_t; };
template <> struct StorageType<ACL_UINT8> { using type = uint8_t; };
template <> struct StorageType<ACL_INT16> { using type = int16_t; };
template <> struct StorageType<ACL_INT32> { using type = int32_t; };
template <> struct StorageType<ACL_INT64> { using type = int64_t; };
template <> struct StorageType<ACL_BOOL> { using type = bool; };

// Calls fn(T{}) with the storage type of `type`; returns false for an unsupported type.
template <typename Fn>
inline bool VisitStorageType(aclDataType type, Fn&& fn) {
  switch (type) {
    case ACL_FLOAT: fn(float{}); return true;
    case ACL_FLOAT16: fn(Half{}); return true;
    case ACL_BF16: fn(BFloat16{}); return true;
    case ACL_DOUBLE: fn(double{}); return true;
    case ACL_INT8: fn(int8_t{}); return true;
    case ACL_UINT8: fn(uint8_t{}); return true;
    case ACL_INT16: fn(int16_t{}); return true;
    case ACL_INT32: fn(int32_t{}); return true;
    case ACL_INT64: fn(int64_t{}); return true;
    case ACL_BOOL: fn(bool{}); return true;
    default: return false;
  }
}

// PyTorch's promotion categories, in order: an op's result category is the highest of its inputs'.
enum class TypeCategory { kBool = 0, kIntegral = 1, kFloating = 2 };

constexpr bool IsSupportedType(aclDataType type) {
  switch (type) {
    case ACL_FLOAT: case ACL_FLOAT16: case ACL_BF16: case ACL_DOUBLE: case ACL_INT8:
    case ACL_UINT8: case ACL_INT16: case ACL_INT32: case ACL_INT64: case ACL_BOOL:
      return true;
    default:
      return false;
  }
}

constexpr bool IsFloatingType(aclDataType type) {
  return type == ACL_FLOAT || type == ACL_FLOAT16 || type == ACL_BF16 || type == ACL_DOUBLE;
}

constexpr TypeCategory CategoryOf(aclDataType type) {
  if (type == ACL_BOOL) return TypeCategory::kBool;
  return IsFloatingType(type) ? TypeCategory::kFloating : TypeCategory::kIntegral;
}

// Size in bytes, 0 for types opslib does not compute on.
constexpr int64_t ElementSize(aclDataType type) {
  switch (type) {
    case ACL_FLOAT: case ACL_INT32: return 4;
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: return 2;
    case ACL_DOUBLE: case ACL_INT64: return 8;
    case ACL_INT8: case ACL_UINT8: case ACL_BOOL: return 1;
    default: return 0;
  }
}

constexpr const char* DataTypeName(aclDataType type) {
  switch (type) {
    case ACL_DT_UNDEFINED: return "UNDEFINED";
    case ACL_FLOAT: return "FLOAT";
    case ACL_FLOAT16: return "FLOAT16";
    case ACL_BF16: return "BF16";
    case ACL_DOUBLE: return "DOUBLE";
    case ACL_INT8: return "INT8";
    case ACL_UINT8: return "UINT8";
    case ACL_INT16: return "INT16";
    case ACL_INT32: return "INT32";
    case ACL_INT64: return "INT64";
    case ACL_BOOL: return "BOOL";
    default: break;  // codes this library does not know (ACL_DT_RANGE_ covers every int32)
  }
  return "UNKNOWN";
}

constexpr const char* FormatName(aclFormat format) {
  switch (format) {
    case ACL_FORMAT_UNDEFINED: return "UNDEFINED";
    case ACL_FORMAT_NCHW: return "NCHW";
    case ACL_FORMAT_NHWC: return "NHWC";
    case ACL_FORMAT_ND: return "ND";
    case ACL_FORMAT_NC1HWC0: return "NC1HWC0";
    case ACL_FORMAT_FRACTAL_Z: return "FRACTAL_Z";
    case ACL_FORMAT_FRACTAL_NZ: return "FRACTAL_NZ";
    case ACL_FORMAT_NDHWC: return "NDHWC";
    case ACL_FORMAT_NCDHW: return "NCDHW";
    case ACL_FORMAT_NDC1HWC0: return "NDC1HWC0";
    case ACL_FRACTAL_Z_3D: return "FRACTAL_Z_3D";
  }
  return "UNKNOWN";
}

// Formats whose storage is the strided view itself, i.e. the only ones elementwise ops compute on.
constexpr bool IsPlainFormat(aclFormat format) {
  return format == ACL_FORMAT_ND || format == ACL_FORMAT_NCHW || format == ACL_FORMAT_NHWC ||
         format == ACL_FORMAT_NCDHW || format == ACL_FORMAT_NDHWC || format == ACL_FORMAT_UNDEFINED;
}

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_DATA_TYPES_H_
