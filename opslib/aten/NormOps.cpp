// NormOps.cpp - batch_norm forward and backward, layer_norm backward. Optional tensors may be NULL;
// a NULL gradient output means that gradient is not wanted.
#include <ATen/ops/native_batch_norm_backward_cpu_dispatch.h>
#include <ATen/ops/native_batch_norm_cpu_dispatch.h>
#include <ATen/ops/native_layer_norm_backward_cpu_dispatch.h>

#include "AtenOpSupport.h"
#include "HostCache.h"

using namespace npu::opslib::aten;

namespace {
std::optional<at::Tensor> opt(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}
bool reduced(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}
// Float16 / bfloat16 batch norm computes in float32, as NPUs do: statistics summed over N*H*W
// elements need the precision, and results are rounded once.
at::Tensor wide(const at::Tensor& t) { return reduced(t) ? t.to(at::kFloat) : t; }
}  // namespace

// Training mode updates runningMean / runningVar in place (momentum), as PyTorch does.
extern "C" NOP_API aclnnStatus aclnnBatchNormGetWorkspaceSize(
    const aclTensor* input, const aclTensor* weight, const aclTensor* bias, aclTensor* runningMean,
    aclTensor* runningVar, bool training, double momentum, double eps, aclTensor* output,
    aclTensor* saveMean, aclTensor* saveInvstd, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnBatchNorm", workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(input, "input"), w = hostTensor(weight), b = hostTensor(bias);
    at::Tensor rm = hostTensor(runningMean), rv = hostTensor(runningVar);
    at::Tensor o = requiredTensor(output, "output"), sm = requiredTensor(saveMean, "saveMean");
    at::Tensor si = requiredTensor(saveInvstd, "saveInvstd");
    return Prepared{{x, w, b, rm, rv}, [=]() mutable {
                      if (reduced(x)) {
                        at::Tensor wrm = wide(rm), wrv = wide(rv);
                        auto [ro, rsm, rsi] = at::cpu::native_batch_norm(
                            wide(x), opt(wide(w)), opt(wide(b)), opt(wrm), opt(wrv), training,
                            momentum, eps);
                        o.copy_(ro);
                        sm.copy_(rsm);
                        si.copy_(rsi);
                        if (reduced(rm)) rm.copy_(wrm);  // running statistics updated in float32
                        if (reduced(rv)) rv.copy_(wrv);
                        return;
                      }
                      if (x.is_contiguous() && o.is_contiguous()) {
                        at::cpu::native_batch_norm_out(o, sm, si, x, opt(w), opt(b), opt(rm),
                                                       opt(rv), training, momentum, eps);
                        return;
                      }
                      // Other layouts: the out= kernel assumes out is laid out like a contiguous
                      // input, so compute into a fresh result and copy.
                      auto [ro, rsm, rsi] = at::cpu::native_batch_norm(
                          x, opt(w), opt(b), opt(rm), opt(rv), training, momentum, eps);
                      o.copy_(ro);
                      sm.copy_(rsm);
                      si.copy_(rsi);
                    }, {o, sm, si, rm, rv}};
  });
}
NPU_ATEN_OP(BatchNorm, "input, weight, bias, runningMean, runningVar, training, momentum, eps, output, saveMean, saveInvstd");

extern "C" NOP_API aclnnStatus aclnnBatchNormBackwardGetWorkspaceSize(
    const aclTensor* gradOut, const aclTensor* input, const aclTensor* weight,
    const aclTensor* runningMean, const aclTensor* runningVar, const aclTensor* saveMean,
    const aclTensor* saveInvstd, bool training, double eps, aclTensor* gradInput,
    aclTensor* gradWeight, aclTensor* gradBias, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnBatchNormBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOut, "gradOut"), x = requiredTensor(input, "input");
    at::Tensor w = hostTensor(weight), rm = hostTensor(runningMean), rv = hostTensor(runningVar);
    at::Tensor sm = hostTensor(saveMean), si = hostTensor(saveInvstd);
    at::Tensor gi = hostTensor(gradInput), gw = hostTensor(gradWeight), gb = hostTensor(gradBias);
    return Prepared{{g, x, w, sm, si}, [=]() mutable {
                      const std::array<bool, 3> mask{gi.defined(), gw.defined(), gb.defined()};
                      const ResultPlacement placed("native_batch_norm_backward", {gi, gw, gb},
                                                   {g, x, w, rm, rv, sm, si});
                      auto [rgi, rgw, rgb] = at::cpu::native_batch_norm_backward(
                          wide(g), wide(x), opt(wide(w)), opt(wide(rm)), opt(wide(rv)),
                          opt(wide(sm)), opt(wide(si)), training, eps, mask);
                      storeResults({gi, gw, gb}, {rgi, rgw, rgb});
                    }, {gi, gw, gb}};
  });
}
NPU_ATEN_OP(BatchNormBackward, "gradOut, input, weight, runningMean, runningVar, saveMean, saveInvstd, training, eps, gradInput, gradWeight, gradBias");

// out, mean, rstd = layer_norm(input over its last len(normalizedShape) dims).
// aclnnLayerNorm (forward) is a kernel of opslib's own (opslib/src/LayerNorm.cpp).

extern "C" NOP_API aclnnStatus aclnnLayerNormBackwardGetWorkspaceSize(
    const aclTensor* gradOut, const aclTensor* input, const aclIntArray* normalizedShape,
    const aclTensor* mean, const aclTensor* rstd, const aclTensor* weight, const aclTensor* bias,
    aclTensor* gradInput, aclTensor* gradWeight, aclTensor* gradBias, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnLayerNormBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOut, "gradOut"), x = requiredTensor(input, "input");
    at::Tensor m = requiredTensor(mean, "mean"), r = requiredTensor(rstd, "rstd");
    at::Tensor w = hostTensor(weight), b = hostTensor(bias);
    at::Tensor gi = hostTensor(gradInput), gw = hostTensor(gradWeight), gb = hostTensor(gradBias);
    auto shape = intArray(normalizedShape);
    return Prepared{{g, x, m, r, w}, [=]() mutable {
                      const std::array<bool, 3> mask{gi.defined(), gw.defined(), gb.defined()};
                      const ResultPlacement placed("native_layer_norm_backward", {gi, gw, gb},
                                                   {g, x, m, r, w, b});
                      auto [rgi, rgw, rgb] = at::cpu::native_layer_norm_backward(
                          g, x, shape, m, r, opt(w), opt(b), mask);
                      storeResults({gi, gw, gb}, {rgi, rgw, rgb});
                    }, {gi, gw, gb}};
  });
}
NPU_ATEN_OP(LayerNormBackward, "gradOut, input, normalizedShape, mean, rstd, weight, bias, gradInput, gradWeight, gradBias");
