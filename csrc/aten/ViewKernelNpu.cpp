// ViewKernelNpu.cpp - metadata-only views of npu tensors (no device work); views of a private-format
// storage must stay inside its base tensor.
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>

#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/FormatHelper.h"

namespace at_npu::native {

at::Tensor as_strided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  at::Tensor result = at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
  if (C10_UNLIKELY(anyPrivateFormat())) checkPrivateFormatView(result);
  return result;
}

at::Tensor view(const at::Tensor& self, at::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor _reshape_alias(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

}  // namespace at_npu::native
