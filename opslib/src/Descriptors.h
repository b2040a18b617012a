// Descriptors.h - the aclTensor / aclScalar / aclIntArray descriptors: owned copies of what the
// caller described, so that the caller may free its arrays right after creating them.
#ifndef NPU_OPSLIB_SRC_DESCRIPTORS_H_
#define NPU_OPSLIB_SRC_DESCRIPTORS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "npu/opslib.h"

// A strided view: element (i0..in) is ((T*)data)[offset + sum(i_k * strides[k])], in elements.
struct aclTensor {
  // Sizes, strides and storage dims in one array: adapters create and destroy descriptors for
  // every op, so each one is a single allocation besides the descriptor itself.
  std::vector<int64_t> dims;
  size_t ndim = 0;
  size_t storage_ndim = 0;
  int64_t offset = 0;
  aclDataType dtype = ACL_DT_UNDEFINED;
  aclFormat format = ACL_FORMAT_ND;
  void* data = nullptr;  // the storage base
  // Set by the op that binds this descriptor as one it writes (aclIsOutputTensor).
  mutable bool written = false;

  std::span<const int64_t> sizes() const { return {dims.data(), ndim}; }
  std::span<const int64_t> strides() const { return {dims.data() + ndim, ndim}; }
  // May be empty: the storage extent is then unknown.
  std::span<const int64_t> storage_dims() const { return {dims.data() + 2 * ndim, storage_ndim}; }
  int64_t numel() const;
};

// One value of `dtype`, kept in its own representation (bool as 0 / 1).
struct aclScalar {
  aclDataType dtype = ACL_DT_UNDEFINED;
  union {
    double f64;
    int64_t i64;
    bool b;
  } value{};

  bool is_floating() const;
  double ToDouble() const;
  int64_t ToInt64() const;  // floating values truncate toward zero
  bool ToBool() const;      // non-zero
};

struct aclIntArray {
  std::vector<int64_t> values;
};

// Owns its tensors; NULL entries stand for absent optional tensors.
struct aclTensorList {
  std::vector<const aclTensor*> tensors;
  ~aclTensorList() {
    for (const aclTensor* t : tensors) delete t;
  }
};

#endif  // NPU_OPSLIB_SRC_DESCRIPTORS_H_
