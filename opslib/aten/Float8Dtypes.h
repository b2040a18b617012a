// Float8Dtypes.h - ACL's codes of the 8- and 4-bit float formats, which opslib's own kernels do not compute on:
// float8 tensors describe themselves with them (ACL_FLOAT8_E5M2 / _E4M3FN), and uint8 tensors of hifloat8 codes,
// MX scales (e8m0) or float4 pairs are described as ACL_HIFLOAT8 / ACL_FLOAT8_E8M0 / ACL_FLOAT4_E2M1 / _E1M2 (the
// adapter's AclTensorAs). Shared by the ATen-backed op package and the adapter.
#pragma once

#include <c10/core/ScalarType.h>
#include <npu/opslib.h>

#include <optional>

namespace npu::opslib::aten {

constexpr aclDataType kAclHiFloat8 = static_cast<aclDataType>(34);
constexpr aclDataType kAclFloat8E5M2 = static_cast<aclDataType>(35);
constexpr aclDataType kAclFloat8E4M3FN = static_cast<aclDataType>(36);
constexpr aclDataType kAclFloat8E8M0 = static_cast<aclDataType>(37);
constexpr aclDataType kAclFloat4E2M1 = static_cast<aclDataType>(40);
constexpr aclDataType kAclFloat4E1M2 = static_cast<aclDataType>(41);

// The tensor dtype that holds one of these formats (codes and float4 pairs: uint8), or nullopt.
inline std::optional<c10::ScalarType> float8HolderOf(aclDataType type) {
  if (type == kAclHiFloat8 || type == kAclFloat8E8M0 || type == kAclFloat4E2M1 || type == kAclFloat4E1M2) {
    return c10::kByte;
  }
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
