// SoftmaxLossOps.cpp - softmax / log_softmax and the nll / mse losses, forward and backward.
#include <ATen/ops/_log_softmax_backward_data_cpu_dispatch.h>
#include <ATen/ops/_log_softmax_cpu_dispatch.h>
#include <ATen/ops/_softmax_backward_data_cpu_dispatch.h>
#include <ATen/ops/_softmax_cpu_dispatch.h>
#include <ATen/ops/mse_loss_backward_cpu_dispatch.h>
#include <ATen/ops/mse_loss_cpu_dispatch.h>
#include <ATen/ops/nll_loss_backward_cpu_dispatch.h>
#include <ATen/ops/nll_loss_forward_cpu_dispatch.h>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {
bool reduced(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}
// Float16 / bfloat16 losses sum in float32, as NPUs do, and round once.
at::Tensor wide(const at::Tensor& t) { return reduced(t) ? t.to(at::kFloat) : t; }
}  // namespace

// out = (log_)softmax(self, dim); a float16 / bfloat16 self with a float out computes in float.
#define NPU_SOFTMAX_OP(Name, fn)                                                                  \
  extern "C" NOP_API aclnnStatus aclnn##Name##GetWorkspaceSize(                                   \
      const aclTensor* self, int64_t dim, aclTensor* out, uint64_t* workspaceSize,               \
      aclOpExecutor** executor) {                                                                 \
    return prepareOp("aclnn" #Name, workspaceSize, executor, [&] {                                \
      at::Tensor a = requiredTensor(self, "self"), o = requiredTensor(out, "out");                \
      const bool half_to_float = a.scalar_type() != o.scalar_type();                             \
      return Prepared{{a}, [=]() mutable { at::cpu::fn##_out(o, a, dim, half_to_float); }, {o}};       \
    });                                                                                           \
  }                                                                                               \
  NPU_ATEN_OP(Name, "self, dim, out")

NPU_SOFTMAX_OP(Softmax, _softmax);
NPU_SOFTMAX_OP(LogSoftmax, _log_softmax);

// gradInput from the forward's output; inputDtype (an aclDataType) is the forward input's type.
#define NPU_SOFTMAX_BACKWARD_OP(Name, fn)                                                         \
  extern "C" NOP_API aclnnStatus aclnn##Name##GetWorkspaceSize(                                   \
      const aclTensor* gradOutput, const aclTensor* output, int64_t dim, int64_t inputDtype,     \
      aclTensor* gradInput, uint64_t* workspaceSize, aclOpExecutor** executor) {                 \
    return prepareOp("aclnn" #Name, workspaceSize, executor, [&] {                                \
      at::Tensor g = requiredTensor(gradOutput, "gradOutput"), y = requiredTensor(output, "output"); \
      at::Tensor gi = requiredTensor(gradInput, "gradInput");                                     \
      const at::ScalarType type = toScalarType(static_cast<aclDataType>(inputDtype));             \
      return Prepared{{g, y}, [=]() mutable { at::cpu::fn##_out(gi, g, y, dim, type); }, {gi}};         \
    });                                                                                           \
  }                                                                                               \
  NPU_ATEN_OP(Name, "gradOutput, output, dim, inputDtype, gradInput")

NPU_SOFTMAX_BACKWARD_OP(SoftmaxBackward, _softmax_backward_data);
NPU_SOFTMAX_BACKWARD_OP(LogSoftmaxBackward, _log_softmax_backward_data);

// reduction: 0 none, 1 mean, 2 sum (at::Reduction).
extern "C" NOP_API aclnnStatus aclnnNLLLossGetWorkspaceSize(
    const aclTensor* self, const aclTensor* target, const aclTensor* weight, int64_t reduction,
    int64_t ignoreIndex, aclTensor* out, aclTensor* totalWeight, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepareOp("aclnnNLLLoss", workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(self, "self"), t = requiredTensor(target, "target");
    at::Tensor w = hostTensor(weight), o = requiredTensor(out, "out");
    at::Tensor tw = requiredTensor(totalWeight, "totalWeight");
    return Prepared{{x, t, w}, [=]() mutable {
                      std::optional<at::Tensor> wo;
                      if (w.defined()) wo = wide(w);
                      if (!reduced(x)) {
                        at::cpu::nll_loss_forward_out(o, tw, x, t, wo, reduction, ignoreIndex);
                        return;
                      }
                      auto [loss, total] = at::cpu::nll_loss_forward(wide(x), t, wo, reduction, ignoreIndex);
                      o.copy_(loss);
                      tw.copy_(total);
                    }, {o, tw}};
  });
}
NPU_ATEN_OP(NLLLoss, "self, target, weight, reduction, ignoreIndex, out, totalWeight");

extern "C" NOP_API aclnnStatus aclnnNLLLossBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, const aclTensor* target,
    const aclTensor* weight, int64_t reduction, int64_t ignoreIndex, const aclTensor* totalWeight,
    aclTensor* gradInput, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnNLLLossBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), x = requiredTensor(self, "self");
    at::Tensor t = requiredTensor(target, "target"), w = hostTensor(weight);
    at::Tensor tw = requiredTensor(totalWeight, "totalWeight");
    at::Tensor gi = requiredTensor(gradInput, "gradInput");
    return Prepared{{g, x, t, w}, [=]() mutable {
                      std::optional<at::Tensor> wo;
                      if (w.defined()) wo = w;
                      at::cpu::nll_loss_backward_out(gi, g, x, t, wo, reduction, ignoreIndex, tw);
                    }, {gi}};
  });
}
NPU_ATEN_OP(NLLLossBackward, "gradOutput, self, target, weight, reduction, ignoreIndex, totalWeight, gradInput");

extern "C" NOP_API aclnnStatus aclnnMseLossGetWorkspaceSize(const aclTensor* self,
                                                            const aclTensor* target,
                                                            int64_t reduction, aclTensor* out,
                                                            uint64_t* workspaceSize,
                                                            aclOpExecutor** executor) {
  return prepareOp("aclnnMseLoss", workspaceSize, executor, [&] {
    at::Tensor x = requiredTensor(self, "self"), t = requiredTensor(target, "target");
    at::Tensor o = requiredTensor(out, "out");
    // The out= kernel uses out as scratch of the input's size before reducing: compute the
    // (small, reduced) result separately (float16 / bfloat16 in float32).
    return Prepared{{x, t}, [=]() mutable { o.copy_(at::cpu::mse_loss(wide(x), wide(t), reduction)); }, {o}};
  });
}
NPU_ATEN_OP(MseLoss, "self, target, reduction, out");

extern "C" NOP_API aclnnStatus aclnnMseLossBackwardGetWorkspaceSize(
    const aclTensor* gradOutput, const aclTensor* self, const aclTensor* target, int64_t reduction,
    aclTensor* gradInput, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnMseLossBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(gradOutput, "gradOutput"), x = requiredTensor(self, "self");
    at::Tensor t = requiredTensor(target, "target"), gi = requiredTensor(gradInput, "gradInput");
    return Prepared{{g, x, t}, [=]() mutable {
                      at::cpu::mse_loss_backward_out(gi, g, x, t, reduction);
                    }, {gi}};
  });
}
NPU_ATEN_OP(MseLossBackward, "gradOutput, self, target, reduction, gradInput");
