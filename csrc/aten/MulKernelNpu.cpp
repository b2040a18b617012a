// MulKernelNpu.cpp - mul and true division on the aclnnMul / aclnnDiv device ops.
#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  if (!deviceOpsSupport({self, other, out})) {
    runGeneric("aten::mul", "out", self, other, out);
    return out;
  }
  return runBinaryDeviceOp("aten::mul.out", self, other, out, /*true_division=*/false,
                           [](const at::Tensor& a, const at::Tensor& b, at::Tensor& dst) {
                             EXEC_NPU_CMD(aclnnMul, a, b, dst);
                           });
}

at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  // True division computes in floating point; an integral out is an error the CPU path reports.
  if (!deviceOpsSupport({self, other, out}) || !at::isFloatingType(out.scalar_type())) {
    runGeneric("aten::div", "out", self, other, out);
    return out;
  }
  return runBinaryDeviceOp("aten::div.out", self, other, out, /*true_division=*/true,
                           [](const at::Tensor& a, const at::Tensor& b, at::Tensor& dst) {
                             EXEC_NPU_CMD(aclnnDiv, a, b, dst);
                           });
}

}  // namespace at_npu::native
