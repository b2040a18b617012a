// ConvolutionOps.cpp - convolution forward and backward (any spatial rank, groups, transposed).
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>

#include "AtenOpSupport.h"
#include "HostCache.h"

using namespace npu::opslib::aten;

namespace {
// float16 convolutions compute in float32, as NPU cube units accumulate: the host's float16
// convolution kernels are far slower than its float32 ones, and no more accurate.
at::Tensor computeType(const at::Tensor& t) {
  return t.defined() && t.scalar_type() == at::kHalf ? t.to(at::kFloat) : t;
}
}  // namespace

// out = conv(input, weight) + bias (bias may be NULL).
extern "C" NOP_API aclnnStatus aclnnConvolutionGetWorkspaceSize(
    const aclTensor* input, const aclTensor* weight, const aclTensor* bias, const aclIntArray* stride,
    const aclIntArray* padding, const aclIntArray* dilation, bool transposed,
    const aclIntArray* outputPadding, int64_t groups, aclTensor* out, int8_t cubeMathType,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnConvolution", workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(input, "input"), w = requiredTensor(weight, "weight");
    at::Tensor b = hostTensor(bias), o = requiredTensor(out, "out");
    auto s = intArray(stride), p = intArray(padding), d = intArray(dilation);
    auto op = intArray(outputPadding);
    return Prepared{{x, w, b}, [=]() mutable {
                      std::optional<at::Tensor> bias_opt;
                      if (b.defined()) bias_opt = computeType(b);
                      const ResultPlacement placed("convolution", {o}, {x, w, b});
                      storeResult(o, at::convolution(computeType(x), computeType(w), bias_opt, s, p, d,
                                                     transposed, op, groups));
                    }, {o}};
  });
}
NPU_ATEN_OP(Convolution, "input, weight, bias, stride, padding, dilation, transposed, outputPadding, groups, out, cubeMathType");

// Gradients of convolution; outputs not wanted (NULL) are skipped. biasSizes: the bias shape.
extern "C" NOP_API aclnnStatus aclnnConvolutionBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* input, const aclTensor* weight,
    const aclIntArray* biasSizes, const aclIntArray* stride, const aclIntArray* padding,
    const aclIntArray* dilation, bool transposed, const aclIntArray* outputPadding, int64_t groups,
    aclTensor* gradInput, aclTensor* gradWeight, aclTensor* gradBias, int8_t cubeMathType,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnConvolutionBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), x = requiredTensor(input, "input");
    at::Tensor w = requiredTensor(weight, "weight");
    at::Tensor gi = hostTensor(gradInput), gw = hostTensor(gradWeight), gb = hostTensor(gradBias);
    auto bs = intArray(biasSizes), s = intArray(stride), p = intArray(padding);
    auto d = intArray(dilation), op = intArray(outputPadding);
    return Prepared{{g, x, w}, [=]() mutable {
                      const std::array<bool, 3> mask{gi.defined(), gw.defined(), gb.defined()};
                      std::optional<at::IntArrayRef> bias_sizes;
                      if (gb.defined()) bias_sizes = at::IntArrayRef(bs);
                      const ResultPlacement placed("convolution_backward", {gi, gw, gb}, {g, x, w});
                      auto [rgi, rgw, rgb] = at::convolution_backward(
                          computeType(g), computeType(x), computeType(w), bias_sizes, s, p, d,
                          transposed, op, groups, mask);
                      storeResults({gi, gw, gb}, {rgi, rgw, rgb});
                    }, {gi, gw, gb}};
  });
}
NPU_ATEN_OP(ConvolutionBackward, "gradOutput, input, weight, biasSizes, stride, padding, dilation, transposed, outputPadding, groups, gradInput, gradWeight, gradBias, cubeMathType");
