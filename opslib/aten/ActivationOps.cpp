// ActivationOps.cpp - gelu and silu (forward and backward) and the backward kernels of relu,
// sigmoid and tanh, whose forward ops are opslib's own elementwise kernels.
#include <ATen/ops/gelu_backward_cpu_dispatch.h>
#include <ATen/ops/gelu_cpu_dispatch.h>
#include <ATen/ops/sigmoid_backward_cpu_dispatch.h>
#include <ATen/ops/silu_backward_cpu_dispatch.h>
#include <ATen/ops/silu_cpu_dispatch.h>
#include <ATen/ops/tanh_backward_cpu_dispatch.h>
#include <ATen/ops/threshold_backward_cpu_dispatch.h>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {
// approximate: 0 = exact (erf), 1 = tanh.
const char* geluApproximation(int64_t approximate) {
  if (approximate != 0 && approximate != 1) {
    throw std::invalid_argument("approximate must be 0 (none) or 1 (tanh), got " +
                                std::to_string(approximate));
  }
  return approximate == 1 ? "tanh" : "none";
}
}  // namespace

extern "C" NOP_API aclnnStatus aclnnGeluGetWorkspaceSize(const aclTensor* self, int64_t approximate,
                                                         aclTensor* out, uint64_t* workspaceSize,
                                                         aclOpExecutor** executor) {
  return prepareOp("aclnnGelu", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self"), o = requiredTensor(out, "out");
    const char* mode = geluApproximation(approximate);
    return Prepared{{a}, [=]() mutable { at::cpu::gelu_out(o, a, mode); }, {o}};
  });
}
NPU_ATEN_OP(Gelu, "self, approximate, out");

extern "C" NOP_API aclnnStatus aclnnGeluBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, int64_t approximate, aclTensor* gradInput,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnGeluBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), a = requiredTensor(self, "self");
    at::Tensor gi = requiredTensor(gradInput, "gradInput");
    const char* mode = geluApproximation(approximate);
    return Prepared{{g, a}, [=]() mutable { at::cpu::gelu_backward_out(gi, g, a, mode); }, {gi}};
  });
}
NPU_ATEN_OP(GeluBackward, "gradOutput, self, approximate, gradInput");

extern "C" NOP_API aclnnStatus aclnnSiluGetWorkspaceSize(const aclTensor* self, aclTensor* out,
                                                         uint64_t* workspaceSize,
                                                         aclOpExecutor** executor) {
  return prepareOp("aclnnSilu", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self"), o = requiredTensor(out, "out");
    return Prepared{{a}, [=]() mutable { at::cpu::silu_out(o, a); }, {o}};
  });
}
NPU_ATEN_OP(Silu, "self, out");

// gradInput = f'(x) * gradOutput, where `x` is the forward's input (silu) or output
// (sigmoid, tanh).
#define NPU_ACTIVATION_BACKWARD_OP(Name, fn)                                                      \
  extern "C" NOP_API aclnnStatus aclnn##Name##GetWorkspaceSize(                                   \
      const aclTensor* gradOutput, const aclTensor* x, aclTensor* gradInput,                     \
      uint64_t* workspaceSize, aclOpExecutor** executor) {                                        \
    return prepareOp("aclnn" #Name, workspaceSize, executor, [&] {                                \
      at::Tensor g = requiredTensor(gradOutput, "gradOutput"), a = requiredTensor(x, "x");        \
      at::Tensor gi = requiredTensor(gradInput, "gradInput");                                     \
      return Prepared{{g, a}, [=]() mutable { at::cpu::fn##_out(gi, g, a); }, {gi}};                    \
    });                                                                                           \
  }                                                                                               \
  NPU_ATEN_OP(Name, "gradOutput, x, gradInput")

NPU_ACTIVATION_BACKWARD_OP(SiluBackward, silu_backward);
NPU_ACTIVATION_BACKWARD_OP(SigmoidBackward, sigmoid_backward);
NPU_ACTIVATION_BACKWARD_OP(TanhBackward, tanh_backward);

// gradInput = self <= threshold ? 0 : gradOutput (relu's backward with threshold 0).
extern "C" NOP_API aclnnStatus aclnnThresholdBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, const aclScalar* threshold,
    aclTensor* gradInput, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnThresholdBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), a = requiredTensor(self, "self");
    at::Tensor gi = requiredTensor(gradInput, "gradInput");
    at::Scalar t = hostScalar(threshold);
    return Prepared{{g, a}, [=]() mutable { at::cpu::threshold_backward_out(gi, g, a, t); }, {gi}};
  });
}
NPU_ATEN_OP(ThresholdBackward, "gradOutput, self, threshold, gradInput");
