// ActivationKernelNpu.cpp - npu_silu_ and npu_mish, composed of ATen ops (which run on the npu and,
// on meta tensors, as Meta kernels).
#include <ATen/ops/mish.h>
#include <ATen/ops/silu.h>

#include "csrc/custom/NpuCustomFunctions.h"

namespace at_npu::native {

at::Tensor& npu_silu_(at::Tensor& self) { return at::silu_(self); }

at::Tensor npu_mish(const at::Tensor& self) { return at::mish(self); }

}  // namespace at_npu::native
