// CrossEntropyLossKernelNpu.cpp - npu_cross_entropy_loss (log_softmax + nll_loss fused, with class weights,
// ignore_index, label smoothing and the optional z-loss scale * lse^2) and its backward, on aclnnCrossEntropyLoss /
// aclnnCrossEntropyLossGrad. Outputs (loss, log_prob, zloss, lse_for_zloss) take input's dtype; zloss and
// lse_for_zloss are empty ([0]) unless asked for (return_zloss / a non-zero lse_square_scale_for_zloss).
#include <ATen/ops/empty.h>

#include <string>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

std::string checkReduction(const char* op, c10::string_view reduction) {
  TORCH_CHECK_VALUE(reduction == "mean" || reduction == "sum" || reduction == "none", op,
                    ": reduction must be 'mean', 'sum' or 'none', got '", reduction, "'");
  return std::string(reduction);
}

// input [N, C], target [N] (class indices), weight [C].
void checkLossInputs(const char* op, const at::Tensor& input, const at::Tensor& target,
                     const std::optional<at::Tensor>& weight) {
  TORCH_CHECK_VALUE(input.dim() == 2 && input.size(1) > 0, op, ": input must be [N, C] with C > 0, got ",
                    input.sizes());
  TORCH_CHECK_TYPE(at::isFloatingType(input.scalar_type()), op, ": input must be floating point, got ",
                   input.scalar_type());
  TORCH_CHECK_VALUE(target.dim() == 1 && target.size(0) == input.size(0), op, ": target must be [N] = [",
                    input.size(0), "], got ", target.sizes());
  TORCH_CHECK_TYPE(target.scalar_type() == at::kLong || target.scalar_type() == at::kInt, op,
                   ": target must hold int64 (or int32) class indices, got ", target.scalar_type());
  if (weight.has_value() && weight->defined()) {
    TORCH_CHECK_VALUE(weight->dim() == 1 && weight->size(0) == input.size(1), op, ": weight must be [C] = [",
                      input.size(1), "], got ", weight->sizes());
    TORCH_CHECK_TYPE(at::isFloatingType(weight->scalar_type()), op, ": weight must be floating point, got ",
                     weight->scalar_type());
  }
}

std::vector<int64_t> lossShape(const at::Tensor& input, const std::string& reduction) {
  return reduction == "none" ? std::vector<int64_t>{input.size(0)} : std::vector<int64_t>{1};
}

using Four = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

Four lossOutputs(const at::Tensor& input, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                 const std::string& reduction, double label_smoothing, double lse_square_scale_for_zloss,
                 bool return_zloss) {
  const char* op = "npu_cross_entropy_loss";
  checkLossInputs(op, input, target, weight);
  TORCH_CHECK_VALUE(label_smoothing >= 0.0 && label_smoothing < 1.0, op, ": label_smoothing must be in [0, 1), got ",
                    label_smoothing);
  TORCH_CHECK_VALUE(lse_square_scale_for_zloss >= 0.0, op, ": lse_square_scale_for_zloss must be >= 0, got ",
                    lse_square_scale_for_zloss);
  const std::vector<int64_t> loss = lossShape(input, reduction);
  const std::vector<int64_t> zloss = return_zloss ? loss : std::vector<int64_t>{0};
  const std::vector<int64_t> lse = lse_square_scale_for_zloss != 0.0 ? std::vector<int64_t>{input.size(0)}
                                                                     : std::vector<int64_t>{0};
  return {at::empty(loss, input.options()), at::empty(input.sizes(), input.options()),
          at::empty(zloss, input.options()), at::empty(lse, input.options())};
}

at::Tensor lossGradOutput(const at::Tensor& grad_loss, const at::Tensor& log_prob, const at::Tensor& target,
                          const std::optional<at::Tensor>& weight, const std::string& reduction) {
  const char* op = "npu_cross_entropy_loss_backward";
  checkLossInputs(op, log_prob, target, weight);
  const std::vector<int64_t> loss = lossShape(log_prob, reduction);
  TORCH_CHECK_VALUE(grad_loss.numel() == loss[0], op, ": grad_loss must have the loss's ", loss[0],
                    " element(s) for reduction '", reduction, "', got ", grad_loss.sizes());
  return at::empty(log_prob.sizes(), log_prob.options().dtype(grad_loss.scalar_type()));
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_cross_entropy_loss(
    const at::Tensor& input, const at::Tensor& target, const std::optional<at::Tensor>& weight,
    c10::string_view reduction, int64_t ignore_index, double label_smoothing, double lse_square_scale_for_zloss,
    bool return_zloss) {
  const std::string mode = checkReduction("npu_cross_entropy_loss", reduction);
  auto [loss, log_prob, zloss, lse] = lossOutputs(input, target, weight, mode, label_smoothing,
                                                  lse_square_scale_for_zloss, return_zloss);
  EXEC_NPU_CMD(aclnnCrossEntropyLoss, input, target, weight, mode, ignore_index, label_smoothing,
               lse_square_scale_for_zloss, return_zloss, loss, log_prob, zloss, lse);
  return {loss, log_prob, zloss, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_cross_entropy_loss_meta(
    const at::Tensor& input, const at::Tensor& target, const std::optional<at::Tensor>& weight,
    c10::string_view reduction, int64_t ignore_index, double label_smoothing, double lse_square_scale_for_zloss,
    bool return_zloss) {
  const std::string mode = checkReduction("npu_cross_entropy_loss", reduction);
  return lossOutputs(input, target, weight, mode, label_smoothing, lse_square_scale_for_zloss, return_zloss);
}

// The gradient of input from the loss's (and, when given with lse_for_zloss, the z-loss's) gradient.
at::Tensor npu_cross_entropy_loss_backward(const at::Tensor& grad_loss, const at::Tensor& log_prob,
                                           const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                           const std::optional<at::Tensor>& grad_zloss,
                                           const std::optional<at::Tensor>& lse_for_zloss, c10::string_view reduction,
                                           int64_t ignore_index, double label_smoothing,
                                           double lse_square_scale_for_zloss) {
  const std::string mode = checkReduction("npu_cross_entropy_loss_backward", reduction);
  at::Tensor grad_input = lossGradOutput(grad_loss, log_prob, target, weight, mode);
  EXEC_NPU_CMD(aclnnCrossEntropyLossGrad, grad_loss, log_prob, target, weight, grad_zloss, lse_for_zloss, mode,
               ignore_index, label_smoothing, lse_square_scale_for_zloss, grad_input);
  return grad_input;
}

at::Tensor npu_cross_entropy_loss_backward_meta(const at::Tensor& grad_loss, const at::Tensor& log_prob,
                                                const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                                const std::optional<at::Tensor>& grad_zloss,
                                                const std::optional<at::Tensor>& lse_for_zloss,
                                                c10::string_view reduction, int64_t ignore_index,
                                                double label_smoothing, double lse_square_scale_for_zloss) {
  const std::string mode = checkReduction("npu_cross_entropy_loss_backward", reduction);
  return lossGradOutput(grad_loss, log_prob, target, weight, mode);
}

}  // namespace at_npu::native
