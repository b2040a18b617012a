// PoolingOps.cpp - 2-d max pooling (with indices), average pooling and adaptive average pooling,
// forward and backward.
#include <ATen/ops/_adaptive_avg_pool2d_backward_cpu_dispatch.h>
#include <ATen/ops/_adaptive_avg_pool2d_cpu_dispatch.h>
#include <ATen/ops/avg_pool2d_backward_cpu_dispatch.h>
#include <ATen/ops/avg_pool2d_cpu_dispatch.h>
#include <ATen/ops/max_pool2d_with_indices_backward_cpu_dispatch.h>
#include <ATen/ops/max_pool2d_with_indices_cpu_dispatch.h>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {
std::optional<int64_t> divisor(int64_t divisorOverride) {
  return divisorOverride == 0 ? std::nullopt : std::optional<int64_t>(divisorOverride);
}
}  // namespace

extern "C" NOP_API aclnnStatus aclnnMaxPool2dWithIndicesGetWorkspaceSize(
    const aclTensor* self, const aclIntArray* kernelSize, const aclIntArray* stride,
    const aclIntArray* padding, const aclIntArray* dilation, bool ceilMode, aclTensor* out,
    aclTensor* indices, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMaxPool2dWithIndices", workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(self, "self"), o = requiredTensor(out, "out");
    at::Tensor i = requiredTensor(indices, "indices");
    auto k = intArray(kernelSize), s = intArray(stride), p = intArray(padding);
    auto d = intArray(dilation);
    return Prepared{{x}, [=]() mutable {
                      at::cpu::max_pool2d_with_indices_out(o, i, x, k, s, p, d, ceilMode);
                    }, {o, i}};
  });
}
NPU_ATEN_OP(MaxPool2dWithIndices, "self, kernelSize, stride, padding, dilation, ceilMode, out, indices");

extern "C" NOP_API aclnnStatus aclnnMaxPool2dWithIndicesBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, const aclIntArray* kernelSize,
    const aclIntArray* stride, const aclIntArray* padding, const aclIntArray* dilation,
    bool ceilMode, const aclTensor* indices, aclTensor* gradInput, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnMaxPool2dWithIndicesBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), x = requiredTensor(self, "self");
    at::Tensor i = requiredTensor(indices, "indices"), gi = requiredTensor(gradInput, "gradInput");
    auto k = intArray(kernelSize), s = intArray(stride), p = intArray(padding);
    auto d = intArray(dilation);
    return Prepared{{g, x, i}, [=]() mutable {
                      at::cpu::max_pool2d_with_indices_backward_out(gi, g, x, k, s, p, d, ceilMode, i);
                    }, {gi}};
  });
}
NPU_ATEN_OP(MaxPool2dWithIndicesBackward, "gradOutput, self, kernelSize, stride, padding, dilation, ceilMode, indices, gradInput");

// divisorOverride: 0 = none (divide by the window size).
extern "C" NOP_API aclnnStatus aclnnAvgPool2dGetWorkspaceSize(
    const aclTensor* self, const aclIntArray* kernelSize, const aclIntArray* stride,
    const aclIntArray* padding, bool ceilMode, bool countIncludePad, int64_t divisorOverride,
    aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAvgPool2d", workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(self, "self"), o = requiredTensor(out, "out");
    auto k = intArray(kernelSize), s = intArray(stride), p = intArray(padding);
    return Prepared{{x}, [=]() mutable {
                      at::cpu::avg_pool2d_out(o, x, k, s, p, ceilMode, countIncludePad,
                                              divisor(divisorOverride));
                    }, {o}};
  });
}
NPU_ATEN_OP(AvgPool2d, "self, kernelSize, stride, padding, ceilMode, countIncludePad, divisorOverride, out");

extern "C" NOP_API aclnnStatus aclnnAvgPool2dBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, const aclIntArray* kernelSize,
    const aclIntArray* stride, const aclIntArray* padding, bool ceilMode, bool countIncludePad,
    int64_t divisorOverride, aclTensor* gradInput, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnAvgPool2dBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), x = requiredTensor(self, "self");
    at::Tensor gi = requiredTensor(gradInput, "gradInput");
    auto k = intArray(kernelSize), s = intArray(stride), p = intArray(padding);
    return Prepared{{g, x}, [=]() mutable {
                      at::cpu::avg_pool2d_backward_out(gi, g, x, k, s, p, ceilMode, countIncludePad,
                                                       divisor(divisorOverride));
                    }, {gi}};
  });
}
NPU_ATEN_OP(AvgPool2dBackward, "gradOutput, self, kernelSize, stride, padding, ceilMode, countIncludePad, divisorOverride, gradInput");

extern "C" NOP_API aclnnStatus aclnnAdaptiveAvgPool2dGetWorkspaceSize(
    const aclTensor* self, const aclIntArray* outputSize, aclTensor* out, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnAdaptiveAvgPool2d", workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(self, "self"), o = requiredTensor(out, "out");
    auto size = intArray(outputSize);
    return Prepared{{x}, [=]() mutable { o.copy_(at::cpu::_adaptive_avg_pool2d(x, size)); }, {o}};
  });
}
NPU_ATEN_OP(AdaptiveAvgPool2d, "self, outputSize, out");

extern "C" NOP_API aclnnStatus aclnnAdaptiveAvgPool2dBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, aclTensor* gradInput,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnAdaptiveAvgPool2dBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), x = requiredTensor(self, "self");
    at::Tensor gi = requiredTensor(gradInput, "gradInput");
    return Prepared{{g, x}, [=]() mutable {
                      gi.copy_(at::cpu::_adaptive_avg_pool2d_backward(g, x));
                    }, {gi}};
  });
}
NPU_ATEN_OP(AdaptiveAvgPool2dBackward, "gradOutput, self, gradInput");
