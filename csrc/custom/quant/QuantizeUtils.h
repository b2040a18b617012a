// QuantizeUtils.h - what the quantization adapters in this folder share: the dtype codes their `dst_type`-like
// arguments take (a torch dtype, or torch_npu's own codes: an aclDataType + 256), the refusal of chip-only number
// formats with an error naming the argument, and the shapes of int4 data packed into wider integers.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "csrc/custom/NpuDtypeCodes.h"
#include "csrc/framework/AclTensorAs.h"
#include "csrc/framework/OpParamMaker.h"

namespace at_npu::native::quant {

// torch_npu spells dtypes torch does not have (hifloat8, int4, float4...) as their aclDataType + 256.
using dtype_codes::kNpuDtypeOffset;
// aclDataType codes the device ops take that no tensor of the software NPU holds.
constexpr int64_t kAclInt4 = 29;

// The integer targets of the quantization ops. kInt4 is torch.quint4x2: int4 values packed into a wider integer.
enum class Target { kInt8, kUInt8, kInt32, kInt4 };

// The chip-only number format (float8, hifloat8, float4, e8m0 scales) a dtype code names, or nullptr.
inline const char* chipFormatName(int64_t code) {
  if (code >= kNpuDtypeOffset) {
    switch (code - kNpuDtypeOffset) {
      case 34: return "hifloat8";
      case 35: return "float8_e5m2";
      case 36: return "float8_e4m3fn";
      case 37: return "float8_e8m0";
      case 38: return "float6_e3m2";
      case 39: return "float6_e2m3";
      case 40: return "float4_e2m1";
      case 41: return "float4_e1m2";
      default: return nullptr;
    }
  }
  if (code < 0 || code >= static_cast<int64_t>(at::ScalarType::NumOptions)) return nullptr;
  switch (static_cast<at::ScalarType>(code)) {
    case at::ScalarType::Float8_e5m2: return "float8_e5m2";
    case at::ScalarType::Float8_e4m3fn: return "float8_e4m3fn";
    case at::ScalarType::Float8_e5m2fnuz: return "float8_e5m2fnuz";
    case at::ScalarType::Float8_e4m3fnuz: return "float8_e4m3fnuz";
    case at::ScalarType::Float8_e8m0fnu: return "float8_e8m0fnu";
    case at::ScalarType::Float4_e2m1fn_x2: return "float4_e2m1fn_x2";
    default: return nullptr;
  }
}

// Raises ValueError naming `arg` when `code` selects a chip-only number format.
inline void refuseChipFormat(const char* op, const char* arg, int64_t code) {
  const char* chip = chipFormatName(code);
  TORCH_CHECK_VALUE(chip == nullptr, op, ": ", arg, " selects ", chip, ", a chip number format (float8 / hifloat8 / ",
                    "float4) the software NPU does not have; use an integer target");
}

// The dtype of the tensor that holds a float target a dtype code names: float8_e5m2 / float8_e4m3fn (torch dtypes
// or torch_npu codes) or torch_npu.hifloat8 (its codes in uint8); nullopt for any other code.
inline std::optional<at::ScalarType> floatTargetHolder(int64_t code) {
  if (code == dtype_codes::kHiFloat8Code) return at::kByte;
  std::optional<at::ScalarType> type;
  if (code >= kNpuDtypeOffset) {
    type = dtype_codes::torchTypeOfNpuCode(code);
  } else if (code >= 0 && code < static_cast<int64_t>(at::ScalarType::NumOptions)) {
    type = static_cast<at::ScalarType>(code);
  }
  if (type == at::ScalarType::Float8_e5m2 || type == at::ScalarType::Float8_e4m3fn) return type;
  return std::nullopt;
}

// A quantised output as its device op reads it: a uint8 tensor holds hifloat8 codes (ACL_HIFLOAT8, from a
// floatTargetHolder dtype); every other output (int8, int32, float8) describes itself.
inline AclTensorAs quantizedOutput(const at::Tensor& y) {
  return {y, y.scalar_type() == at::kByte ? static_cast<aclDataType>(34) : toAclDataType(y.scalar_type())};
}

// The integer target a dtype code names: int8 / qint8, uint8 / quint8, int32 / qint32, quint4x2 (int4), or
// torch_npu's int8 / int32 / uint8 codes. Chip formats raise ValueError naming `arg`; any other code gives
// nullopt, for the caller's own message listing what it accepts.
inline std::optional<Target> targetOf(const char* op, const char* arg, int64_t code) {
  refuseChipFormat(op, arg, code);
  if (code >= kNpuDtypeOffset) {
    switch (code - kNpuDtypeOffset) {
      case 2: return Target::kInt8;
      case 3: return Target::kInt32;
      case 4: return Target::kUInt8;
      default: return std::nullopt;
    }
  }
  if (code < 0 || code >= static_cast<int64_t>(at::ScalarType::NumOptions)) return std::nullopt;
  switch (static_cast<at::ScalarType>(code)) {
    case at::ScalarType::Char: case at::ScalarType::QInt8: return Target::kInt8;
    case at::ScalarType::Byte: case at::ScalarType::QUInt8: return Target::kUInt8;
    case at::ScalarType::Int: case at::ScalarType::QInt32: return Target::kInt32;
    case at::ScalarType::QUInt4x2: return Target::kInt4;
    default: return std::nullopt;
  }
}

inline std::optional<Target> targetOf(const char* op, const char* arg, at::ScalarType type) {
  return targetOf(op, arg, static_cast<int64_t>(type));
}

// int8 or int4 (packed): the targets of most of these ops; nullopt means int8.
inline Target int8OrInt4(const char* op, const char* arg, std::optional<int64_t> code) {
  if (!code.has_value()) return Target::kInt8;
  const std::optional<Target> target = targetOf(op, arg, *code);
  TORCH_CHECK_VALUE(target == Target::kInt8 || target == Target::kInt4, op, ": ", arg,
                    " must be torch.int8 or torch.quint4x2 (int4, packed), got ", *code);
  return *target;
}

// `shape` with its last dimension divided by `per`, the int4 values one stored element carries (8 per int32,
// 2 per int8).
inline std::vector<int64_t> packedShape(const char* op, const char* what, at::IntArrayRef shape, int64_t per) {
  TORCH_CHECK_VALUE(!shape.empty() && shape.back() % per == 0, op, ": int4 output packs ", per,
                    " values to an element, so ", what, "'s last dimension must be a multiple of ", per, ", got ",
                    shape);
  std::vector<int64_t> out = shape.vec();
  out.back() /= per;
  return out;
}

// The aclDataType code of a dtype, as the device ops take their dstType attributes.
inline int64_t aclCode(at::ScalarType type) { return static_cast<int64_t>(toAclDataType(type)); }

inline void checkFloatInput(const char* op, const char* what, const at::Tensor& t) {
  TORCH_CHECK_TYPE(t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kFloat,
                   op, ": ", what, " must be float16, bfloat16 or float32, got ", t.scalar_type());
}

}  // namespace at_npu::native::quant
