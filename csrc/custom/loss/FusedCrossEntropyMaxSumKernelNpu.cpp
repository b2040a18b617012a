// FusedCrossEntropyMaxSumKernelNpu.cpp - npu_fused_cross_entropy_loss_with_max_sum: the vocabulary-parallel cross
// entropy's last step (loss from the all-reduced row max / exp sum / target logit, optional softmax) on
// aclnnFusedCrossEntropyLossWithMaxSum.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_fused_cross_entropy_loss_with_max_sum";

void checkMaxSumInputs(const at::Tensor& logits_max, const at::Tensor& sum_exp_logits,
                       const at::Tensor& predicted_logits, std::optional<double> label_smoothing,
                       const std::optional<at::Tensor>& input, const std::optional<at::Tensor>& weight,
                       const std::optional<at::Tensor>& vocab_parallel_logits) {
  for (const at::Tensor* t : {&logits_max, &sum_exp_logits, &predicted_logits}) {
    TORCH_CHECK_TYPE(t->scalar_type() == at::kFloat, kOp,
                     ": logits_max, sum_exp_logits and predicted_logits must be float32, got ", t->scalar_type());
  }
  TORCH_CHECK_VALUE(logits_max.dim() == 1 && sum_exp_logits.sizes() == logits_max.sizes() &&
                        predicted_logits.sizes() == logits_max.sizes(),
                    kOp, ": logits_max, sum_exp_logits and predicted_logits must be 1-D of the same length, got ",
                    logits_max.sizes(), ", ", sum_exp_logits.sizes(), ", ", predicted_logits.sizes());
  // Smoothing would need every rank's full logits row, which these all-reduced statistics no longer carry.
  TORCH_CHECK_VALUE(label_smoothing.value_or(0.0) == 0.0, kOp, ": only label_smoothing=0.0 is supported (as in ",
                    "torch_npu), got ", label_smoothing.value_or(0.0));
  TORCH_CHECK_VALUE(!input.has_value() && !weight.has_value(), kOp,
                    ": input and weight must be None (reserved by torch_npu; the loss needs only the statistics)");
  if (vocab_parallel_logits.has_value()) {
    const at::Tensor& logits = *vocab_parallel_logits;
    TORCH_CHECK_TYPE(logits.scalar_type() == at::kFloat || logits.scalar_type() == at::kHalf ||
                         logits.scalar_type() == at::kBFloat16,
                     kOp, ": vocab_parallel_logits must be float32, float16 or bfloat16, got ", logits.scalar_type());
    TORCH_CHECK_VALUE(logits.dim() == 2 && logits.size(0) == logits_max.size(0), kOp,
                      ": vocab_parallel_logits must be 2-D [", logits_max.size(0), ", vocab], got ", logits.sizes());
  }
}

// The softmax is only produced when the logits are given; otherwise it is None, as in torch_npu.
std::tuple<at::Tensor, at::Tensor> emptyMaxSumOutputs(const at::Tensor& logits_max,
                                                      const std::optional<at::Tensor>& vocab_parallel_logits) {
  at::Tensor loss = at::empty(logits_max.sizes(), logits_max.options());
  at::Tensor softmax = vocab_parallel_logits.has_value()
                           ? at::empty(vocab_parallel_logits->sizes(), logits_max.options())
                           : at::Tensor();
  return {loss, softmax};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_fused_cross_entropy_loss_with_max_sum(
    const at::Tensor& logits_max, const at::Tensor& sum_exp_logits, const at::Tensor& predicted_logits,
    std::optional<double> label_smoothing, const std::optional<at::Tensor>& input,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& vocab_parallel_logits) {
  checkMaxSumInputs(logits_max, sum_exp_logits, predicted_logits, label_smoothing, input, weight,
                    vocab_parallel_logits);
  auto outputs = emptyMaxSumOutputs(logits_max, vocab_parallel_logits);
  at::Tensor& loss = std::get<0>(outputs);
  const std::optional<at::Tensor> softmax =
      vocab_parallel_logits.has_value() ? std::optional<at::Tensor>(std::get<1>(outputs)) : std::nullopt;
  const double smoothing = label_smoothing.value_or(0.0);
  EXEC_NPU_CMD(aclnnFusedCrossEntropyLossWithMaxSum, logits_max, sum_exp_logits, predicted_logits, smoothing, input,
               weight, vocab_parallel_logits, loss, softmax);
  return outputs;
}

std::tuple<at::Tensor, at::Tensor> npu_fused_cross_entropy_loss_with_max_sum_meta(
    const at::Tensor& logits_max, const at::Tensor& sum_exp_logits, const at::Tensor& predicted_logits,
    std::optional<double> label_smoothing, const std::optional<at::Tensor>& input,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& vocab_parallel_logits) {
  checkMaxSumInputs(logits_max, sum_exp_logits, predicted_logits, label_smoothing, input, weight,
                    vocab_parallel_logits);
  return emptyMaxSumOutputs(logits_max, vocab_parallel_logits);
}

}  // namespace at_npu::native
