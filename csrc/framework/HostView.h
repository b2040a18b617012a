// HostView.h - npu memory seen as a CPU tensor (zero copy). Software-NPU kernels run host code on
// these views; they are only valid inside a task on the stream that orders the memory's users.
#pragma once

#include <ATen/core/Tensor.h>

namespace at_npu::native {

// A CPU tensor aliasing `npu_tensor`'s memory with the same sizes, strides and dtype.
at::Tensor hostView(const at::Tensor& npu_tensor);

}  // namespace at_npu::native
