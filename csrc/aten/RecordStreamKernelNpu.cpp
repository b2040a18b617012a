// RecordStreamKernelNpu.cpp - Tensor.record_stream: keeps the tensor's block from reuse until `stream`
// has passed the work queued so far.
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/core/NPUCachingAllocator.h"

namespace at_npu::native {

void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "record_stream: an npu tensor needs an npu stream, got a stream on ", stream.device());
  c10_npu::NPUCachingAllocator::recordStream(self.storage().data_ptr(), c10_npu::NPUStream(stream));
}

}  // namespace at_npu::native
