// HostView.h - npu memory seen as a CPU tensor (zero copy). Software-NPU kernels run host code on
// these views inside stream tasks; the stream orders the memory's users.
#pragma once

#include <ATen/core/Tensor.h>

namespace at_npu::native {

// A CPU tensor aliasing `npu_tensor`'s memory with its sizes, strides, dtype and conj/neg bits as of
// this call, so later changes to the npu tensor object (resize_, set_, `.data = ...`) do not
// redirect queued work. Like a raw device pointer it does not own the memory: as on CUDA, a block
// freed while work is queued is reused only by later work on the same stream (or after the streams
// recorded with record_stream pass it), and goes back to the runtime only after a device sync.
at::Tensor hostView(const at::Tensor& npu_tensor);

}  // namespace at_npu::native
