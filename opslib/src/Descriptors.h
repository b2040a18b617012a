// Descriptors.h - the aclTensor / aclScalar / aclIntArray descriptors: owned copies of what the
// caller described, so that the caller may free its arrays right after creating them.
#ifndef NPU_OPSLIB_SRC_DESCRIPTORS_H_
#define NPU_OPSLIB_SRC_DESCRIPTORS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ObjectPool.h"
#include "npu/opslib.h"

// A strided view: element (i0..in) is ((T*)data)[offset + sum(i_k * strides[k])], in elements.
// Adapters create and destroy descriptors for every op, so they are pooled and keep their dims
// inline (up to 8 dims with storage dims): a warm launch allocates nothing for them.
struct aclTensor : npu::opslib::Pooled {
  aclTensor() = default;
  aclTensor(const aclTensor&) = delete;  // dims() may point into the object itself
  aclTensor& operator=(const aclTensor&) = delete;

  // Room for sizes, strides and storage dims; dims() points here or into heap_dims.
  void ResizeDims(size_t count) {
    if (count <= kInlineDims) {
      dims_ = inline_dims_;
    } else {
      heap_dims_.resize(count);
      dims_ = heap_dims_.data();
    }
  }
  int64_t* dims() { return dims_; }

  size_t ndim = 0;
  size_t storage_ndim = 0;
  int64_t offset = 0;
  aclDataType dtype = ACL_DT_UNDEFINED;
  aclFormat format = ACL_FORMAT_ND;
  void* data = nullptr;  // the storage base
  // Unique per created descriptor (never 0). Everything but `data` is fixed at creation, so two
  // calls seeing the same id see the same geometry (ValidatedPlan.h).
  uint64_t id = 0;
  // Set by the op that binds this descriptor as one it writes (aclIsOutputTensor).
  mutable bool written = false;

  std::span<const int64_t> sizes() const { return {dims_, ndim}; }
  std::span<const int64_t> strides() const { return {dims_ + ndim, ndim}; }
  // May be empty: the storage extent is then unknown.
  std::span<const int64_t> storage_dims() const { return {dims_ + 2 * ndim, storage_ndim}; }
  int64_t numel() const;
  // As PyTorch's is_contiguous: size-1 dims may have any stride, and an empty tensor is contiguous.
  bool is_contiguous() const;
  // The address of the view's first element (storage base plus offset).
  char* first_element() const;

 private:
  static constexpr size_t kInlineDims = 24;
  int64_t inline_dims_[kInlineDims];
  int64_t* dims_ = inline_dims_;
  std::vector<int64_t> heap_dims_;
};

// One value of `dtype`, kept in its own representation (bool as 0 / 1).
struct aclScalar : npu::opslib::Pooled {
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

// Copies of the scalars it was created from (one per tensor of a foreach op).
struct aclScalarList {
  std::vector<aclScalar> scalars;
};

// Owns its tensors; NULL entries stand for absent optional tensors.
struct aclTensorList {
  std::vector<const aclTensor*> tensors;
  ~aclTensorList() {
    for (const aclTensor* t : tensors) delete t;
  }
};

#endif  // NPU_OPSLIB_SRC_DESCRIPTORS_H_
