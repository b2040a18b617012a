// ApplyAdamKernelNpu.cpp - torch_npu's fused Adam steps: npu_apply_adam (TensorFlow's Adam, on aclnnApplyAdam),
// npu_apply_adam_w (AdamW, on aclnnApplyAdamW) and npu_bert_apply_adam (BERT / mBART Adam, on aclnnApplyAdamV2).
// Each updates var / m / v in place through its out= overload; as in torch_npu, the functional overloads have
// no state to update and refuse to run. Hyper-parameters travel as one-element float32 tensors, the form the
// device ops take (a learning-rate schedule can then live on the device).
#include <ATen/ops/full.h>

#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using StateRefs = std::tuple<at::Tensor&, at::Tensor&, at::Tensor&>;

bool isStateType(at::ScalarType type) {
  return type == at::kFloat || type == at::kHalf || type == at::kBFloat16;
}

// var, m and v: one floating dtype and one shape, which grad shares.
void checkState(const char* op, const at::Tensor& var, const at::Tensor& m, const at::Tensor& v,
                const at::Tensor& grad) {
  TORCH_CHECK_TYPE(isStateType(var.scalar_type()) && m.scalar_type() == var.scalar_type() &&
                       v.scalar_type() == var.scalar_type(),
                   op, ": var, m and v must share one dtype of float32, float16 or bfloat16, got ", var.scalar_type(),
                   ", ", m.scalar_type(), " and ", v.scalar_type());
  TORCH_CHECK_TYPE(isStateType(grad.scalar_type()), op, ": grad must be float32, float16 or bfloat16, got ",
                   grad.scalar_type());
  TORCH_CHECK_VALUE(m.sizes() == var.sizes() && v.sizes() == var.sizes() && grad.sizes() == var.sizes(), op,
                    ": var, m, v and grad must have one shape, got ", var.sizes(), ", ", m.sizes(), ", ", v.sizes(),
                    " and ", grad.sizes());
}

// The functional overloads: torch_npu defines them but they have nothing to update. NotImplementedError is a
// RuntimeError subclass in Python, which is what torch_npu raises.
[[noreturn]] void functionalUnsupported(const char* op) {
  C10_THROW_ERROR(NotImplementedError, c10::str(op, " updates var, m and v in place and has no functional form: ",
                                                "call it with out=(var, m, v), e.g. torch_npu.", op,
                                                ".out(..., out=[var, m, v])"));
}

// A hyper-parameter as the one-element float32 device tensor the device ops read.
at::Tensor onDevice(const at::Scalar& value, const at::Tensor& like) {
  return at::full({1}, value, like.options().dtype(at::kFloat));
}

void checkAmsgrad(const at::Tensor& var, const std::optional<at::Tensor>& max_grad_norm, bool amsgrad) {
  if (!amsgrad) return;
  TORCH_CHECK_VALUE(max_grad_norm.has_value() && max_grad_norm->defined(),
                    "npu_apply_adam_w: amsgrad=True needs max_grad_norm (the running maximum of v)");
  TORCH_CHECK_VALUE(max_grad_norm->sizes() == var.sizes(), "npu_apply_adam_w: max_grad_norm must have var's shape ",
                    var.sizes(), ", got ", max_grad_norm->sizes());
  TORCH_CHECK_TYPE(isStateType(max_grad_norm->scalar_type()),
                   "npu_apply_adam_w: max_grad_norm must be float32, float16 or bfloat16, got ",
                   max_grad_norm->scalar_type());
}

// adam_mode 0 is BERT's Adam, 1 mBART's; the device op names them as the CANN kernel does.
std::string adamModeName(int64_t adam_mode) {
  TORCH_CHECK_VALUE(adam_mode == 0 || adam_mode == 1, "npu_bert_apply_adam: adam_mode must be 0 (adam) or 1 ",
                    "(mbart_adam), got ", adam_mode);
  return adam_mode == 0 ? "adam" : "mbart_adam";
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_apply_adam(
    const at::Scalar& beta1_power, const at::Scalar& beta2_power, const at::Scalar& lr, const at::Scalar& beta1,
    const at::Scalar& beta2, const at::Scalar& epsilon, const at::Tensor& grad, std::optional<bool> use_locking,
    std::optional<bool> use_nesterov) {
  functionalUnsupported("npu_apply_adam");
}

StateRefs npu_apply_adam_out(const at::Scalar& beta1_power, const at::Scalar& beta2_power, const at::Scalar& lr,
                             const at::Scalar& beta1, const at::Scalar& beta2, const at::Scalar& epsilon,
                             const at::Tensor& grad, std::optional<bool> use_locking,
                             std::optional<bool> use_nesterov, at::Tensor& var, at::Tensor& m, at::Tensor& v) {
  checkState("npu_apply_adam", var, m, v, grad);
  // use_locking guards concurrent updates of a shared variable; stream order already serializes them.
  const bool locking = use_locking.value_or(false), nesterov = use_nesterov.value_or(false);
  EXEC_NPU_CMD(aclnnApplyAdam, var, m, v, onDevice(beta1_power, grad), onDevice(beta2_power, grad),
               onDevice(lr, grad), onDevice(beta1, grad), onDevice(beta2, grad), onDevice(epsilon, grad), grad,
               locking, nesterov);
  return {var, m, v};
}

StateRefs npu_apply_adam_out_meta(const at::Scalar& beta1_power, const at::Scalar& beta2_power,
                                  const at::Scalar& lr, const at::Scalar& beta1, const at::Scalar& beta2,
                                  const at::Scalar& epsilon, const at::Tensor& grad, std::optional<bool> use_locking,
                                  std::optional<bool> use_nesterov, at::Tensor& var, at::Tensor& m, at::Tensor& v) {
  checkState("npu_apply_adam", var, m, v, grad);
  return {var, m, v};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_apply_adam_w(
    const at::Scalar& beta1_power, const at::Scalar& beta2_power, const at::Scalar& lr,
    const at::Scalar& weight_decay, const at::Scalar& beta1, const at::Scalar& beta2, const at::Scalar& epsilon,
    const at::Tensor& grad, const std::optional<at::Tensor>& max_grad_norm, std::optional<bool> amsgrad,
    std::optional<bool> maximize) {
  functionalUnsupported("npu_apply_adam_w");
}

StateRefs npu_apply_adam_w_out(const at::Scalar& beta1_power, const at::Scalar& beta2_power, const at::Scalar& lr,
                               const at::Scalar& weight_decay, const at::Scalar& beta1, const at::Scalar& beta2,
                               const at::Scalar& epsilon, const at::Tensor& grad,
                               const std::optional<at::Tensor>& max_grad_norm, std::optional<bool> amsgrad,
                               std::optional<bool> maximize, at::Tensor& var, at::Tensor& m, at::Tensor& v) {
  checkState("npu_apply_adam_w", var, m, v, grad);
  const bool use_amsgrad = amsgrad.value_or(false), use_maximize = maximize.value_or(false);
  checkAmsgrad(var, max_grad_norm, use_amsgrad);
  // Without amsgrad the running maximum is not read: it is not passed, so any placeholder is accepted.
  const std::optional<at::Tensor> running_max = use_amsgrad ? max_grad_norm : std::nullopt;
  EXEC_NPU_CMD(aclnnApplyAdamW, var, m, v, onDevice(beta1_power, grad), onDevice(beta2_power, grad),
               onDevice(lr, grad), onDevice(weight_decay, grad), onDevice(beta1, grad), onDevice(beta2, grad),
               onDevice(epsilon, grad), grad, running_max, use_amsgrad, use_maximize);
  return {var, m, v};
}

StateRefs npu_apply_adam_w_out_meta(const at::Scalar& beta1_power, const at::Scalar& beta2_power,
                                    const at::Scalar& lr, const at::Scalar& weight_decay, const at::Scalar& beta1,
                                    const at::Scalar& beta2, const at::Scalar& epsilon, const at::Tensor& grad,
                                    const std::optional<at::Tensor>& max_grad_norm, std::optional<bool> amsgrad,
                                    std::optional<bool> maximize, at::Tensor& var, at::Tensor& m, at::Tensor& v) {
  checkState("npu_apply_adam_w", var, m, v, grad);
  checkAmsgrad(var, max_grad_norm, amsgrad.value_or(false));
  return {var, m, v};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_bert_apply_adam(
    const at::Scalar& lr, const at::Scalar& beta1, const at::Scalar& beta2, const at::Scalar& epsilon,
    const at::Tensor& grad, const at::Scalar& max_grad_norm, const at::Scalar& global_grad_norm,
    const at::Scalar& weight_decay, const std::optional<at::Scalar>& step_size, int64_t adam_mode) {
  functionalUnsupported("npu_bert_apply_adam");
}

StateRefs npu_bert_apply_adam_out(const at::Scalar& lr, const at::Scalar& beta1, const at::Scalar& beta2,
                                  const at::Scalar& epsilon, const at::Tensor& grad, const at::Scalar& max_grad_norm,
                                  const at::Scalar& global_grad_norm, const at::Scalar& weight_decay,
                                  const std::optional<at::Scalar>& step_size, int64_t adam_mode, at::Tensor& var,
                                  at::Tensor& m, at::Tensor& v) {
  checkState("npu_bert_apply_adam", var, m, v, grad);
  const std::string mode = adamModeName(adam_mode);
  // mBART's step size: the device op falls back to lr when it is absent.
  const std::optional<at::Tensor> step =
      step_size.has_value() ? std::optional<at::Tensor>(onDevice(*step_size, grad)) : std::nullopt;
  EXEC_NPU_CMD(aclnnApplyAdamV2, var, m, v, onDevice(lr, grad), onDevice(beta1, grad), onDevice(beta2, grad),
               onDevice(epsilon, grad), grad, onDevice(max_grad_norm, grad), onDevice(global_grad_norm, grad),
               onDevice(weight_decay, grad), step, mode);
  return {var, m, v};
}

StateRefs npu_bert_apply_adam_out_meta(const at::Scalar& lr, const at::Scalar& beta1, const at::Scalar& beta2,
                                       const at::Scalar& epsilon, const at::Tensor& grad,
                                       const at::Scalar& max_grad_norm, const at::Scalar& global_grad_norm,
                                       const at::Scalar& weight_decay, const std::optional<at::Scalar>& step_size,
                                       int64_t adam_mode, at::Tensor& var, at::Tensor& m, at::Tensor& v) {
  checkState("npu_bert_apply_adam", var, m, v, grad);
  adamModeName(adam_mode);
  return {var, m, v};
}

}  // namespace at_npu::native
