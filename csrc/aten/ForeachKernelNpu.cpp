// ForeachKernelNpu.cpp - the _foreach_* ops torch.optim's foreach path runs (SGD, Adam, AdamW), each
// one aclnnForeachXxx launch for the whole list. Lists the device ops do not take (mixed dtypes or
// devices, non-contiguous tensors, partial overlap) run PyTorch's per-tensor loop instead.
#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_sqrt_native.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/ElementwiseFastPath.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool floatingDevice(at::ScalarType t) {
  return t == at::kFloat || t == at::kHalf || t == at::kBFloat16 || t == at::kDouble;
}

// All lists of one length, every tensor an npu tensor of self[0]'s device and floating dtype,
// contiguous and of the shape of its self entry; a tensor of another list may share memory with
// its self entry only as that very tensor (the in-place forms read and write in one pass).
bool foreachOnDevice(at::TensorList self, std::initializer_list<at::TensorList> others) {
  if (self.empty()) return false;
  const at::Tensor& first = self[0];
  if (first.device().type() != c10::DeviceType::PrivateUse1 || !floatingDevice(first.scalar_type())) {
    return false;
  }
  const auto plain = [&](const at::Tensor& t) {
    return t.defined() && t.device() == first.device() && t.scalar_type() == first.scalar_type() &&
           t.is_contiguous() && !t.is_conj() && !t.is_neg();
  };
  for (const at::Tensor& t : self) {
    if (!plain(t)) return false;
  }
  for (at::TensorList list : others) {
    if (list.size() != self.size()) return false;
    for (size_t i = 0; i < list.size(); ++i) {
      const at::Tensor& t = list[i];
      if (!plain(t) || t.sizes() != self[i].sizes()) return false;
      if (t.storage().unsafeGetStorageImpl() == self[i].storage().unsafeGetStorageImpl() &&
          t.data_ptr() != self[i].data_ptr()) {
        return false;
      }
    }
  }
  return true;
}

bool realScalar(const at::Scalar& s) { return !s.isComplex(); }

std::vector<at::Tensor> emptyLike(at::TensorList self) {
  std::vector<at::Tensor> out;
  out.reserve(self.size());
  for (const at::Tensor& t : self) out.push_back(emptyLikeDense(t, t.scalar_type()));
  return out;
}

}  // namespace

void _foreach_add__list(at::TensorList self, at::TensorList other, const at::Scalar& alpha) {
  if (!foreachOnDevice(self, {other}) || !realScalar(alpha)) {
    return at::native::foreach_tensor_add_list_kernel_slow_(self, other, alpha);
  }
  MaybeDeviceGuard guard(self[0]);
  EXEC_NPU_CMD(aclnnForeachAddListV2, self, other, alpha, self);
}

std::vector<at::Tensor> _foreach_add_list(at::TensorList self, at::TensorList other,
                                          const at::Scalar& alpha) {
  if (!foreachOnDevice(self, {other}) || !realScalar(alpha)) {
    return at::native::foreach_tensor_add_list_kernel_slow(self, other, alpha);
  }
  MaybeDeviceGuard guard(self[0]);
  std::vector<at::Tensor> out = emptyLike(self);
  EXEC_NPU_CMD(aclnnForeachAddListV2, self, other, alpha, at::TensorList(out));
  return out;
}

void _foreach_add__scalar(at::TensorList self, const at::Scalar& scalar) {
  if (!foreachOnDevice(self, {}) || !realScalar(scalar)) {
    return at::native::foreach_tensor_add_scalar_kernel_slow_(self, scalar);
  }
  MaybeDeviceGuard guard(self[0]);
  EXEC_NPU_CMD(aclnnForeachAddScalarV2, self, scalar, self);
}

void _foreach_mul__scalar(at::TensorList self, const at::Scalar& scalar) {
  if (!foreachOnDevice(self, {}) || !realScalar(scalar)) {
    return at::native::foreach_tensor_mul_scalar_kernel_slow_(self, scalar);
  }
  MaybeDeviceGuard guard(self[0]);
  EXEC_NPU_CMD(aclnnForeachMulScalarV2, self, scalar, self);
}

std::vector<at::Tensor> _foreach_mul_scalar(at::TensorList self, const at::Scalar& scalar) {
  if (!foreachOnDevice(self, {}) || !realScalar(scalar)) {
    return at::native::foreach_tensor_mul_scalar_kernel_slow(self, scalar);
  }
  MaybeDeviceGuard guard(self[0]);
  std::vector<at::Tensor> out = emptyLike(self);
  EXEC_NPU_CMD(aclnnForeachMulScalarV2, self, scalar, at::TensorList(out));
  return out;
}

void _foreach_div__scalarlist(at::TensorList self, at::ArrayRef<at::Scalar> scalars) {
  const bool real = std::all_of(scalars.begin(), scalars.end(), realScalar);
  if (!foreachOnDevice(self, {}) || !real || scalars.size() != self.size()) {
    return at::native::foreach_tensor_div_scalarlist_kernel_slow_(self, scalars);
  }
  MaybeDeviceGuard guard(self[0]);
  EXEC_NPU_CMD(aclnnForeachDivScalarList, self, scalars, self);
}

std::vector<at::Tensor> _foreach_sqrt(at::TensorList self) {
  if (!foreachOnDevice(self, {})) return at::native::foreach_tensor_sqrt_slow(self);
  MaybeDeviceGuard guard(self[0]);
  std::vector<at::Tensor> out = emptyLike(self);
  EXEC_NPU_CMD(aclnnForeachSqrt, self, at::TensorList(out));
  return out;
}

void _foreach_sqrt_(at::TensorList self) {
  if (!foreachOnDevice(self, {})) return at::native::foreach_tensor_sqrt_slow_(self);
  MaybeDeviceGuard guard(self[0]);
  EXEC_NPU_CMD(aclnnForeachSqrt, self, self);
}

void _foreach_lerp__scalar(at::TensorList self, at::TensorList tensors1, const at::Scalar& weight) {
  if (!foreachOnDevice(self, {tensors1}) || !realScalar(weight)) {
    return at::native::foreach_tensor_lerp_list_kernel_slow_(self, tensors1, weight);
  }
  MaybeDeviceGuard guard(self[0]);
  EXEC_NPU_CMD(aclnnForeachLerpScalar, self, tensors1, weight, self);
}

void _foreach_addcmul__scalar(at::TensorList self, at::TensorList tensor1, at::TensorList tensor2,
                              const at::Scalar& value) {
  if (!foreachOnDevice(self, {tensor1, tensor2}) || !realScalar(value)) {
    return at::native::foreach_tensor_addcmul_scalar_slow_(self, tensor1, tensor2, value);
  }
  MaybeDeviceGuard guard(self[0]);
  EXEC_NPU_CMD(aclnnForeachAddcmulScalarV2, self, tensor1, tensor2, value, self);
}

void _foreach_addcdiv__scalarlist(at::TensorList self, at::TensorList tensor1,
                                  at::TensorList tensor2, at::ArrayRef<at::Scalar> scalars) {
  const bool real = std::all_of(scalars.begin(), scalars.end(), realScalar);
  if (!foreachOnDevice(self, {tensor1, tensor2}) || !real || scalars.size() != self.size()) {
    return at::native::foreach_tensor_addcdiv_scalarlist_slow_(self, tensor1, tensor2, scalars);
  }
  MaybeDeviceGuard guard(self[0]);
  EXEC_NPU_CMD(aclnnForeachAddcdivScalarList, self, tensor1, tensor2, scalars, self);
}

}  // namespace at_npu::native
