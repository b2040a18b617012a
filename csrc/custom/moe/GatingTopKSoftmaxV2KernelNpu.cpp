// GatingTopKSoftmaxV2KernelNpu.cpp - npu_moe_gating_top_k_softmax_v2: MoE routing of (rows, experts) logits, softmax
// then top-k (renorm 0, optionally returning the full softmax) or top-k then softmax over the k (renorm 1), finished
// rows routed to expert index E; on the aclnnMoeGatingTopKSoftmaxV2 device op. Inference only (no backward).
#include <ATen/ops/empty.h>

#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

struct GatingV2Plan {
  std::vector<int64_t> topk_shape, softmax_shape;
  int64_t renorm = 0;
  bool softmax_out = false;
};

GatingV2Plan planGatingV2(const at::Tensor& x, int64_t k, const std::optional<at::Tensor>& finished,
                          std::optional<int64_t> renorm, std::optional<bool> output_softmax) {
  const char* op = "npu_moe_gating_top_k_softmax_v2";
  TORCH_CHECK_VALUE(x.dim() == 2 || x.dim() == 3, op, ": x must be 2-D or 3-D [..., experts], got ", x.sizes());
  TORCH_CHECK_TYPE(x.scalar_type() == at::kHalf || x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16,
                   op, ": x must be float16, float32 or bfloat16, got ", x.scalar_type());
  TORCH_CHECK_VALUE(k >= 0 && k <= x.size(-1), op, ": k must be in [0, ", x.size(-1), "] (the expert count), got ", k);
  GatingV2Plan plan;
  plan.renorm = renorm.value_or(0);
  TORCH_CHECK_VALUE(plan.renorm == 0 || plan.renorm == 1, op, ": renorm must be 0 (softmax, then top-k) or 1 (top-k, "
                    "then softmax), got ", plan.renorm);
  if (finished.has_value() && finished->defined()) {
    TORCH_CHECK_TYPE(finished->scalar_type() == at::kBool, op, ": finished must be bool, got ",
                     finished->scalar_type());
    TORCH_CHECK_VALUE(finished->sizes() == x.sizes().slice(0, x.dim() - 1), op, ": finished must have x's leading "
                      "shape ", x.sizes().slice(0, x.dim() - 1), ", got ", finished->sizes());
  }
  // The softmax is an output of the softmax-first form only.
  plan.softmax_out = plan.renorm == 0 && output_softmax.value_or(false);
  plan.topk_shape = x.sizes().vec();
  plan.topk_shape.back() = k;
  plan.softmax_shape = plan.softmax_out ? x.sizes().vec() : std::vector<int64_t>{0};
  return plan;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> gatingV2Outputs(const at::Tensor& x, const GatingV2Plan& plan) {
  return {at::empty(plan.topk_shape, x.options()), at::empty(plan.topk_shape, x.options().dtype(at::kInt)),
          at::empty(plan.softmax_shape, x.options().dtype(at::kFloat))};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_gating_top_k_softmax_v2(const at::Tensor& x, int64_t k,
                                                                             const std::optional<at::Tensor>& finished,
                                                                             std::optional<int64_t> renorm,
                                                                             std::optional<bool> output_softmax) {
  const GatingV2Plan plan = planGatingV2(x, k, finished, renorm, output_softmax);
  auto [y, expert_idx, softmax] = gatingV2Outputs(x, plan);
  if (k == 0 || x.numel() == 0) return {y, expert_idx, softmax};  // nothing to route (as torch_npu)
  EXEC_NPU_CMD(aclnnMoeGatingTopKSoftmaxV2, x, finished, k, plan.renorm, plan.softmax_out, y, expert_idx, softmax);
  return {y, expert_idx, softmax};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_gating_top_k_softmax_v2_meta(
    const at::Tensor& x, int64_t k, const std::optional<at::Tensor>& finished, std::optional<int64_t> renorm,
    std::optional<bool> output_softmax) {
  return gatingV2Outputs(x, planGatingV2(x, k, finished, renorm, output_softmax));
}

}  // namespace at_npu::native
