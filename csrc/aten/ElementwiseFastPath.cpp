// ElementwiseFastPath.cpp - small elementwise calls straight to their device op: checks on cached
// tensor metadata, PyTorch's promotion rule for a tensor and a Python number, direct allocation.
#include "csrc/aten/ElementwiseFastPath.h"

#include <c10/core/DefaultDtype.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/framework/FormatCast.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr auto kNpu = c10::DeviceType::PrivateUse1;

// An npu tensor the device ops take as it is, laid out without gaps or overlap.
bool plainDense(const at::Tensor& t) {
  return t.defined() && t.device().type() == kNpu && deviceOpsSupport(t.scalar_type()) &&
         !t.is_conj() && !t.is_neg() && t.is_non_overlapping_and_dense();
}

// The value of a Python number passed as a tensor (a CPU wrapped number), if `t` is one.
std::optional<at::Scalar> pythonNumber(const at::Tensor& t) {
  if (!t.defined() || !t.unsafeGetTensorImpl()->is_wrapped_number() || !t.is_cpu()) {
    return std::nullopt;
  }
  const void* p = t.const_data_ptr();
  switch (t.scalar_type()) {
    case at::kDouble: return at::Scalar(*static_cast<const double*>(p));
    case at::kLong: return at::Scalar(*static_cast<const int64_t*>(p));
    case at::kBool: return at::Scalar(*static_cast<const bool*>(p));
    default: return std::nullopt;  // complex numbers: the general path
  }
}

at::ScalarType defaultFloat() { return c10::typeMetaToScalarType(c10::get_default_dtype()); }

// PyTorch's result type of a tensor and a Python number: the number never widens the tensor's
// dtype within its category, only lifts it to a higher one (bool < integer < floating).
at::ScalarType resultWithNumber(at::ScalarType self, const at::Scalar& number) {
  if (at::isFloatingType(self)) return self;
  if (number.isFloatingPoint()) return defaultFloat();
  if (self == at::kBool && number.isIntegral(/*includeBool=*/false)) return at::kLong;
  return self;
}

// PyTorch's own error cases for the result dtype stay with the general path.
bool resultAllowed(BinaryOp op, at::ScalarType result, at::ScalarType self, const at::Scalar& alpha) {
  if (op == BinaryOp::kSub && (self == at::kBool || result == at::kBool)) return false;
  if (op == BinaryOp::kAdd || op == BinaryOp::kSub) {
    if (alpha.isComplex()) return false;
    if (at::isIntegralType(result, /*includeBool=*/true) && alpha.isFloatingPoint()) return false;
  }
  return deviceOpsSupport(result);
}

at::ScalarType trueDivision(BinaryOp op, at::ScalarType result) {
  return op == BinaryOp::kDiv && at::isIntegralType(result, /*includeBool=*/true) ? defaultFloat()
                                                                                   : result;
}

// Broadcast shape of two contiguous operands, or false when they do not broadcast.
bool broadcastShape(at::IntArrayRef a, at::IntArrayRef b, c10::SmallVector<int64_t, 6>* shape) {
  const size_t n = std::max(a.size(), b.size());
  shape->resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    (*shape)[i] = da == 1 ? db : da;
  }
  return true;
}

void launchTensor(BinaryOp op, const at::Tensor& self, const at::Tensor& other,
                  const at::Scalar& alpha, at::Tensor& out) {
  switch (op) {
    case BinaryOp::kAdd: EXEC_NPU_CMD(aclnnAdd, self, other, alpha, out); break;
    case BinaryOp::kSub: EXEC_NPU_CMD(aclnnSub, self, other, alpha, out); break;
    case BinaryOp::kMul: EXEC_NPU_CMD(aclnnMul, self, other, out); break;
    case BinaryOp::kDiv: EXEC_NPU_CMD(aclnnDiv, self, other, out); break;
  }
}

// A Python number goes to the device op as a scalar descriptor: no device tensor, no fill.
void launchScalar(BinaryOp op, const at::Tensor& self, const at::Scalar& other,
                  const at::Scalar& alpha, at::Tensor& out) {
  switch (op) {
    case BinaryOp::kAdd: EXEC_NPU_CMD(aclnnAdds, self, other, alpha, out); break;
    case BinaryOp::kSub: EXEC_NPU_CMD(aclnnSubs, self, other, alpha, out); break;
    case BinaryOp::kMul: EXEC_NPU_CMD(aclnnMuls, self, other, out); break;
    case BinaryOp::kDiv: EXEC_NPU_CMD(aclnnDivs, self, other, out); break;
  }
}

bool sameStorage(const at::Tensor& a, const at::Tensor& b) {
  return a.storage().unsafeGetStorageImpl() == b.storage().unsafeGetStorageImpl();
}

}  // namespace

MaybeDeviceGuard::MaybeDeviceGuard(const at::Tensor& self) {
  const c10::DeviceIndex device = self.device().index();
  const c10::DeviceIndex current = c10_npu::current_device();
  if (device != current) {
    c10_npu::set_device(device);
    previous_ = current;
  }
}

MaybeDeviceGuard::~MaybeDeviceGuard() {
  if (previous_ >= 0) c10_npu::set_device_unchecked(previous_);
}

at::Tensor emptyLikeDense(const at::Tensor& self, at::ScalarType dtype) {
  return emptyDense(self.sizes(), self.is_contiguous() ? at::IntArrayRef() : self.strides(), dtype,
                    self.device());
}

bool tryBinaryFast(BinaryOp op, const at::Tensor& self, const at::Tensor& other,
                   const at::Scalar& alpha, at::Tensor* out) {
  if (!plainDense(self)) return false;
  if (std::optional<at::Scalar> number = pythonNumber(other)) {
    if (op == BinaryOp::kSub && number->isBoolean()) return false;  // PyTorch's error
    const at::ScalarType result = trueDivision(op, resultWithNumber(self.scalar_type(), *number));
    if (!resultAllowed(op, result, self.scalar_type(), alpha)) return false;
    MaybeDeviceGuard guard(self);
    *out = emptyLikeDense(self, result);
    adoptInputFormat(*out, self);
    launchScalar(op, self, *number, alpha, *out);
    return true;
  }
  if (!plainDense(other) || other.scalar_type() != self.scalar_type() ||
      other.device() != self.device()) {
    return false;
  }
  const at::ScalarType result = trueDivision(op, self.scalar_type());
  if (!resultAllowed(op, result, self.scalar_type(), alpha)) return false;
  MaybeDeviceGuard guard(self);
  if (self.sizes() == other.sizes()) {
    // One layout for both: the output takes it (as TensorIterator would).
    if (self.strides() != other.strides()) return false;
    *out = emptyLikeDense(self, result);
  } else {
    c10::SmallVector<int64_t, 6> shape;
    if (!self.is_contiguous() || !other.is_contiguous() ||
        !broadcastShape(self.sizes(), other.sizes(), &shape)) {
      return false;
    }
    *out = emptyDense(shape, {}, result, self.device());
  }
  adoptInputFormat(*out, self, other);
  launchTensor(op, self, other, alpha, *out);
  return true;
}

bool tryBinaryFastInplace(BinaryOp op, at::Tensor& self, const at::Tensor& other,
                          const at::Scalar& alpha) {
  if (!plainDense(self)) return false;
  if (std::optional<at::Scalar> number = pythonNumber(other)) {
    if (op == BinaryOp::kSub && number->isBoolean()) return false;  // PyTorch's error
    const at::ScalarType result = trueDivision(op, resultWithNumber(self.scalar_type(), *number));
    if (result != self.scalar_type() || !resultAllowed(op, result, self.scalar_type(), alpha)) {
      return false;
    }
    MaybeDeviceGuard guard(self);
    launchScalar(op, self, *number, alpha, self);
    return true;
  }
  if (!other.defined() || other.device() != self.device() ||
      other.scalar_type() != self.scalar_type() || !deviceOpsSupport(other.scalar_type()) ||
      other.is_conj() || other.is_neg() || other.dim() > self.dim()) {
    return false;
  }
  const at::ScalarType result = trueDivision(op, self.scalar_type());
  if (result != self.scalar_type() || !resultAllowed(op, result, self.scalar_type(), alpha)) {
    return false;
  }
  // other must broadcast to self's shape, and may share memory with self only as the very same
  // view (PyTorch rejects partial overlap).
  const auto s = self.sizes();
  const auto o = other.sizes();
  for (size_t i = 0; i < o.size(); ++i) {
    const int64_t dim = o[o.size() - 1 - i];
    if (dim != 1 && dim != s[s.size() - 1 - i]) return false;
  }
  if (sameStorage(self, other) &&
      !(self.data_ptr() == other.data_ptr() && s == o && self.strides() == other.strides())) {
    return false;
  }
  MaybeDeviceGuard guard(self);
  launchTensor(op, self, other, alpha, self);
  return true;
}

}  // namespace at_npu::native
