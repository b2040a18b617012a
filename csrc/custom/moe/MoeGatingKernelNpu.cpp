// MoeGatingKernelNpu.cpp - MoE gating: npu_moe_gating_top_k_softmax (softmax, then the k best experts, on
// aclnnMoeGatingTopKSoftmax), npu_moe_gating_top_k (softmax / sigmoid scores, group-limited top-k or hash
// routing, on aclnnMoeGatingTopK / aclnnMoeGatingTopKV2) and its backward npu_moe_gating_top_k_backward
// (aclnnMoeGatingTopKBackward).
#include <ATen/ops/empty.h>

#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

bool isGateFloat(at::ScalarType type) { return type == at::kFloat || type == at::kHalf || type == at::kBFloat16; }

bool isIndexType(at::ScalarType type) { return type == at::kInt || type == at::kLong; }

// The outputs' shape: x's leading dimensions, then k.
std::vector<int64_t> softmaxGateShape(const at::Tensor& x, const std::optional<at::Tensor>& finished, int64_t k) {
  const char* op = "npu_moe_gating_top_k_softmax";
  TORCH_CHECK_VALUE(x.dim() == 2 || x.dim() == 3, op, ": x must be 2-D [tokens, experts] or 3-D [batch, tokens, ",
                    "experts], got ", x.sizes());
  TORCH_CHECK_TYPE(isGateFloat(x.scalar_type()), op, ": x must be float16, bfloat16 or float32, got ", x.scalar_type());
  TORCH_CHECK_VALUE(k >= 0 && k <= x.size(-1), op, ": k must be in [0, ", x.size(-1), "] (the number of experts), got ",
                    k);
  const at::IntArrayRef rows = x.sizes().slice(0, x.dim() - 1);
  if (present(finished)) {
    TORCH_CHECK_TYPE(finished->scalar_type() == at::kBool, op, ": finished must be bool, got ",
                     finished->scalar_type());
    TORCH_CHECK_VALUE(finished->sizes().equals(rows), op, ": finished must have x's shape without the expert ",
                      "dimension, ", rows, ", got ", finished->sizes());
  }
  std::vector<int64_t> shape = rows.vec();
  shape.push_back(k);
  return shape;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_gating_top_k_softmax(const at::Tensor& x,
                                                                           const std::optional<at::Tensor>& finished,
                                                                           int64_t k) {
  const std::vector<int64_t> shape = softmaxGateShape(x, finished, k);
  at::Tensor y = at::empty(shape, x.options());
  at::Tensor expert_idx = at::empty(shape, x.options().dtype(at::kInt));
  at::Tensor row_idx = at::empty(shape, x.options().dtype(at::kInt));
  if (y.numel() == 0) return {y, expert_idx, row_idx};  // k == 0 or no tokens: nothing to select
  EXEC_NPU_CMD(aclnnMoeGatingTopKSoftmax, x, finished, k, y, expert_idx, row_idx);
  return {y, expert_idx, row_idx};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_gating_top_k_softmax_meta(
    const at::Tensor& x, const std::optional<at::Tensor>& finished, int64_t k) {
  const std::vector<int64_t> shape = softmaxGateShape(x, finished, k);
  return {at::empty(shape, x.options()), at::empty(shape, x.options().dtype(at::kInt)),
          at::empty(shape, x.options().dtype(at::kInt))};
}

namespace {

// Checks npu_moe_gating_top_k's arguments (shapes and the group / k constraints torch_npu documents).
void checkGroupedGate(const at::Tensor& x, int64_t k, const std::optional<at::Tensor>& bias,
                      const std::optional<at::Tensor>& input_ids, const std::optional<at::Tensor>& tid2eid,
                      int64_t k_group, int64_t group_count, int64_t group_select_mode, int64_t renorm,
                      int64_t norm_type) {
  const char* op = "npu_moe_gating_top_k";
  TORCH_CHECK_VALUE(x.dim() == 2, op, ": x must be 2-D [tokens, experts], got ", x.sizes());
  TORCH_CHECK_TYPE(isGateFloat(x.scalar_type()), op, ": x must be float16, bfloat16 or float32, got ", x.scalar_type());
  const int64_t experts = x.size(1);
  if (present(bias)) {
    TORCH_CHECK_TYPE(bias->scalar_type() == x.scalar_type(), op, ": bias must have x's dtype ", x.scalar_type(),
                     ", got ", bias->scalar_type());
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == experts, op, ": bias must be 1-D [", experts,
                      "] (one value per expert), got ", bias->sizes());
  }
  TORCH_CHECK_VALUE(present(input_ids) == present(tid2eid), op, ": input_ids and tid2eid select hash routing ",
                    "together: give both or neither");
  TORCH_CHECK_VALUE(norm_type == 0 || norm_type == 1, op, ": norm_type must be 0 (softmax) or 1 (sigmoid), got ",
                    norm_type);
  TORCH_CHECK_VALUE(renorm == 0, op, ": renorm must be 0 (normalise, then select: the only order torch_npu ",
                    "defines), got ", renorm);
  TORCH_CHECK_VALUE(group_select_mode == 0 || group_select_mode == 1, op, ": group_select_mode must be 0 (a ",
                    "group scores its best expert) or 1 (the sum of its best two), got ", group_select_mode);
  TORCH_CHECK_VALUE(group_count >= 1 && experts % group_count == 0, op, ": group_count must divide the ", experts,
                    " experts, got ", group_count);
  TORCH_CHECK_VALUE(k_group >= 1 && k_group <= group_count, op, ": k_group must be in [1, group_count = ",
                    group_count, "], got ", k_group);
  if (present(input_ids)) {
    TORCH_CHECK_TYPE(isIndexType(input_ids->scalar_type()) && isIndexType(tid2eid->scalar_type()), op,
                     ": input_ids and tid2eid must be int32 or int64, got ", input_ids->scalar_type(), " and ",
                     tid2eid->scalar_type());
    TORCH_CHECK_VALUE(input_ids->dim() == 1 && input_ids->size(0) == x.size(0), op, ": input_ids must be 1-D [",
                      x.size(0), "] (one id per token), got ", input_ids->sizes());
    TORCH_CHECK_VALUE(tid2eid->dim() == 2 && tid2eid->size(1) == k, op, ": tid2eid must be 2-D [ids, k = ", k,
                      "], got ", tid2eid->sizes());
    TORCH_CHECK_VALUE(k >= 1, op, ": k must be at least 1, got ", k);
    return;
  }
  const int64_t group_size = experts / group_count;
  TORCH_CHECK_VALUE(group_select_mode == 0 || group_size >= 2, op, ": group_select_mode=1 scores a group by its two ",
                    "best experts, so groups need at least 2 experts; got ", group_size);
  TORCH_CHECK_VALUE(k >= 1 && k <= k_group * group_size, op, ": k must be in [1, k_group * experts / group_count = ",
                    k_group * group_size, "], got ", k);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> groupedGateOutputs(const at::Tensor& x, int64_t k) {
  return {at::empty({x.size(0), k}, x.options()), at::empty({x.size(0), k}, x.options().dtype(at::kInt)),
          at::empty({x.size(0), x.size(1)}, x.options().dtype(at::kFloat))};
}

}  // namespace

// norm_out (the third output) is always written, whatever out_flag says: the backward reads it.
std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_gating_top_k(
    const at::Tensor& x, int64_t k, const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& input_ids,
    const std::optional<at::Tensor>& tid2eid, int64_t k_group, int64_t group_count, int64_t group_select_mode,
    int64_t renorm, int64_t norm_type, bool out_flag, double routed_scaling_factor, double eps) {
  checkGroupedGate(x, k, bias, input_ids, tid2eid, k_group, group_count, group_select_mode, renorm, norm_type);
  auto [y, expert_idx, norm_out] = groupedGateOutputs(x, k);
  if (x.size(0) == 0) return {y, expert_idx, norm_out};
  if (present(input_ids)) {
    EXEC_NPU_CMD(aclnnMoeGatingTopKV2, x, bias, input_ids, tid2eid, k, k_group, group_count, group_select_mode, renorm,
                 norm_type, out_flag, routed_scaling_factor, eps, y, expert_idx, norm_out);
  } else {
    EXEC_NPU_CMD(aclnnMoeGatingTopK, x, bias, k, k_group, group_count, group_select_mode, renorm, norm_type, out_flag,
                 routed_scaling_factor, eps, y, expert_idx, norm_out);
  }
  return {y, expert_idx, norm_out};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_gating_top_k_meta(
    const at::Tensor& x, int64_t k, const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& input_ids,
    const std::optional<at::Tensor>& tid2eid, int64_t k_group, int64_t group_count, int64_t group_select_mode,
    int64_t renorm, int64_t norm_type, bool out_flag, double routed_scaling_factor, double eps) {
  checkGroupedGate(x, k, bias, input_ids, tid2eid, k_group, group_count, group_select_mode, renorm, norm_type);
  return groupedGateOutputs(x, k);
}

namespace {

void checkGateBackward(const at::Tensor& x_norm, const at::Tensor& grad_y, const at::Tensor& expert_idx,
                       int64_t renorm, int64_t norm_type) {
  const char* op = "npu_moe_gating_top_k_backward";
  TORCH_CHECK_VALUE(x_norm.dim() == 2, op, ": x_norm must be 2-D [tokens, experts] (the forward's norm_out), got ",
                    x_norm.sizes());
  TORCH_CHECK_VALUE(grad_y.dim() == 2 && grad_y.size(0) == x_norm.size(0) && expert_idx.sizes().equals(grad_y.sizes()),
                    op, ": grad_y and expertIdx must both be [tokens = ", x_norm.size(0), ", k], got ",
                    grad_y.sizes(), " and ", expert_idx.sizes());
  TORCH_CHECK_TYPE(isGateFloat(x_norm.scalar_type()) && isGateFloat(grad_y.scalar_type()), op,
                   ": x_norm and grad_y must be floating point, got ", x_norm.scalar_type(), " and ",
                   grad_y.scalar_type());
  TORCH_CHECK_TYPE(isIndexType(expert_idx.scalar_type()), op, ": expertIdx must be int32 or int64, got ",
                   expert_idx.scalar_type());
  TORCH_CHECK_VALUE(norm_type == 0 || norm_type == 1, op, ": norm_type must be 0 (softmax) or 1 (sigmoid), got ",
                    norm_type);
  TORCH_CHECK_VALUE(renorm == 0, op, ": renorm must be 0 (as in the forward), got ", renorm);
}

}  // namespace

at::Tensor npu_moe_gating_top_k_backward(const at::Tensor& x_norm, const at::Tensor& grad_y,
                                         const at::Tensor& expertIdx, int64_t renorm, int64_t norm_type,
                                         double routed_scaling_factor, double eps) {
  checkGateBackward(x_norm, grad_y, expertIdx, renorm, norm_type);
  at::Tensor grad_x = at::empty(x_norm.sizes(), grad_y.options());
  if (grad_x.numel() == 0) return grad_x;
  EXEC_NPU_CMD(aclnnMoeGatingTopKBackward, x_norm, grad_y, expertIdx, renorm, norm_type, routed_scaling_factor, eps,
               grad_x);
  return grad_x;
}

at::Tensor npu_moe_gating_top_k_backward_meta(const at::Tensor& x_norm, const at::Tensor& grad_y,
                                              const at::Tensor& expertIdx, int64_t renorm, int64_t norm_type,
                                              double routed_scaling_factor, double eps) {
  checkGateBackward(x_norm, grad_y, expertIdx, renorm, norm_type);
  return at::empty(x_norm.sizes(), grad_y.options());
}

}  // namespace at_npu::native
