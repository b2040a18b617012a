// UnaryKernelNpu.cpp - elementwise unary ops on device ops: relu, neg, abs, exp, sqrt, sigmoid, tanh.
#include <ATen/ops/empty_like.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/ElementwiseFastPath.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/FormatCast.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

// out = f(self) through `device_op`, or the generic executor for what the device op does not take
// (bool input, non-floating out for floating functions) so PyTorch's own errors and rules apply.
template <typename Launch>
at::Tensor& unaryOut(const char* name, const at::Tensor& self, at::Tensor& out, bool floating_out,
                     Launch launch) {
  const bool unsupported = !deviceOpsSupport({self, out}) || self.scalar_type() == at::kBool ||
                           (floating_out && !at::isFloatingType(out.scalar_type())) ||
                           self.device() != out.device();
  if (unsupported) {
    runGeneric(name, "out", self, out);
    return out;
  }
  c10::DeviceGuard guard(out.device());
  prepareUnaryOut(name, self, out);
  launch(self, out);
  return out;
}

}  // namespace

#define NPU_UNARY_OUT(fn, Device, floating)                                                   \
  at::Tensor& fn##_out(const at::Tensor& self, at::Tensor& out) {                              \
    return unaryOut("aten::" #fn, self, out, floating,                                        \
                    [](const at::Tensor& s, at::Tensor& o) { EXEC_NPU_CMD(Device, s, o); }); \
  }
NPU_UNARY_OUT(neg, aclnnNeg, false)
NPU_UNARY_OUT(abs, aclnnAbs, false)
NPU_UNARY_OUT(exp, aclnnExp, true)
NPU_UNARY_OUT(sqrt, aclnnSqrt, true)
NPU_UNARY_OUT(sigmoid, aclnnSigmoid, true)
NPU_UNARY_OUT(tanh, aclnnTanh, true)
#undef NPU_UNARY_OUT

at::Tensor relu(const at::Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  const bool supported = deviceOpsSupport({self}) && self.scalar_type() != at::kBool;
  if (supported && self.is_non_overlapping_and_dense()) {
    MaybeDeviceGuard guard(self);
    at::Tensor out = emptyLikeDense(self, self.scalar_type());  // empty_like, without dispatch
    adoptInputFormat(out, self);
    EXEC_NPU_CMD(aclnnRelu, self, out);
    return out;
  }
  at::Tensor out = at::empty_like(self);
  adoptInputFormat(out, self);
  if (!supported) {
    runGeneric("aten::clamp_min", "out", self, at::Scalar(0), out);
    return out;
  }
  c10::DeviceGuard guard(self.device());
  EXEC_NPU_CMD(aclnnRelu, self, out);
  return out;
}

at::Tensor& relu_(at::Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  if (!deviceOpsSupport({self}) || self.scalar_type() == at::kBool) {
    runGeneric("aten::clamp_min", "out", self, at::Scalar(0), self);
    return self;
  }
  MaybeDeviceGuard guard(self);
  EXEC_NPU_CMD(aclnnRelu, self, self);
  return self;
}

}  // namespace at_npu::native
