// ShallowCopyKernelNpu.cpp - dense npu and CPU tensors can take each other's data (`param.data = t`), as
// dense CUDA and CPU tensors can: nn.Module.to("npu") then moves parameters in place and keeps their
// identity and hooks. PyTorch's own answer lists the built-in backends only.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace at_npu::native {
namespace {

bool isDense(const at::Tensor& t) {
  return t.layout() == at::kStrided && (t.is_cpu() || t.device().is_privateuseone()) &&
         !t.key_set().has(c10::DispatchKey::Python) && !t.key_set().has(c10::DispatchKey::Functionalize);
}

bool hasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (isDense(self) && isDense(from));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(hasCompatibleShallowCopyType));
}

}  // namespace at_npu::native
