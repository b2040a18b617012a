// ElementwiseFastPath.h - the launch path of the common small elementwise calls (a + b, a * 2.0,
// relu(a), x.add_(y, alpha=...)): same-device, same-layout operands or a Python scalar, decided
// from cached tensor metadata without TensorIterator, the output allocated directly and the device
// op launched. Anything else (type promotion between tensors, broadcasting of mixed layouts,
// overlap, PyTorch's error cases) returns false and takes the general path.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

namespace at_npu::native {

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

// out = self op other (alpha scales other for add / sub); false if the fast path does not apply.
bool tryBinaryFast(BinaryOp op, const at::Tensor& self, const at::Tensor& other,
                   const at::Scalar& alpha, at::Tensor* out);
// self op= other.
bool tryBinaryFastInplace(BinaryOp op, at::Tensor& self, const at::Tensor& other,
                          const at::Scalar& alpha);

// A fresh npu tensor with self's sizes and layout (self is non-overlapping and dense) and `dtype`,
// allocated on self's device without going through the dispatcher.
at::Tensor emptyLikeDense(const at::Tensor& self, at::ScalarType dtype);
// A fresh npu tensor of these sizes (contiguous when `stride` is empty, else with these strides,
// both taken from a valid tensor) and `dtype` on `device`: on the current device straight from the
// caching allocator (EmptyKernelNpu.cpp), else through the guarded empty().
at::Tensor emptyDense(at::IntArrayRef size, at::IntArrayRef stride, at::ScalarType dtype,
                      const at::Device& device);

// Makes self's device current for the scope, when it is not already.
class MaybeDeviceGuard {
 public:
  explicit MaybeDeviceGuard(const at::Tensor& self);
  ~MaybeDeviceGuard();
  MaybeDeviceGuard(const MaybeDeviceGuard&) = delete;
  MaybeDeviceGuard& operator=(const MaybeDeviceGuard&) = delete;

 private:
  c10::DeviceIndex previous_ = -1;
};

}  // namespace at_npu::native
