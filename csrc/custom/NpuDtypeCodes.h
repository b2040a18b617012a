// NpuDtypeCodes.h - the dtype codes `int dtype` arguments of custom ops take: a torch dtype (its ScalarType
// index), or torch_npu's own code, an aclDataType + 256 (torch_npu.float16, torch_npu.hifloat8, ...), which also
// names number formats torch has no dtype for.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <optional>

namespace at_npu::native::dtype_codes {

constexpr int64_t kNpuDtypeOffset = 256;
// torch_npu.hifloat8: codes held in uint8 tensors (HiFloat8Tensors.h).
constexpr int64_t kHiFloat8Code = kNpuDtypeOffset + 34;

// The torch dtype a torch_npu code (aclDataType + 256) stands for; nullopt for a format torch lacks.
inline std::optional<at::ScalarType> torchTypeOfNpuCode(int64_t code) {
  switch (code - kNpuDtypeOffset) {
    case 0: return at::kFloat;
    case 1: return at::kHalf;
    case 2: return at::kChar;
    case 3: return at::kInt;
    case 4: return at::kByte;
    case 6: return at::kShort;
    case 7: return at::ScalarType::UInt16;
    case 8: return at::ScalarType::UInt32;
    case 9: return at::kLong;
    case 10: return at::ScalarType::UInt64;
    case 11: return at::kDouble;
    case 12: return at::kBool;
    case 16: return at::kComplexFloat;
    case 17: return at::kComplexDouble;
    case 27: return at::kBFloat16;
    case 33: return at::ScalarType::ComplexHalf;
    case 35: return at::ScalarType::Float8_e5m2;
    case 36: return at::ScalarType::Float8_e4m3fn;
    case 37: return at::ScalarType::Float8_e8m0fnu;
    case 40: return at::ScalarType::Float4_e2m1fn_x2;
    default: return std::nullopt;
  }
}

// torch_npu's name of a code that names a format torch has no dtype for (torch_npu.hifloat8, ...), or nullptr.
inline const char* npuOnlyFormatName(int64_t code) {
  switch (code - kNpuDtypeOffset) {
    case 13: return "torch_npu.string";
    case 29: return "torch_npu.int4";
    case 30: return "torch_npu.uint1";
    case 34: return "torch_npu.hifloat8";
    case 38: return "torch_npu.float6_e3m2";
    case 39: return "torch_npu.float6_e2m3";
    case 41: return "torch_npu.float4_e1m2fn_x2";
    default: return nullptr;
  }
}

// The torch dtype `code` names. A format torch has no dtype for raises ValueError: the software NPU keeps
// tensors in torch dtypes only (`what` says what the caller does with it); an unknown code raises too.
inline at::ScalarType scalarTypeOfCode(const char* op, const char* arg, int64_t code, const char* what) {
  if (code >= 0 && code < static_cast<int64_t>(at::ScalarType::NumOptions)) {
    return static_cast<at::ScalarType>(code);
  }
  if (const auto type = torchTypeOfNpuCode(code)) return *type;
  const char* npu_only = npuOnlyFormatName(code);
  TORCH_CHECK_VALUE(npu_only == nullptr, op, ": ", arg, " is ", npu_only, ", a chip number format torch has no ",
                    "dtype for; the software NPU cannot ", what, " it. Use a torch dtype (torch.float16, ",
                    "torch.float8_e4m3fn, torch.int8, ...).");
  TORCH_CHECK_VALUE(false, op, ": ", arg, " = ", code, " names no dtype; pass a torch dtype (torch.float16) or a ",
                    "torch_npu dtype (torch_npu.float16, torch_npu.float8_e4m3fn, ...).");
  return at::kFloat;  // not reached
}

}  // namespace at_npu::native::dtype_codes
