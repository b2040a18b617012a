// ValidatedPlan.h - the operand geometry an elementwise op last validated and planned on a thread,
// so that a repeat call with the same descriptors checks only where their addresses now point.
#ifndef NPU_OPSLIB_SRC_VALIDATED_PLAN_H_
#define NPU_OPSLIB_SRC_VALIDATED_PLAN_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <span>

#include "Descriptors.h"
#include "ElementwiseIterator.h"
#include "OpChecks.h"

namespace npu::opslib {

// Adapters reuse a descriptor for every call with the same operand geometry and only rebind its
// address (aclSetRawTensorAddr). Everything else in a descriptor is fixed at creation and its id
// is unique, so equal ids (and an equal scalar) mean the dtype, format, broadcast and storage
// checks and the plan all come out as last time. One per op and thread: a hit costs a few
// compares, a miss the full checks.
class ValidatedPlan {
 public:
  // `operands` out first, as the plan orders them; `scalar` may be NULL.
  bool Matches(std::span<const aclTensor* const> operands, const aclScalar* scalar) const {
    if (operands.size() != count_) return false;
    for (size_t k = 0; k < count_; ++k) {
      if (operands[k]->id != ids_[k]) return false;
    }
    if (scalar == nullptr) return scalar_dtype_ == ACL_DT_UNDEFINED;
    return scalar->dtype == scalar_dtype_ &&
           std::memcmp(&scalar->value, &scalar_bits_, sizeof(scalar_bits_)) == 0;
  }

  // After every check passed: keeps the geometry's view ranges and plan.
  void Remember(std::span<const aclTensor* const> operands, const aclScalar* scalar,
                std::span<const ViewRange> ranges, const ElementwisePlan& plan) {
    count_ = 0;  // invalid while half written
    for (size_t k = 0; k < operands.size(); ++k) {
      if (operands[k]->id == 0) return;  // not from aclCreateTensor: never cached
      ids_[k] = operands[k]->id;
      ranges_[k] = ranges[k];
    }
    scalar_dtype_ = scalar == nullptr ? ACL_DT_UNDEFINED : scalar->dtype;
    if (scalar != nullptr) std::memcpy(&scalar_bits_, &scalar->value, sizeof(scalar_bits_));
    plan_ = plan;
    count_ = operands.size();
  }

  std::span<const ViewRange> ranges() const { return {ranges_.data(), count_}; }

  // The device and plan of an elementwise op: on a repeat call only where the addresses lie; else
  // `geometry_checks()` (the op's dtype and broadcast rules), the view and placement checks and a
  // new plan, remembered. `named` and `operands` list out first, then the inputs.
  template <typename GeometryChecks>
  aclnnStatus Prepare(const char* op, std::span<const NamedTensor> named,
                      std::span<const aclTensor* const> operands, const aclScalar* scalar,
                      GeometryChecks geometry_checks, int32_t* device, ElementwisePlan* plan) {
    if (Matches(operands, scalar)) {
      if (aclnnStatus s = CheckPlacement(op, named, ranges(), device)) return s;
      *plan = Rebind(operands);
      return ACLNN_SUCCESS;
    }
    if (aclnnStatus s = geometry_checks()) return s;
    std::array<ViewRange, kMaxOperands> ranges;
    const std::span<ViewRange> used(ranges.data(), operands.size());
    for (size_t k = 0; k < used.size(); ++k) {
      if (aclnnStatus s = CheckViewRange(op, named[k], &used[k])) return s;
    }
    if (aclnnStatus s = CheckPlacement(op, named, used, device)) return s;
    *plan = MakeElementwisePlan(*operands[0], operands.subspan(1));
    Remember(operands, scalar, used, *plan);
    return ACLNN_SUCCESS;
  }

  // The remembered plan with the operands' current addresses.
  ElementwisePlan Rebind(std::span<const aclTensor* const> operands) const {
    ElementwisePlan plan = plan_;
    for (size_t k = 0; k < count_; ++k) {
      plan.data[k] = operands[k]->data != nullptr ? operands[k]->first_element() : nullptr;
    }
    return plan;
  }

 private:
  static_assert(sizeof(aclScalar::value) == sizeof(uint64_t));
  size_t count_ = 0;
  std::array<uint64_t, kMaxOperands> ids_{};
  std::array<ViewRange, kMaxOperands> ranges_{};
  aclDataType scalar_dtype_ = ACL_DT_UNDEFINED;
  uint64_t scalar_bits_ = 0;
  ElementwisePlan plan_;
};

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_VALIDATED_PLAN_H_
