// HostView.h - npu memory seen as a CPU tensor (zero copy). Software-NPU kernels run host code on
// these views inside stream tasks; the stream orders the memory's users.
#pragma once

#include <ATen/core/Tensor.h>

namespace at_npu::native {

// A CPU tensor aliasing `npu_tensor`'s memory with its sizes, strides and dtype as of this call. The
// view holds a reference to the storage, so a task may capture it: later changes to the npu tensor
// object (resize_, set_, `.data = ...`) do not redirect the queued work.
at::Tensor hostView(const at::Tensor& npu_tensor);

}  // namespace at_npu::native
