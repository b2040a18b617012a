// ApplyAdamOps.cpp - fused Adam steps updating var / m / v in place: ApplyAdam (TensorFlow's Adam, bias
// correction folded into the step size), ApplyAdamW (decoupled weight decay, amsgrad, maximize) and ApplyAdamV2
// (BERT's Adam with global-norm clipping, or mBART's with a separate step size). Hyper-parameters are
// one-element tensors read when the kernel runs; the update is computed in float32 and rounded once into each
// operand's dtype, as the CANN kernels do for float16.
#include <ATen/TensorOperators.h>
#include <ATen/ops/maximum.h>

#include <cmath>
#include <string>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

bool isStateType(at::ScalarType type) {
  return type == at::kFloat || type == at::kHalf || type == at::kBFloat16;
}

// The optimizer state a step updates in place (var, m, v) and the gradient it reads.
struct AdamState {
  at::Tensor var, m, v, grad;

  at::Tensor var32() const { return var.to(at::kFloat); }
  at::Tensor m32() const { return m.to(at::kFloat); }
  at::Tensor v32() const { return v.to(at::kFloat); }
  at::Tensor grad32() const { return grad.to(at::kFloat); }

  // New values (float32) into the operands, in their dtype and strides.
  void store(const at::Tensor& new_var, const at::Tensor& new_m, const at::Tensor& new_v) {
    var.copy_(new_var);
    m.copy_(new_m);
    v.copy_(new_v);
  }
};

AdamState adamState(const char* op, aclTensor* var, aclTensor* m, aclTensor* v, const aclTensor* grad) {
  AdamState s{requiredTensor(var, "var"), requiredTensor(m, "m"), requiredTensor(v, "v"), requiredTensor(grad, "grad")};
  TORCH_CHECK(isStateType(s.var.scalar_type()) && s.m.scalar_type() == s.var.scalar_type() &&
                  s.v.scalar_type() == s.var.scalar_type() && isStateType(s.grad.scalar_type()),
              op, ": var, m and v must share one dtype of float32, float16 or bfloat16 and grad be one of them, got ",
              describeTensors({s.var, s.m, s.v, s.grad}));
  TORCH_CHECK(s.m.sizes() == s.var.sizes() && s.v.sizes() == s.var.sizes() && s.grad.sizes() == s.var.sizes(), op,
              ": var, m, v and grad must have one shape, got ", describeTensors({s.var, s.m, s.v, s.grad}));
  return s;
}

// A hyper-parameter operand: one value of any floating dtype (its data may still be in flight at launch, so the
// value is read by the kernel).
at::Tensor hyperParameter(const char* op, const aclTensor* tensor, const char* what) {
  at::Tensor h = requiredTensor(tensor, what);
  TORCH_CHECK(h.numel() == 1 && at::isFloatingType(h.scalar_type()), op, ": ", what,
              " must hold one floating-point value, got ", describeTensors({h}));
  return h;
}

double valueOf(const at::Tensor& hyper) {
  return hyper.item<double>();
}

}  // namespace

// m += (1 - beta1)(g - m); v += (1 - beta2)(g^2 - v);
// var -= lr sqrt(1 - beta2Power) / (1 - beta1Power) * (nesterov ? beta1 m + (1 - beta1) g : m) / (sqrt(v) + eps).
extern "C" NOP_API aclnnStatus aclnnApplyAdamGetWorkspaceSize(
    aclTensor* varRef, aclTensor* mRef, aclTensor* vRef, const aclTensor* beta1Power, const aclTensor* beta2Power,
    const aclTensor* lr, const aclTensor* beta1, const aclTensor* beta2, const aclTensor* epsilon,
    const aclTensor* grad, bool useLocking, bool useNesterov, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnApplyAdam", workspaceSize, executor, [&] {
    const char* op = "aclnnApplyAdam";
    AdamState s = adamState(op, varRef, mRef, vRef, grad);
    at::Tensor b1p = hyperParameter(op, beta1Power, "beta1Power"), b2p = hyperParameter(op, beta2Power, "beta2Power");
    at::Tensor rate = hyperParameter(op, lr, "lr"), b1 = hyperParameter(op, beta1, "beta1");
    at::Tensor b2 = hyperParameter(op, beta2, "beta2"), eps = hyperParameter(op, epsilon, "epsilon");
    return Prepared{{s.grad, b1p, b2p, rate, b1, b2, eps}, [=]() mutable {
                      const double beta1_v = valueOf(b1), beta2_v = valueOf(b2);
                      // beta1Power = 1 (step 0) divides by zero: NaN, as the device kernel gives.
                      const double step = valueOf(rate) * std::sqrt(1 - valueOf(b2p)) / (1 - valueOf(b1p));
                      const at::Tensor g = s.grad32(), m = s.m32(), v = s.v32();
                      const at::Tensor new_m = m + (g - m) * (1 - beta1_v);
                      const at::Tensor new_v = v + (g * g - v) * (1 - beta2_v);
                      const at::Tensor direction = useNesterov ? new_m * beta1_v + g * (1 - beta1_v) : new_m;
                      const at::Tensor new_var = s.var32() - direction * step / (new_v.sqrt() + valueOf(eps));
                      s.store(new_var, new_m, new_v);
                    },
                    {s.var, s.m, s.v}};
  });
}
NPU_ATEN_OP(ApplyAdam, "varRef, mRef, vRef, beta1Power, beta2Power, lr, beta1, beta2, epsilon, grad, useLocking, "
                       "useNesterov");

// g = maximize ? -grad : grad; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2; with
// bt = betaPower * beta (the powers given are the previous step's):
// var = var (1 - lr wd) - lr (m / (1 - b1t)) / (sqrt(v' / (1 - b2t)) + eps), v' = amsgrad ? max(maxGradNorm, v) : v.
// v keeps the moving average; the running maximum is the caller's to keep.
extern "C" NOP_API aclnnStatus aclnnApplyAdamWGetWorkspaceSize(
    aclTensor* varRef, aclTensor* mRef, aclTensor* vRef, const aclTensor* beta1Power, const aclTensor* beta2Power,
    const aclTensor* lr, const aclTensor* weightDecay, const aclTensor* beta1, const aclTensor* beta2,
    const aclTensor* eps, const aclTensor* grad, const aclTensor* maxGradNormOptional, bool amsgrad, bool maximize,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnApplyAdamW", workspaceSize, executor, [&] {
    const char* op = "aclnnApplyAdamW";
    AdamState s = adamState(op, varRef, mRef, vRef, grad);
    at::Tensor b1p = hyperParameter(op, beta1Power, "beta1Power"), b2p = hyperParameter(op, beta2Power, "beta2Power");
    at::Tensor rate = hyperParameter(op, lr, "lr"), decay = hyperParameter(op, weightDecay, "weightDecay");
    at::Tensor b1 = hyperParameter(op, beta1, "beta1"), b2 = hyperParameter(op, beta2, "beta2");
    at::Tensor epsilon = hyperParameter(op, eps, "eps");
    at::Tensor running_max = hostTensor(maxGradNormOptional);
    TORCH_CHECK(!amsgrad || (running_max.defined() && running_max.sizes() == s.var.sizes()), op,
                ": amsgrad needs maxGradNorm of var's shape ", s.var.sizes());
    return Prepared{{s.grad, running_max, b1p, b2p, rate, decay, b1, b2, epsilon}, [=]() mutable {
                      const double beta1_v = valueOf(b1), beta2_v = valueOf(b2), rate_v = valueOf(rate);
                      const double beta1_t = valueOf(b1p) * beta1_v, beta2_t = valueOf(b2p) * beta2_v;
                      const at::Tensor g = maximize ? -s.grad32() : s.grad32();
                      const at::Tensor new_m = s.m32() * beta1_v + g * (1 - beta1_v);
                      const at::Tensor new_v = s.v32() * beta2_v + g * g * (1 - beta2_v);
                      const at::Tensor second = amsgrad ? at::maximum(running_max.to(at::kFloat), new_v) : new_v;
                      const at::Tensor denom = (second / (1 - beta2_t)).sqrt() + valueOf(epsilon);
                      const at::Tensor new_var = s.var32() * (1 - rate_v * valueOf(decay)) -
                                                 new_m / (1 - beta1_t) * rate_v / denom;
                      s.store(new_var, new_m, new_v);
                    },
                    {s.var, s.m, s.v}};
  });
}
NPU_ATEN_OP(ApplyAdamW, "varRef, mRef, vRef, beta1Power, beta2Power, lr, weightDecay, beta1, beta2, eps, grad, "
                        "maxGradNormOptional, amsgrad, maximize");

// adamMode "adam" (BERT): g = grad / globalGradNorm when maxGradNorm > 0 and globalGradNorm > 1;
//   m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2; u = m / (sqrt(v) + eps) (+ wd var when wd > 0);
//   var -= lr u.
// "mbart_adam": no clipping; var -= stepSize m / (sqrt(v) + eps) (+ lr wd var when wd > 0); stepSize defaults to lr.
extern "C" NOP_API aclnnStatus aclnnApplyAdamV2GetWorkspaceSize(
    aclTensor* varRef, aclTensor* mRef, aclTensor* vRef, const aclTensor* lr, const aclTensor* beta1,
    const aclTensor* beta2, const aclTensor* epsilon, const aclTensor* grad, const aclTensor* maxGradNorm,
    const aclTensor* globalGradNorm, const aclTensor* weightDecay, const aclTensor* stepSizeOptional, char* adamMode,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnApplyAdamV2", workspaceSize, executor, [&] {
    const char* op = "aclnnApplyAdamV2";
    const std::string mode = adamMode == nullptr ? "adam" : adamMode;
    TORCH_CHECK(mode == "adam" || mode == "mbart_adam", op, ": adamMode must be 'adam' or 'mbart_adam', got '", mode,
                "'");
    AdamState s = adamState(op, varRef, mRef, vRef, grad);
    at::Tensor rate = hyperParameter(op, lr, "lr"), b1 = hyperParameter(op, beta1, "beta1");
    at::Tensor b2 = hyperParameter(op, beta2, "beta2"), eps = hyperParameter(op, epsilon, "epsilon");
    at::Tensor max_norm = hyperParameter(op, maxGradNorm, "maxGradNorm");
    at::Tensor global_norm = hyperParameter(op, globalGradNorm, "globalGradNorm");
    at::Tensor decay = hyperParameter(op, weightDecay, "weightDecay");
    at::Tensor step_size =
        stepSizeOptional == nullptr ? at::Tensor() : hyperParameter(op, stepSizeOptional, "stepSizeOptional");
    const bool bert = mode == "adam";
    return Prepared{{s.grad, rate, b1, b2, eps, max_norm, global_norm, decay, step_size}, [=]() mutable {
                      const double beta1_v = valueOf(b1), beta2_v = valueOf(b2), rate_v = valueOf(rate);
                      const double decay_v = valueOf(decay), global_v = valueOf(global_norm);
                      at::Tensor g = s.grad32();
                      if (bert && valueOf(max_norm) > 0 && global_v > 1) g = g / global_v;
                      const at::Tensor var = s.var32();
                      const at::Tensor new_m = s.m32() * beta1_v + g * (1 - beta1_v);
                      const at::Tensor new_v = s.v32() * beta2_v + g * g * (1 - beta2_v);
                      at::Tensor update = new_m / (new_v.sqrt() + valueOf(eps));
                      at::Tensor new_var;
                      if (bert) {
                        if (decay_v > 0) update = update + var * decay_v;
                        new_var = var - update * rate_v;
                      } else {
                        const double step = step_size.defined() ? valueOf(step_size) : rate_v;
                        new_var = var - update * step;
                        if (decay_v > 0) new_var = new_var - var * (decay_v * rate_v);
                      }
                      s.store(new_var, new_m, new_v);
                    },
                    {s.var, s.m, s.v}};
  });
}
NPU_ATEN_OP(ApplyAdamV2, "varRef, mRef, vRef, lr, beta1, beta2, epsilon, grad, maxGradNorm, globalGradNorm, "
                         "weightDecay, stepSizeOptional, adamMode");
