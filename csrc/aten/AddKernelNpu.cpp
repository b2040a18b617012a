// AddKernelNpu.cpp - add and sub (out = self +/- alpha * other) on the aclnnAdd / aclnnSub device ops.
#include <ATen/ops/add_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/sub_compositeexplicitautogradnonfunctional_dispatch.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/ElementwiseFastPath.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

// PyTorch rejects a floating alpha for integral inputs and bool subtraction; the generic executor
// raises those errors exactly as the CPU does.
bool needsGeneric(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                  const at::Tensor& out, bool is_sub) {
  if (!deviceOpsSupport(TensorRefs{self, other, out}) || alpha.isComplex()) return true;
  const at::ScalarType common = at::result_type(self, other);
  if (at::isIntegralType(common, /*includeBool=*/true) && alpha.isFloatingPoint()) return true;
  return is_sub && common == at::kBool;
}

}  // namespace

// The functional and in-place forms: the fast path for same-layout operands and Python numbers,
// else PyTorch's structured composition (TensorIterator for the output, then add.out above).
at::Tensor add_tensor(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  at::Tensor out;
  if (tryBinaryFast(BinaryOp::kAdd, self, other, alpha, &out)) return out;
  return at::compositeexplicitautogradnonfunctional::add(self, other, alpha);
}

at::Tensor& add__tensor(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (tryBinaryFastInplace(BinaryOp::kAdd, self, other, alpha)) return self;
  return at::compositeexplicitautogradnonfunctional::add_(self, other, alpha);
}

at::Tensor sub_tensor(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  at::Tensor out;
  if (tryBinaryFast(BinaryOp::kSub, self, other, alpha, &out)) return out;
  return at::compositeexplicitautogradnonfunctional::sub(self, other, alpha);
}

at::Tensor& sub__tensor(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (tryBinaryFastInplace(BinaryOp::kSub, self, other, alpha)) return self;
  return at::compositeexplicitautogradnonfunctional::sub_(self, other, alpha);
}

at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                    at::Tensor& out) {
  if (needsGeneric(self, other, alpha, out, false)) {
    runGeneric("aten::add", "out", self, other, alpha, out);
    return out;
  }
  return runBinaryDeviceOp("aten::add.out", self, other, out, /*true_division=*/false,
                           [&](const at::Tensor& a, const at::Tensor& b, at::Tensor& dst) {
                             EXEC_NPU_CMD(aclnnAdd, a, b, alpha, dst);
                           });
}

at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                    at::Tensor& out) {
  if (needsGeneric(self, other, alpha, out, true)) {
    runGeneric("aten::sub", "out", self, other, alpha, out);
    return out;
  }
  return runBinaryDeviceOp("aten::sub.out", self, other, out, /*true_division=*/false,
                           [&](const at::Tensor& a, const at::Tensor& b, at::Tensor& dst) {
                             EXEC_NPU_CMD(aclnnSub, a, b, alpha, dst);
                           });
}

}  // namespace at_npu::native
