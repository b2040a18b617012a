// HostView.cpp - zero-copy CPU views of npu memory.
#include "csrc/framework/HostView.h"

#include <ATen/ops/from_blob.h>

namespace at_npu::native {

at::Tensor hostView(const at::Tensor& npu_tensor) {
  TORCH_INTERNAL_ASSERT(npu_tensor.device().type() == c10::DeviceType::PrivateUse1);
  return at::from_blob(npu_tensor.data_ptr(), npu_tensor.sizes(), npu_tensor.strides(),
                       [](void*) {}, npu_tensor.options().device(c10::DeviceType::CPU));
}

}  // namespace at_npu::native
