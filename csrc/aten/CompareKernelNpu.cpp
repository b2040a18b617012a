// CompareKernelNpu.cpp - eq/ne/lt/le/gt/ge (tensor and scalar) and logical and/or/not on device ops.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

// Bool outputs on the device ops; anything else (e.g. a float out=, complex inputs) is left to
// the generic executor so PyTorch's own rules apply.
bool boolDeviceOp(TensorRefs inputs, const at::Tensor& out) {
  if (out.scalar_type() != at::kBool || !deviceOpsSupport(inputs)) return false;
  for (const at::Tensor& t : inputs) {
    if (t.device() != out.device() && !(t.is_cpu() && t.dim() == 0)) return false;
  }
  return true;
}

template <typename Launch>
at::Tensor& binaryBoolOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out,
                          const char* name, Launch launch) {
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, at::infer_size(self.sizes(), other.sizes()));
  launch(*deviceOperand(self, out.device(), name), *deviceOperand(other, out.device(), name));
  return out;
}

}  // namespace

#define NPU_COMPARE_KERNELS(fn, Name)                                                          \
  at::Tensor& fn##_tensor_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) { \
    if (!boolDeviceOp({self, other}, out)) {                                                   \
      runGeneric("aten::" #fn, "Tensor_out", self, other, out);                                \
      return out;                                                                              \
    }                                                                                          \
    return binaryBoolOut(self, other, out, "aten::" #fn,                                       \
                         [&](const at::Tensor& a, const at::Tensor& b) {                       \
                           EXEC_NPU_CMD(aclnn##Name##Tensor, a, b, out);                       \
                         });                                                                   \
  }                                                                                            \
  at::Tensor& fn##_scalar_out(const at::Tensor& self, const at::Scalar& other, at::Tensor& out) { \
    if (!boolDeviceOp({self}, out) || other.isComplex() || self.device() != out.device()) {    \
      runGeneric("aten::" #fn, "Scalar_out", self, other, out);                                \
      return out;                                                                              \
    }                                                                                          \
    c10::DeviceGuard guard(out.device());                                                      \
    at::native::resize_output(out, self.sizes());                                              \
    EXEC_NPU_CMD(aclnn##Name##Scalar, self, other, out);                                       \
    return out;                                                                                \
  }

NPU_COMPARE_KERNELS(eq, Eq)
NPU_COMPARE_KERNELS(ne, Ne)
NPU_COMPARE_KERNELS(lt, Lt)
NPU_COMPARE_KERNELS(le, Le)
NPU_COMPARE_KERNELS(gt, Gt)
NPU_COMPARE_KERNELS(ge, Ge)
#undef NPU_COMPARE_KERNELS

#define NPU_LOGICAL_KERNEL(fn, Name)                                                           \
  at::Tensor& fn##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {     \
    if (!boolDeviceOp({self, other}, out)) {                                                   \
      runGeneric("aten::" #fn, "out", self, other, out);                                       \
      return out;                                                                              \
    }                                                                                          \
    return binaryBoolOut(self, other, out, "aten::" #fn,                                       \
                         [&](const at::Tensor& a, const at::Tensor& b) {                       \
                           EXEC_NPU_CMD(aclnn##Name, a, b, out);                               \
                         });                                                                   \
  }

NPU_LOGICAL_KERNEL(logical_and, LogicalAnd)
NPU_LOGICAL_KERNEL(logical_or, LogicalOr)
#undef NPU_LOGICAL_KERNEL

at::Tensor& logical_not_out(const at::Tensor& self, at::Tensor& out) {
  if (!boolDeviceOp({self}, out) || self.device() != out.device()) {
    runGeneric("aten::logical_not", "out", self, out);
    return out;
  }
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, self.sizes());
  EXEC_NPU_CMD(aclnnLogicalNot, self, out);
  return out;
}

}  // namespace at_npu::native
