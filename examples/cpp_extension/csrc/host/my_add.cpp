// my_add.cpp - torch.ops.npu.my_add: launches the add_custom kernel directly on the current npu
// stream (no op package involved), plus its Meta kernel for torch.compile.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>

#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "torch_npu/csrc/framework/OpCommand.h"
#include "../kernel/add_custom.h"

namespace ascendc_path {

constexpr uint32_t kBlockDim = 8;

// `kernel` is ACLRT_LAUNCH_KERNEL(add_custom<T>) for the tensors' element type.
template <typename Kernel>
void launch_add(Kernel kernel, const at::Tensor& x, const at::Tensor& y, at::Tensor& z, uint32_t totalLength) {
  nrtStream_t stream = c10_npu::getCurrentNPUStream().stream(false);
  auto* xGm = static_cast<uint8_t*>(x.data_ptr());
  auto* yGm = static_cast<uint8_t*>(y.data_ptr());
  auto* zGm = static_cast<uint8_t*>(z.data_ptr());
  const uint32_t blockDim = std::min(kBlockDim, totalLength);
  // RunOpApi attributes failures to the Python line and honours ASCEND_LAUNCH_BLOCKING.
  at_npu::native::OpCommand::RunOpApi("add_custom", [=]() -> int {
    return kernel(blockDim, stream, xGm, yGm, zGm, totalLength);
  });
}

at::Tensor run_add_custom(const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK_VALUE(x.device().is_privateuseone() && y.device().is_privateuseone(),
                    "my_add: x and y must be npu tensors, got ", x.device(), " and ", y.device());
  TORCH_CHECK_VALUE(x.device() == y.device(), "my_add: x and y are on different devices (", x.device(), ", ",
                    y.device(), ")");
  TORCH_CHECK_VALUE(x.sizes() == y.sizes(), "my_add: x and y must have the same shape (no broadcasting), got ",
                    x.sizes(), " and ", y.sizes());
  TORCH_CHECK_VALUE(x.scalar_type() == y.scalar_type(), "my_add: x and y must have the same dtype, got ",
                    x.scalar_type(), " and ", y.scalar_type());
  TORCH_CHECK_VALUE(x.numel() <= UINT32_MAX, "my_add: at most 2^32-1 elements");
  const at::Tensor xc = x.contiguous();
  const at::Tensor yc = y.contiguous();
  at::Tensor z = at::empty_like(xc);
  const auto totalLength = static_cast<uint32_t>(x.numel());
  if (totalLength == 0) return z;
  switch (x.scalar_type()) {
    case at::kFloat: launch_add(ACLRT_LAUNCH_KERNEL(add_custom<float>), xc, yc, z, totalLength); break;
    case at::kHalf: launch_add(ACLRT_LAUNCH_KERNEL(add_custom<_Float16>), xc, yc, z, totalLength); break;
    case at::kInt: launch_add(ACLRT_LAUNCH_KERNEL(add_custom<int32_t>), xc, yc, z, totalLength); break;
    default:
      TORCH_CHECK_VALUE(false, "my_add: dtype ", x.scalar_type(), " is not supported (float32, float16, int32)");
  }
  return z;
}

at::Tensor run_add_custom_meta(const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK_VALUE(x.sizes() == y.sizes(), "my_add: x and y must have the same shape (no broadcasting), got ",
                    x.sizes(), " and ", y.sizes());
  TORCH_CHECK_VALUE(x.scalar_type() == y.scalar_type(), "my_add: x and y must have the same dtype, got ",
                    x.scalar_type(), " and ", y.scalar_type());
  return at::empty_like(x, x.options().memory_format(at::MemoryFormat::Contiguous));
}

}  // namespace ascendc_path

TORCH_LIBRARY_FRAGMENT(npu, m) {
  m.def("my_add(Tensor x, Tensor y) -> Tensor");
}

TORCH_LIBRARY_IMPL(npu, PrivateUse1, m) {
  m.impl("my_add", TORCH_FN(ascendc_path::run_add_custom));
}

TORCH_LIBRARY_IMPL(npu, Meta, m) {
  m.impl("my_add", TORCH_FN(ascendc_path::run_add_custom_meta));
}
