// PrefetchKernelNpu.cpp - npu_prefetch: brings up to max_size bytes of a tensor's storage, from `offset`, into the
// cache ahead of the op that reads them (on a chip: L2 from HBM). On the software NPU the device memory is host
// memory, so the stream touches the range's cache lines in stream order; `dependency` orders it in graphs only.
#include <algorithm>

#include "csrc/core/NPUStream.h"
#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/DeviceTask.h"

namespace at_npu::native {
namespace {

// Bytes of the tensor's elements from its first one (the range upstream measures offsets in).
int64_t prefetchSpan(const at::Tensor& self, int64_t max_size, int64_t offset) {
  TORCH_CHECK(max_size > 0, "max_size should be greater than zero, but got ", max_size);
  TORCH_CHECK(offset >= 0, "offset should not be smaller than zero, but got ", offset);
  const int64_t tensor_size = self.numel() * static_cast<int64_t>(self.element_size());
  TORCH_CHECK(tensor_size > offset, "offset out of range of tensor size, tensor size: ", tensor_size,
              ", offset: ", offset);
  return std::min(max_size, tensor_size - offset);
}

}  // namespace

void npu_prefetch(const at::Tensor& self, const std::optional<at::Tensor>& dependency, int64_t max_size,
                  int64_t offset) {
  TORCH_CHECK_VALUE(self.device().type() == c10::DeviceType::PrivateUse1,
                    "npu_prefetch: self must be an npu tensor, got one on ", self.device());
  const int64_t span = prefetchSpan(self, max_size, offset);
  const char* begin = static_cast<const char*>(self.const_data_ptr()) + offset;
  // The storage stays alive until the stream has run the task.
  launchDeviceTask(c10_npu::getCurrentNPUStream(self.device().index()), "npu_prefetch",
                   [storage = self.storage(), begin, span] {
                     constexpr int64_t kLine = 64;
                     for (int64_t at = 0; at < span; at += kLine) __builtin_prefetch(begin + at, 0, 1);
                   });
}

void npu_prefetch_meta(const at::Tensor& self, const std::optional<at::Tensor>& dependency, int64_t max_size,
                       int64_t offset) {
  prefetchSpan(self, max_size, offset);
}

}  // namespace at_npu::native
