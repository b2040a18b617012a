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
  c10::DeviceGuard guard(out.device());
  const at::ScalarType common = prepareBinaryOut("aten::mul.out", self, other, out);
  const at::Tensor a = deviceOperand(self, out.device(), "aten::mul.out");
  const at::Tensor b = deviceOperand(other, out.device(), "aten::mul.out");
  computeInCommonDtype(out, common, [&](at::Tensor& dst) { EXEC_NPU_CMD(aclnnMul, a, b, dst); });
  return out;
}

at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  // True division computes in floating point; an integral out is an error the CPU path reports.
  if (!deviceOpsSupport({self, other, out}) || !at::isFloatingType(out.scalar_type())) {
    runGeneric("aten::div", "out", self, other, out);
    return out;
  }
  c10::DeviceGuard guard(out.device());
  at::ScalarType common = prepareBinaryOut("aten::div.out", self, other, out);
  if (at::isIntegralType(common, /*includeBool=*/true)) {
    common = c10::typeMetaToScalarType(c10::get_default_dtype());  // true division
  }
  const at::Tensor a = deviceOperand(self, out.device(), "aten::div.out");
  const at::Tensor b = deviceOperand(other, out.device(), "aten::div.out");
  computeInCommonDtype(out, common, [&](at::Tensor& dst) { EXEC_NPU_CMD(aclnnDiv, a, b, dst); });
  return out;
}

}  // namespace at_npu::native
