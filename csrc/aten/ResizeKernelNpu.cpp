// ResizeKernelNpu.cpp - resize_ and the set_ overloads for npu tensors (storage grows through the hooks).
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <c10/util/strides.h>

#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/framework/FormatCast.h"
#include "csrc/framework/FormatHelper.h"

namespace at_npu::native {
namespace {

// Grows the storage (never shrinks it) so that `nbytes` fit.
void ensureStorageBytes(const at::Tensor& self, size_t nbytes) {
  if (nbytes > self.storage().nbytes()) {
    if (const NPUStorageDesc* desc = privateDesc(self)) {
      TORCH_CHECK(false, "set_: a view of ", nbytes, " bytes does not fit the ", self.storage().nbytes(),
                  "-byte ", formatName(desc->npu_format), " storage of base shape ", desc->base_sizes,
                  "; a private-format storage cannot grow. Convert it with ",
                  "torch_npu.npu_format_cast_(t, 2) first.");
    }
    c10::DeviceGuard guard(self.device());
    at::native::resize_bytes_nocuda(self.storage(), static_cast<int64_t>(nbytes));
  }
}

}  // namespace

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  for (int64_t s : size) TORCH_CHECK(s >= 0, "resize_: negative size ", s, " in ", size);
  auto* impl = self.unsafeGetTensorImpl();
  if (C10_UNLIKELY(anyPrivateFormat()) && self.sizes() != size && privateDesc(self) != nullptr) {
    // A new shape no longer matches the private layout's base shape: back to a plain layout first,
    // as torch_npu resizes in base formats only (every alias keeps its values).
    unformatStorage(self.storage());
  }
  if (self.sizes() != size) impl->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != at::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  const int64_t old_nbytes = static_cast<int64_t>(self.storage().nbytes());
  ensureStorageBytes(self, at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                            self.dtype().itemsize(),
                                                            self.storage_offset()));
  // torch.utils.deterministic.fill_uninitialized_memory: the grown bytes read NaN / the max int, as on CUDA.
  if (C10_UNLIKELY(at::globalContext().deterministicAlgorithms() &&
                   at::globalContext().deterministicFillUninitializedMemory())) {
    at::native::fill_resize_deterministic_(self, old_nbytes);
  }
  return self;
}

at::Tensor& set_source_Storage_storage_offset(at::Tensor& self, c10::Storage source,
                                              int64_t storage_offset, at::IntArrayRef size,
                                              at::IntArrayRef stride) {
  TORCH_CHECK(source.device_type() == c10::DeviceType::PrivateUse1,
              "set_: an npu tensor can only take an npu storage, got one on ", source.device());
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  std::vector<int64_t> strides = stride.vec();
  if (stride.data() == nullptr) {
    auto contiguous = c10::contiguous_strides(size);
    strides.assign(contiguous.begin(), contiguous.end());
  }
  ensureStorageBytes(self, at::detail::computeStorageNbytes(size, strides, self.dtype().itemsize(),
                                                            storage_offset));
  self.unsafeGetTensorImpl()->set_sizes_and_strides(size, strides, storage_offset);
  return self;
}

at::Tensor& set_source_Storage(at::Tensor& self, c10::Storage source) {
  int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_source_Storage_storage_offset(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_source_Tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_source_Storage_storage_offset(self, source.storage(), source.storage_offset(),
                                           source.sizes(), source.strides());
}

at::Tensor& set_(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, c10_npu::NPUCachingAllocator::get(),
                     /*resizable=*/true);
  return set_source_Storage_storage_offset(self, std::move(empty), 0, {0}, {});
}

}  // namespace at_npu::native
