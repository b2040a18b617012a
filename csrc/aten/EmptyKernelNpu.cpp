// EmptyKernelNpu.cpp - uninitialised npu tensors (NPUStorageImpl storages from the caching allocator).
#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/TensorFactories.h>

#include "csrc/aten/ElementwiseFastPath.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/core/NPUFunctions.h"
#include "csrc/framework/StorageDesc.h"

namespace at_npu::native {
namespace {

c10::DeviceGuard guardFor(std::optional<at::Device> device) {
  at::Device d = device.value_or(at::Device(c10::DeviceType::PrivateUse1));
  if (!d.has_index()) d = at::Device(c10::DeviceType::PrivateUse1, c10_npu::current_device());
  c10_npu::check_device_index(d.index());
  return c10::DeviceGuard(d);
}

// npu storages are NPUStorageImpl, so that any of them can later take a private format.
c10::Storage npuStorage(size_t nbytes) {
  c10::Allocator* allocator = c10_npu::NPUCachingAllocator::get();
  return c10::Storage(makeNpuStorage(c10::StorageImpl::use_byte_size_t(), static_cast<int64_t>(nbytes),
                                     allocator->allocate(nbytes), allocator, /*resizable=*/true));
}

// torch.use_deterministic_algorithms(True) with torch.utils.deterministic.fill_uninitialized_memory
// (its default): a new tensor reads NaN (floating) or the largest value (integers), as on CUDA.
at::Tensor& fillIfDeterministic(at::Tensor& t) {
  if (C10_UNLIKELY(at::globalContext().deterministicAlgorithms() &&
                   at::globalContext().deterministicFillUninitializedMemory())) {
    at::native::fill_empty_deterministic_(t);
  }
  return t;
}

void checkOptions(std::optional<at::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided,
              "npu tensors support only the strided layout, got ", *layout);
  TORCH_CHECK(!pin_memory.value_or(false), "only CPU tensors can be pinned; pin the host tensor ",
              "and copy it to npu instead");
}

}  // namespace

at::Tensor empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                 std::optional<at::Layout> layout, std::optional<at::Device> device,
                 std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  checkOptions(layout, pin_memory);
  auto guard = guardFor(device);
  at::detail::check_size_nonnegative(size);
  const auto meta = c10::scalarTypeToTypeMeta(dtype.value_or(at::get_default_dtype_as_scalartype()));
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      npuStorage(at::detail::computeStorageNbytesContiguous(size, meta.itemsize())),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), meta);
  if (size.size() != 1 || size[0] != 0) t.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != at::MemoryFormat::Contiguous) {
    t.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return fillIfDeterministic(t);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                         std::optional<at::Device> device, std::optional<bool> pin_memory) {
  checkOptions(layout, pin_memory);
  auto guard = guardFor(device);
  at::detail::check_size_nonnegative(size);
  const auto meta = c10::scalarTypeToTypeMeta(dtype.value_or(at::get_default_dtype_as_scalartype()));
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      npuStorage(at::detail::computeStorageNbytes(size, stride, meta.itemsize())),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), meta);
  t.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride);
  return fillIfDeterministic(t);
}

at::Tensor emptyDense(at::IntArrayRef size, at::IntArrayRef stride, at::ScalarType dtype,
                      const at::Device& device) {
  if (device.index() != c10_npu::current_device()) {  // another device: the guarded path
    return stride.empty() ? empty(size, dtype, std::nullopt, device, std::nullopt, std::nullopt)
                          : empty_strided(size, stride, dtype, std::nullopt, device, std::nullopt);
  }
  // Sizes and strides come from a valid tensor and the device is current: no checks, no guard.
  const auto meta = c10::scalarTypeToTypeMeta(dtype);
  const size_t nbytes = stride.empty() ? at::detail::computeStorageNbytesContiguous(size, meta.itemsize())
                                       : at::detail::computeStorageNbytes(size, stride, meta.itemsize());
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      npuStorage(nbytes), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), meta);
  if (stride.empty()) {
    if (size.size() != 1 || size[0] != 0) t.unsafeGetTensorImpl()->set_sizes_contiguous(size);
  } else {
    t.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride);
  }
  return t;
}

}  // namespace at_npu::native
