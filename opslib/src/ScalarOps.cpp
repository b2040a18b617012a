// ScalarOps.cpp - Adds, Subs, Muls, Divs: a tensor and a host scalar (Python numbers in PyTorch),
// the scalar converted once to the compute type and held by the kernel, so no device tensor is
// filled for it.
#include <cmath>
#include <stdexcept>

#include "BinaryFunctors.h"
#include "DataTypes.h"
#include "ElementwiseIterator.h"
#include "Error.h"
#include "OpChecks.h"
#include "OpRegistry.h"
#include "OperandHooks.h"

namespace npu::opslib {
namespace {

// out = fn(self, value): a binary element function with its right operand fixed.
template <typename C, typename Fn>
struct WithScalar {
  Fn fn;
  C value;
  C operator()(C a) const { return fn(a, value); }
};

template <typename C>
C ScalarAs(const aclScalar& s) {
  if constexpr (std::is_same_v<C, bool>) {
    return s.ToBool();
  } else if constexpr (std::is_same_v<C, int64_t>) {
    return s.ToInt64();
  } else {
    return static_cast<C>(s.ToDouble());
  }
}

template <typename C, typename Fn>
aclOpExecutor* Make(const char* op, int32_t device, ElementwisePlan plan, Fn fn, C value) {
  return NewElementwiseExecutor<C, 1>(op, device, std::move(plan), WithScalar<C, Fn>{fn, value});
}

template <typename C>
aclOpExecutor* ScalarExecutor(const char* op, int32_t device, BinaryKind kind, const aclScalar& other,
                              const aclScalar* alpha, ElementwisePlan plan) {
  const C value = ScalarAs<C>(other);
  if constexpr (std::is_same_v<C, bool>) {
    if (kind == BinaryKind::kAdd) {
      return Make<bool>(op, device, std::move(plan), LogicalAddFn{alpha == nullptr || alpha->ToBool()},
                        value);
    }
    if (kind == BinaryKind::kMul) return Make<bool>(op, device, std::move(plan), LogicalMulFn{}, value);
  } else {
    const C scale = AlphaAs<C>(alpha);
    switch (kind) {
      case BinaryKind::kAdd:
        if (scale == C(1)) return Make<C>(op, device, std::move(plan), AddFn<C>{}, value);
        return Make<C>(op, device, std::move(plan), AddScaledFn<C>{scale}, value);
      case BinaryKind::kSub:
        if (scale == C(1)) return Make<C>(op, device, std::move(plan), SubFn<C>{}, value);
        return Make<C>(op, device, std::move(plan), SubScaledFn<C>{scale}, value);
      case BinaryKind::kMul:
        return Make<C>(op, device, std::move(plan), MulFn<C>{}, value);
      case BinaryKind::kDiv:
        if constexpr (std::is_floating_point_v<C>) {
          return Make<C>(op, device, std::move(plan), DivFn<C>{}, value);
        }
        break;
    }
  }
  throw std::logic_error("scalar op and out dtype were not validated");
}

// A scalar that must hold an integer (alpha, or the scalar of an integral or bool out).
aclnnStatus CheckIntegralValue(const char* op, const char* name, const aclScalar& s,
                               aclDataType out) {
  if (!s.is_floating()) return ACLNN_SUCCESS;
  const double value = s.ToDouble();
  if (!std::isfinite(value) || std::trunc(value) != value || std::fabs(value) >= 0x1p63) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": ", name, " ", value,
                    " is not an integer but out dtype ", DataTypeName(out), " is not floating point");
  }
  return ACLNN_SUCCESS;
}

aclnnStatus CheckScalarTypes(const char* op, BinaryKind kind, const aclTensor& self,
                             const aclScalar& other, const aclScalar* alpha, const aclTensor& out) {
  for (const aclScalar* s : {&other, alpha}) {
    if (s != nullptr && !IsSupportedType(s->dtype)) {
      return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": scalar dtype ", DataTypeName(s->dtype),
                      " is not supported");
    }
  }
  if (kind == BinaryKind::kDiv && !IsFloatingType(out.dtype)) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": out dtype ", DataTypeName(out.dtype),
                    " is not supported: true division needs a floating out (FLOAT, FLOAT16, BF16, "
                    "DOUBLE)");
  }
  if (kind == BinaryKind::kSub && (self.dtype == ACL_BOOL || out.dtype == ACL_BOOL)) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": subtraction with BOOL is not supported (self ",
                    DataTypeName(self.dtype), ", out ", DataTypeName(out.dtype), ")");
  }
  if (kind != BinaryKind::kDiv && CategoryOf(self.dtype) > CategoryOf(out.dtype)) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": the result of self ", DataTypeName(self.dtype),
                    " cannot be stored in out dtype ", DataTypeName(out.dtype));
  }
  if (!IsFloatingType(out.dtype)) {
    if (aclnnStatus s = CheckIntegralValue(op, "other", other, out.dtype)) return s;
    if (alpha != nullptr) {
      if (aclnnStatus s = CheckIntegralValue(op, "alpha", *alpha, out.dtype)) return s;
    }
  }
  return ACLNN_SUCCESS;
}

aclnnStatus ScalarGetWorkspaceSize(const char* op, BinaryKind kind, const aclTensor* self,
                                   const aclScalar* other, const aclScalar* alpha,
                                   const aclTensor* out, uint64_t* workspace_size,
                                   aclOpExecutor** executor) {
  const NamedTensor named_self{"self", self};
  const NamedTensor named_out{"out", out};
  if (aclnnStatus s = CheckNotNull(op, {named_self, named_out}, workspace_size, executor)) return s;
  if (other == nullptr) return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR, op, ": other is NULL");
  if (aclnnStatus s = CheckTensorType(op, named_self)) return s;
  if (aclnnStatus s = CheckTensorType(op, named_out)) return s;
  if (aclnnStatus s = CheckScalarTypes(op, kind, *self, *other, alpha, *out)) return s;
  if (aclnnStatus s = CheckBroadcast(op, named_self, *out)) return s;
  int32_t device = -1;
  if (aclnnStatus s = CheckMemory(op, {named_out, named_self}, &device)) return s;

  const aclTensor* inputs[] = {self};
  ElementwisePlan plan = MakeElementwisePlan(*out, inputs);
  switch (ComputeKindOf(out->dtype)) {
    case ComputeKind::kFloat:
      *executor = ScalarExecutor<float>(op, device, kind, *other, alpha, std::move(plan));
      break;
    case ComputeKind::kDouble:
      *executor = ScalarExecutor<double>(op, device, kind, *other, alpha, std::move(plan));
      break;
    case ComputeKind::kInt64:
      *executor = ScalarExecutor<int64_t>(op, device, kind, *other, alpha, std::move(plan));
      break;
    case ComputeKind::kBool:
      *executor = ScalarExecutor<bool>(op, device, kind, *other, alpha, std::move(plan));
      break;
  }
  if (OperandHooksActive()) RecordOperands(*executor, inputs, {&out, 1});
  *workspace_size = 0;
  out->written = true;
  return ACLNN_SUCCESS;
}

}  // namespace
}  // namespace npu::opslib

using npu::opslib::BinaryKind;
using npu::opslib::GuardApi;
using npu::opslib::ScalarGetWorkspaceSize;

extern "C" {

aclnnStatus aclnnAddsGetWorkspaceSize(const aclTensor* self, const aclScalar* other,
                                      const aclScalar* alpha, aclTensor* out,
                                      uint64_t* workspaceSize, aclOpExecutor** executor) {
  return GuardApi("aclnnAddsGetWorkspaceSize", [&] {
    return ScalarGetWorkspaceSize("aclnnAdds", BinaryKind::kAdd, self, other, alpha, out,
                                  workspaceSize, executor);
  });
}

aclnnStatus aclnnSubsGetWorkspaceSize(const aclTensor* self, const aclScalar* other,
                                      const aclScalar* alpha, aclTensor* out,
                                      uint64_t* workspaceSize, aclOpExecutor** executor) {
  return GuardApi("aclnnSubsGetWorkspaceSize", [&] {
    return ScalarGetWorkspaceSize("aclnnSubs", BinaryKind::kSub, self, other, alpha, out,
                                  workspaceSize, executor);
  });
}

aclnnStatus aclnnMulsGetWorkspaceSize(const aclTensor* self, const aclScalar* other, aclTensor* out,
                                      uint64_t* workspaceSize, aclOpExecutor** executor) {
  return GuardApi("aclnnMulsGetWorkspaceSize", [&] {
    return ScalarGetWorkspaceSize("aclnnMuls", BinaryKind::kMul, self, other, nullptr, out,
                                  workspaceSize, executor);
  });
}

aclnnStatus aclnnDivsGetWorkspaceSize(const aclTensor* self, const aclScalar* other, aclTensor* out,
                                      uint64_t* workspaceSize, aclOpExecutor** executor) {
  return GuardApi("aclnnDivsGetWorkspaceSize", [&] {
    return ScalarGetWorkspaceSize("aclnnDivs", BinaryKind::kDiv, self, other, nullptr, out,
                                  workspaceSize, executor);
  });
}

}  // extern "C"

NPU_OPSLIB_DEFINE_OP(Adds, "self, other, alpha, out");
NPU_OPSLIB_DEFINE_OP(Subs, "self, other, alpha, out");
NPU_OPSLIB_DEFINE_OP(Muls, "self, other, out");
NPU_OPSLIB_DEFINE_OP(Divs, "self, other, out");
