// AclDataType.h - the descriptor dtype of a PyTorch scalar type, shared by the ATen-backed op
// package and the adapter (header-only: each side keeps its own policy for unknown types).
#pragma once

#include <c10/core/ScalarType.h>
#include <npu/opslib.h>

namespace npu::opslib::aten {

// ACL_DT_UNDEFINED for types opslib does not compute on.
inline aclDataType AclDataTypeOf(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat: return ACL_FLOAT;
    case c10::kHalf: return ACL_FLOAT16;
    case c10::kBFloat16: return ACL_BF16;
    case c10::kDouble: return ACL_DOUBLE;
    case c10::kChar: return ACL_INT8;
    case c10::kByte: return ACL_UINT8;
    case c10::kShort: return ACL_INT16;
    case c10::kInt: return ACL_INT32;
    case c10::kLong: return ACL_INT64;
    case c10::kBool: return ACL_BOOL;
    default: return ACL_DT_UNDEFINED;
  }
}

}  // namespace npu::opslib::aten
