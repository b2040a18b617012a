// UnaryOps.cpp - Relu, Neg, Abs, Exp, Sqrt, Sigmoid, Tanh and Cast: validation, elementwise kernels
// and registration.
#include <array>
#include <cmath>
#include <stdexcept>

#include "DataTypes.h"
#include "ElementwiseIterator.h"
#include "Error.h"
#include "OpChecks.h"
#include "OpRegistry.h"
#include "ValidatedPlan.h"
#include "VectorMath.h"

namespace npu::opslib {
namespace {

enum class UnaryKind { kRelu, kNeg, kAbs, kExp, kSqrt, kSigmoid, kTanh, kCast };

// Which dtypes each op accepts, following PyTorch.
struct UnaryRules {
  bool bool_input;     // a BOOL self is allowed
  bool floating_out;   // out must be floating (the result is floating whatever self is)
  bool any_conversion; // Cast: every supported self / out pair
};

constexpr UnaryRules RulesOf(UnaryKind kind) {
  switch (kind) {
    case UnaryKind::kRelu: case UnaryKind::kNeg: case UnaryKind::kAbs:
      return {false, false, false};
    case UnaryKind::kExp: case UnaryKind::kSqrt: case UnaryKind::kSigmoid: case UnaryKind::kTanh:
      return {true, true, false};
    case UnaryKind::kCast:
      return {true, false, true};
  }
  return {};
}

// Integer negation wraps (-(-128) stays -128 in int8), through uint64 to stay defined.
inline int64_t WrapNeg(int64_t x) { return static_cast<int64_t>(0u - static_cast<uint64_t>(x)); }

// NaN must come out as NaN (PyTorch's relu propagates it): compare, do not max().
template <typename C>
struct ReluFn {
  C operator()(C x) const { return x < C(0) ? C(0) : x; }
};
template <typename C>
struct NegFn {
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, int64_t>) {
      return WrapNeg(x);
    } else {
      return -x;
    }
  }
};
template <typename C>
struct AbsFn {
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, int64_t>) {
      return x < 0 ? WrapNeg(x) : x;
    } else {
      return std::fabs(x);
    }
  }
};
// float (which FLOAT16 / BF16 compute in too) uses VectorMath's vectorisable versions; double
// keeps libm's.
template <typename C>
struct ExpFn {
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>) {
      return ExpFloat(x);
    } else {
      return std::exp(x);
    }
  }
};
template <typename C>
struct SqrtFn {
  C operator()(C x) const { return std::sqrt(x); }
};
template <typename C>
struct SigmoidFn {
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>) {
      return SigmoidFloat(x);
    } else {
      return C(1) / (C(1) + std::exp(-x));
    }
  }
};
template <typename C>
struct TanhFn {
  C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>) {
      return TanhFloat(x);
    } else {
      return std::tanh(x);
    }
  }
};
// The conversion itself happens in the loads and stores around the compute type.
template <typename C>
struct CastFn {
  C operator()(C x) const { return x; }
};

template <typename C>
aclOpExecutor* UnaryExecutor(const char* op, int32_t device, UnaryKind kind, ElementwisePlan plan) {
  if (kind == UnaryKind::kCast) {
    return NewElementwiseExecutor<C, 1>(op, device, std::move(plan), CastFn<C>{});
  }
  if constexpr (!std::is_same_v<C, bool>) {
    switch (kind) {
      case UnaryKind::kRelu: return NewElementwiseExecutor<C, 1>(op, device, std::move(plan), ReluFn<C>{});
      case UnaryKind::kNeg: return NewElementwiseExecutor<C, 1>(op, device, std::move(plan), NegFn<C>{});
      case UnaryKind::kAbs: return NewElementwiseExecutor<C, 1>(op, device, std::move(plan), AbsFn<C>{});
      default: break;
    }
  }
  if constexpr (std::is_floating_point_v<C>) {
    switch (kind) {
      case UnaryKind::kExp: return NewElementwiseExecutor<C, 1>(op, device, std::move(plan), ExpFn<C>{});
      case UnaryKind::kSqrt: return NewElementwiseExecutor<C, 1>(op, device, std::move(plan), SqrtFn<C>{});
      case UnaryKind::kSigmoid:
        return NewElementwiseExecutor<C, 1>(op, device, std::move(plan), SigmoidFn<C>{});
      case UnaryKind::kTanh: return NewElementwiseExecutor<C, 1>(op, device, std::move(plan), TanhFn<C>{});
      default: break;
    }
  }
  // Unreachable: the dtype checks reject these combinations before a plan is made.
  throw std::logic_error("unary op and out dtype were not validated");
}

// Picks the compute type from out's dtype.
aclOpExecutor* MakeUnaryExecutor(const char* op, int32_t device, UnaryKind kind,
                                 aclDataType out_type, ElementwisePlan plan) {
  switch (ComputeKindOf(out_type)) {
    case ComputeKind::kFloat: return UnaryExecutor<float>(op, device, kind, std::move(plan));
    case ComputeKind::kDouble: return UnaryExecutor<double>(op, device, kind, std::move(plan));
    case ComputeKind::kInt64: return UnaryExecutor<int64_t>(op, device, kind, std::move(plan));
    case ComputeKind::kBool: return UnaryExecutor<bool>(op, device, kind, std::move(plan));
  }
  throw std::logic_error("unknown compute kind");
}

aclnnStatus CheckUnaryTypes(const char* op, UnaryKind kind, const aclTensor& self,
                            const aclTensor& out) {
  const UnaryRules rules = RulesOf(kind);
  if (rules.any_conversion) return ACLNN_SUCCESS;
  if (!rules.bool_input && self.dtype == ACL_BOOL) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": self dtype BOOL is not supported");
  }
  if (rules.floating_out) {
    if (!IsFloatingType(out.dtype)) {
      return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": out dtype ", DataTypeName(out.dtype),
                      " is not supported: the result is floating point (FLOAT, FLOAT16, BF16, "
                      "DOUBLE)");
    }
    return ACLNN_SUCCESS;
  }
  if (CategoryOf(self.dtype) > CategoryOf(out.dtype) || out.dtype == ACL_BOOL) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": the result of self ", DataTypeName(self.dtype),
                    " cannot be stored in out dtype ", DataTypeName(out.dtype));
  }
  return ACLNN_SUCCESS;
}

aclnnStatus UnaryGetWorkspaceSize(const char* op, UnaryKind kind, const aclTensor* self,
                                  const aclTensor* out, uint64_t* workspace_size,
                                  aclOpExecutor** executor) {
  const NamedTensor named_self{"self", self};
  const NamedTensor named_out{"out", out};
  if (aclnnStatus s = CheckNotNull(op, {named_self, named_out}, workspace_size, executor)) return s;
  const NamedTensor named[] = {named_out, named_self};
  const aclTensor* operands[] = {out, self};
  const aclTensor* inputs[] = {self};
  thread_local std::array<ValidatedPlan, static_cast<size_t>(UnaryKind::kCast) + 1> validated;
  ValidatedPlan& last = validated[static_cast<size_t>(kind)];
  int32_t device = -1;
  ElementwisePlan plan;
  const auto geometry_checks = [&]() -> aclnnStatus {
    if (aclnnStatus s = CheckTensorType(op, named_self)) return s;
    if (aclnnStatus s = CheckTensorType(op, named_out)) return s;
    if (aclnnStatus s = CheckUnaryTypes(op, kind, *self, *out)) return s;
    return CheckBroadcast(op, named_self, *out);
  };
  if (aclnnStatus s = last.Prepare(op, named, operands, nullptr, geometry_checks, &device, &plan)) return s;
  *executor = MakeUnaryExecutor(op, device, kind, out->dtype, std::move(plan));
  if (OperandHooksActive()) RecordOperands(*executor, inputs, {&out, 1});
  *workspace_size = 0;
  out->written = true;
  return ACLNN_SUCCESS;
}

}  // namespace
}  // namespace npu::opslib

// The workspace phase of each unary op; NPU_OPSLIB_DEFINE_OP adds the launch.
#define NOP_DEFINE_UNARY(Name)                                                                 \
  extern "C" aclnnStatus aclnn##Name##GetWorkspaceSize(const aclTensor* self, aclTensor* out,  \
                                                       uint64_t* workspaceSize,                \
                                                       aclOpExecutor** executor) {             \
    return npu::opslib::GuardApi("aclnn" #Name "GetWorkspaceSize", [&] {                       \
      return npu::opslib::UnaryGetWorkspaceSize("aclnn" #Name, npu::opslib::UnaryKind::k##Name, \
                                                self, out, workspaceSize, executor);           \
    });                                                                                        \
  }

NOP_DEFINE_UNARY(Relu)
NOP_DEFINE_UNARY(Neg)
NOP_DEFINE_UNARY(Abs)
NOP_DEFINE_UNARY(Exp)
NOP_DEFINE_UNARY(Sqrt)
NOP_DEFINE_UNARY(Sigmoid)
NOP_DEFINE_UNARY(Tanh)
NOP_DEFINE_UNARY(Cast)

NPU_OPSLIB_DEFINE_OP(Relu, "self, out");
NPU_OPSLIB_DEFINE_OP(Neg, "self, out");
NPU_OPSLIB_DEFINE_OP(Abs, "self, out");
NPU_OPSLIB_DEFINE_OP(Exp, "self, out");
NPU_OPSLIB_DEFINE_OP(Sqrt, "self, out");
NPU_OPSLIB_DEFINE_OP(Sigmoid, "self, out");
NPU_OPSLIB_DEFINE_OP(Tanh, "self, out");
NPU_OPSLIB_DEFINE_OP(Cast, "self, out");

// Tensor.copy_'s copy: a cast whose output is the tensor written in place.
extern "C" aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor* selfRef, const aclTensor* src,
                                                        uint64_t* workspaceSize, aclOpExecutor** executor) {
  return npu::opslib::GuardApi("aclnnInplaceCopyGetWorkspaceSize", [&] {
    return npu::opslib::UnaryGetWorkspaceSize("aclnnInplaceCopy", npu::opslib::UnaryKind::kCast, src, selfRef,
                                              workspaceSize, executor);
  });
}
NPU_OPSLIB_DEFINE_OP(InplaceCopy, "selfRef, src");
