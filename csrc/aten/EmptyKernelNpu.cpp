// EmptyKernelNpu.cpp - uninitialised npu tensors from the caching allocator.
#include <ATen/EmptyTensor.h>

#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/core/NPUFunctions.h"

namespace at_npu::native {
namespace {

c10::DeviceGuard guardFor(std::optional<at::Device> device) {
  at::Device d = device.value_or(at::Device(c10::DeviceType::PrivateUse1));
  if (!d.has_index()) d = at::Device(c10::DeviceType::PrivateUse1, c10_npu::current_device());
  c10_npu::check_device_index(d.index());
  return c10::DeviceGuard(d);
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
  return at::detail::empty_generic(size, c10_npu::NPUCachingAllocator::get(),
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   dtype.value_or(at::get_default_dtype_as_scalartype()),
                                   memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                         std::optional<at::Device> device, std::optional<bool> pin_memory) {
  checkOptions(layout, pin_memory);
  auto guard = guardFor(device);
  return at::detail::empty_strided_generic(size, stride, c10_npu::NPUCachingAllocator::get(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           dtype.value_or(at::get_default_dtype_as_scalartype()));
}

}  // namespace at_npu::native
