// MulKernelNpu.cpp - mul and true division on the aclnnMul / aclnnDiv device ops (aclnnMuls /
// aclnnDivs for a Python number).
#include <ATen/ops/div_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/mul_compositeexplicitautogradnonfunctional_dispatch.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/ElementwiseFastPath.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

at::Tensor mul_tensor(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out;
  if (tryBinaryFast(BinaryOp::kMul, self, other, 1, &out)) return out;
  return at::compositeexplicitautogradnonfunctional::mul(self, other);
}

at::Tensor& mul__tensor(at::Tensor& self, const at::Tensor& other) {
  if (tryBinaryFastInplace(BinaryOp::kMul, self, other, 1)) return self;
  return at::compositeexplicitautogradnonfunctional::mul_(self, other);
}

at::Tensor div_tensor(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out;
  if (tryBinaryFast(BinaryOp::kDiv, self, other, 1, &out)) return out;
  return at::compositeexplicitautogradnonfunctional::div(self, other);
}

at::Tensor& div__tensor(at::Tensor& self, const at::Tensor& other) {
  if (tryBinaryFastInplace(BinaryOp::kDiv, self, other, 1)) return self;
  return at::compositeexplicitautogradnonfunctional::div_(self, other);
}

at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  if (!deviceOpsSupport(TensorRefs{self, other, out})) {
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
  if (!deviceOpsSupport(TensorRefs{self, other, out}) || !at::isFloatingType(out.scalar_type())) {
    runGeneric("aten::div", "out", self, other, out);
    return out;
  }
  return runBinaryDeviceOp("aten::div.out", self, other, out, /*true_division=*/true,
                           [](const at::Tensor& a, const at::Tensor& b, at::Tensor& dst) {
                             EXEC_NPU_CMD(aclnnDiv, a, b, dst);
                           });
}

}  // namespace at_npu::native
