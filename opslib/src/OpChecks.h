// OpChecks.h - argument checks shared by the elementwise ops. Each returns ACLNN_SUCCESS or records
// a message naming the op and the offending values and returns the failure status.
#ifndef NPU_OPSLIB_SRC_OP_CHECKS_H_
#define NPU_OPSLIB_SRC_OP_CHECKS_H_

#include <cstdint>
#include <initializer_list>
#include <span>

#include "Descriptors.h"
#include "npu/opslib.h"

namespace npu::opslib {

struct NamedTensor {
  const char* name;  // "self", "other", "out"
  const aclTensor* tensor;
};

// NULL descriptors and output pointers -> ACLNN_ERR_PARAM_NULLPTR ("aclnnAdd: other is NULL").
aclnnStatus CheckNotNull(const char* op, std::initializer_list<NamedTensor> tensors,
                         const uint64_t* workspace_size, aclOpExecutor* const* executor);

// A dtype opslib computes on and a plain format.
aclnnStatus CheckTensorType(const char* op, const NamedTensor& tensor);

// NumPy broadcasting of `input` to out's shape (input dims align with out's trailing dims).
aclnnStatus CheckBroadcast(const char* op, const NamedTensor& input, const aclTensor& out);

// The element range a view touches, relative to its storage base: geometry only, so an op may keep
// it for a descriptor it sees again (ValidatedPlan.h).
struct ViewRange {
  bool empty = true;  // no elements: touches no memory
  int64_t lowest = 0;
  int64_t highest = 0;
};

// The geometry half of CheckMemory: the view's range, inside its storage when that shape is known.
aclnnStatus CheckViewRange(const char* op, const NamedTensor& tensor, ViewRange* range);
// The address half: data present, every touched byte range in live device memory, all on one
// device, which is returned (-1 if every tensor is empty).
aclnnStatus CheckPlacement(const char* op, std::span<const NamedTensor> tensors,
                           std::span<const ViewRange> ranges, int32_t* device);

// Both halves: the memory of every non-empty view, its data present, the view inside its storage
// (when the storage shape is known), every touched byte range in live device memory, all on one
// device, which is returned (-1 if every tensor is empty).
aclnnStatus CheckMemory(const char* op, std::initializer_list<NamedTensor> tensors, int32_t* device);
aclnnStatus CheckMemory(const char* op, std::span<const NamedTensor> tensors, int32_t* device);

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_OP_CHECKS_H_
