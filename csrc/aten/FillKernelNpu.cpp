// FillKernelNpu.cpp - fill_ and zero_ on npu tensors (memset when contiguous, host task otherwise).
#include <ATen/ops/empty.h>

#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUStream.h"
#include "csrc/framework/DeviceTask.h"
#include "csrc/framework/FormatCast.h"
#include "csrc/framework/FormatHelper.h"
#include "csrc/framework/HostView.h"

namespace at_npu::native {

at::Tensor& fill_(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  // Reject a value the dtype cannot hold here, at the calling line, not later at a sync point.
  at::empty({}, self.options().device(c10::DeviceType::CPU)).fill_(value);
  c10::DeviceGuard guard(self.device());
  if (C10_UNLIKELY(anyPrivateFormat())) {
    if (const NPUStorageDesc* desc = privateDesc(self)) {
      // A whole private tensor: every lane of its storage, padding included (padding is never
      // read). A view of one: through its base-layout stand-in.
      BaseLayouts layouts;
      at::Tensor target = isWholeTensor(self, *desc)
                              ? flatStorageView(self.storage(), *desc)
                              : layouts.get(self, /*written=*/true);
      launchDeviceTask(c10_npu::getCurrentNPUStream(self.device().index()), "aten::fill_",
                       [view = hostView(target), value] { view.fill_(value); });
      layouts.commit();
      return self;
    }
  }
  launchDeviceTask(c10_npu::getCurrentNPUStream(self.device().index()), "aten::fill_",
                          [view = hostView(self), value] { view.fill_(value); });
  return self;
}

at::Tensor& fill_tensor_(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports a 0-dimension value tensor, but got tensor ",
              "with ", value.dim(), " dimension(s)");
  return fill_(self, value.item());
}

at::Tensor& zero_(at::Tensor& self) {
  if (self.numel() == 0) return self;
  if (!self.is_contiguous() || (C10_UNLIKELY(anyPrivateFormat()) && privateDesc(self) != nullptr)) {
    return fill_(self, 0);
  }
  c10::DeviceGuard guard(self.device());
  NPU_CHECK(nrtMemsetAsync(self.data_ptr(), 0, self.nbytes(),
                           c10_npu::getCurrentNPUStream(self.device().index()).handle()));
  return self;
}

}  // namespace at_npu::native
