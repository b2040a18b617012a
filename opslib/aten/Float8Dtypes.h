// Float8Dtypes.h - ACL's codes of the 8-bit float formats, which opslib's own kernels do not compute on: float8
// tensors describe themselves with them (ACL_FLOAT8_E5M2 / _E4M3FN), and a uint8 tensor of hifloat8 codes is
// described as ACL_HIFLOAT8 (the adapter's AclTensorAs). Shared by the ATen-backed op package and the adapter.
#pragma once

#include <c10/core/ScalarType.h>
#include <npu/opslib.h>

#include <optional>

namespace npu::opslib::aten {

constexpr aclDataType kAclHiFloat8 = static_cast<aclDataType>(34);
constexpr aclDataType kAclFloat8E5M2 = static_cast<aclDataType>(35);
constexpr aclDataType kAclFloat8E4M3FN = static_cast<aclDataType>(36);

// The tensor dtype that holds an 8-bit float format (hifloat8 codes: uint8), or nullopt.
inline std::optional<c10::ScalarType> float8HolderOf(aclDataType type) {
  if (type == kAclHiFloat8) return c10::kByte;
  if (type == kAclFloat8E5M2) return c10::ScalarType::Float8_e5m2;
  if (type == kAclFloat8E4M3FN) return c10::ScalarType::Float8_e4m3fn;
  return std::nullopt;
}

// The descriptor dtype of a float8 tensor dtype, ACL_DT_UNDEFINED for any other.
inline aclDataType float8AclTypeOf(c10::ScalarType type) {
  if (type == c10::ScalarType::Float8_e5m2) return kAclFloat8E5M2;
  if (type == c10::ScalarType::Float8_e4m3fn) return kAclFloat8E4M3FN;
  return ACL_DT_UNDEFINED;
}

}  // namespace npu::opslib::aten
