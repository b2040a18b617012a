// BinaryOps.cpp - Add, Sub, Mul, Div: validation in XxxGetWorkspaceSize, elementwise kernels, and
// their registration.
#include <array>
#include <cmath>
#include <stdexcept>

#include "BinaryFunctors.h"
#include "DataTypes.h"
#include "ElementwiseIterator.h"
#include "Error.h"
#include "OpChecks.h"
#include "OpRegistry.h"
#include "ValidatedPlan.h"

namespace npu::opslib {
namespace {

template <typename C>
aclOpExecutor* BinaryExecutor(const char* op, int32_t device, BinaryKind kind,
                              const aclScalar* alpha, ElementwisePlan plan) {
  if constexpr (std::is_same_v<C, bool>) {
    if (kind == BinaryKind::kAdd) {
      return NewElementwiseExecutor<bool, 2>(op, device, std::move(plan),
                                             LogicalAddFn{alpha == nullptr || alpha->ToBool()});
    }
    if (kind == BinaryKind::kMul) {
      return NewElementwiseExecutor<bool, 2>(op, device, std::move(plan), LogicalMulFn{});
    }
  } else {
    const C scale = AlphaAs<C>(alpha);
    switch (kind) {
      case BinaryKind::kAdd:
        if (scale == C(1)) return NewElementwiseExecutor<C, 2>(op, device, std::move(plan), AddFn<C>{});
        return NewElementwiseExecutor<C, 2>(op, device, std::move(plan), AddScaledFn<C>{scale});
      case BinaryKind::kSub:
        if (scale == C(1)) return NewElementwiseExecutor<C, 2>(op, device, std::move(plan), SubFn<C>{});
        return NewElementwiseExecutor<C, 2>(op, device, std::move(plan), SubScaledFn<C>{scale});
      case BinaryKind::kMul:
        return NewElementwiseExecutor<C, 2>(op, device, std::move(plan), MulFn<C>{});
      case BinaryKind::kDiv:
        if constexpr (std::is_floating_point_v<C>) {
          return NewElementwiseExecutor<C, 2>(op, device, std::move(plan), DivFn<C>{});
        }
        break;
    }
  }
  // Unreachable: the dtype checks reject these combinations before a plan is made.
  throw std::logic_error("binary op and out dtype were not validated");
}

// Picks the compute type from out's dtype.
aclOpExecutor* MakeBinaryExecutor(const char* op, int32_t device, BinaryKind kind,
                                  aclDataType out_type, const aclScalar* alpha,
                                  ElementwisePlan plan) {
  switch (ComputeKindOf(out_type)) {
    case ComputeKind::kFloat: return BinaryExecutor<float>(op, device, kind, alpha, std::move(plan));
    case ComputeKind::kDouble: return BinaryExecutor<double>(op, device, kind, alpha, std::move(plan));
    case ComputeKind::kInt64: return BinaryExecutor<int64_t>(op, device, kind, alpha, std::move(plan));
    case ComputeKind::kBool: return BinaryExecutor<bool>(op, device, kind, alpha, std::move(plan));
  }
  throw std::logic_error("unknown compute kind");
}

// PyTorch's rules for which dtypes an op accepts and which out dtype can hold its result.
aclnnStatus CheckBinaryTypes(const char* op, BinaryKind kind, const aclTensor& self,
                             const aclTensor& other, const aclScalar* alpha, const aclTensor& out) {
  if (kind == BinaryKind::kDiv && !IsFloatingType(out.dtype)) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": out dtype ", DataTypeName(out.dtype),
                    " is not supported: true division needs a floating out (FLOAT, FLOAT16, BF16, "
                    "DOUBLE)");
  }
  if (kind == BinaryKind::kSub && (self.dtype == ACL_BOOL || other.dtype == ACL_BOOL ||
                                   out.dtype == ACL_BOOL)) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": subtraction with BOOL is not supported (self ",
                    DataTypeName(self.dtype), ", other ", DataTypeName(other.dtype), ", out ",
                    DataTypeName(out.dtype), "); use a logical op instead");
  }
  const TypeCategory result = std::max(CategoryOf(self.dtype), CategoryOf(other.dtype));
  if (kind != BinaryKind::kDiv && result > CategoryOf(out.dtype)) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": the result of self ", DataTypeName(self.dtype),
                    " and other ", DataTypeName(other.dtype), " cannot be stored in out dtype ",
                    DataTypeName(out.dtype));
  }
  if (alpha != nullptr) {
    if (!IsSupportedType(alpha->dtype)) {
      return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": alpha dtype ", DataTypeName(alpha->dtype),
                      " is not supported");
    }
    if (!IsFloatingType(out.dtype) && alpha->is_floating()) {
      const double value = alpha->ToDouble();
      if (!std::isfinite(value) || std::trunc(value) != value || std::fabs(value) >= 0x1p63) {
        return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": alpha ", value,
                        " is not an integer but out dtype ", DataTypeName(out.dtype),
                        " is not floating point");
      }
    }
  }
  return ACLNN_SUCCESS;
}

aclnnStatus BinaryGetWorkspaceSize(const char* op, BinaryKind kind, const aclTensor* self,
                                   const aclTensor* other, const aclScalar* alpha,
                                   const aclTensor* out, uint64_t* workspace_size,
                                   aclOpExecutor** executor) {
  const NamedTensor named_self{"self", self};
  const NamedTensor named_other{"other", other};
  const NamedTensor named_out{"out", out};
  if (aclnnStatus s = CheckNotNull(op, {named_self, named_other, named_out}, workspace_size, executor)) {
    return s;
  }
  const NamedTensor named[] = {named_out, named_self, named_other};
  const aclTensor* operands[] = {out, self, other};
  const aclTensor* inputs[] = {self, other};
  thread_local std::array<ValidatedPlan, 4> validated;  // one per BinaryKind
  ValidatedPlan& last = validated[static_cast<size_t>(kind)];
  int32_t device = -1;
  ElementwisePlan plan;
  const auto geometry_checks = [&]() -> aclnnStatus {
    for (const NamedTensor& t : {named_self, named_other, named_out}) {
      if (aclnnStatus s = CheckTensorType(op, t)) return s;
    }
    if (aclnnStatus s = CheckBinaryTypes(op, kind, *self, *other, alpha, *out)) return s;
    if (aclnnStatus s = CheckBroadcast(op, named_self, *out)) return s;
    return CheckBroadcast(op, named_other, *out);
  };
  if (aclnnStatus s = last.Prepare(op, named, operands, alpha, geometry_checks, &device, &plan)) return s;
  *executor = MakeBinaryExecutor(op, device, kind, out->dtype, alpha, std::move(plan));
  if (OperandHooksActive()) RecordOperands(*executor, inputs, {&out, 1});
  *workspace_size = 0;
  out->written = true;
  return ACLNN_SUCCESS;
}

}  // namespace
}  // namespace npu::opslib

using npu::opslib::BinaryGetWorkspaceSize;
using npu::opslib::BinaryKind;
using npu::opslib::GuardApi;

extern "C" {

aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                     const aclScalar* alpha, aclTensor* out,
                                     uint64_t* workspaceSize, aclOpExecutor** executor) {
  return GuardApi("aclnnAddGetWorkspaceSize", [&] {
    return BinaryGetWorkspaceSize("aclnnAdd", BinaryKind::kAdd, self, other, alpha, out,
                                  workspaceSize, executor);
  });
}

aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                     const aclScalar* alpha, aclTensor* out,
                                     uint64_t* workspaceSize, aclOpExecutor** executor) {
  return GuardApi("aclnnSubGetWorkspaceSize", [&] {
    return BinaryGetWorkspaceSize("aclnnSub", BinaryKind::kSub, self, other, alpha, out,
                                  workspaceSize, executor);
  });
}

aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                     uint64_t* workspaceSize, aclOpExecutor** executor) {
  return GuardApi("aclnnMulGetWorkspaceSize", [&] {
    return BinaryGetWorkspaceSize("aclnnMul", BinaryKind::kMul, self, other, nullptr, out,
                                  workspaceSize, executor);
  });
}

aclnnStatus aclnnDivGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                     uint64_t* workspaceSize, aclOpExecutor** executor) {
  return GuardApi("aclnnDivGetWorkspaceSize", [&] {
    return BinaryGetWorkspaceSize("aclnnDiv", BinaryKind::kDiv, self, other, nullptr, out,
                                  workspaceSize, executor);
  });
}

}  // extern "C"

NPU_OPSLIB_DEFINE_OP(Add, "self, other, alpha, out");
NPU_OPSLIB_DEFINE_OP(Sub, "self, other, alpha, out");
NPU_OPSLIB_DEFINE_OP(Mul, "self, other, out");
NPU_OPSLIB_DEFINE_OP(Div, "self, other, out");
