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

// A host view's sizes, strides and offset, to put back after a CPU kernel resized the view (within
// its fixed storage). Tasks keep this instead of the npu tensor the view came from.
struct ViewGeometry {
  c10::SmallVector<int64_t, 5> sizes;
  c10::SmallVector<int64_t, 5> strides;
  int64_t offset = 0;

  static ViewGeometry of(const at::Tensor& view);
  void restore(const at::Tensor& view) const;
};

}  // namespace at_npu::native
