// HostView.cpp - zero-copy CPU views of npu memory that keep the npu storage alive.
#include "csrc/framework/HostView.h"

#include <ATen/ops/from_blob.h>

namespace at_npu::native {

at::Tensor hostView(const at::Tensor& npu_tensor) {
  TORCH_INTERNAL_ASSERT(npu_tensor.device().type() == c10::DeviceType::PrivateUse1);
  c10::Storage storage = npu_tensor.storage();
  return at::from_blob(npu_tensor.data_ptr(), npu_tensor.sizes(), npu_tensor.strides(),
                       [storage](void*) {}, npu_tensor.options().device(c10::DeviceType::CPU));
}

}  // namespace at_npu::native
