// MoeUpdateExpertKernelNpu.cpp - npu_moe_update_expert (logical -> physical expert mapping for redundant expert
// deployment, plus threshold pruning of each token's top-k experts) on aclnnMoeUpdateExpert.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

void checkUpdateExpert(const at::Tensor& expert_ids, const at::Tensor& eplb_table,
                       const std::optional<at::Tensor>& expert_scales,
                       const std::optional<at::Tensor>& pruning_threshold, const std::optional<at::Tensor>& active_mask,
                       int64_t local_rank_id, int64_t world_size, int64_t balance_mode) {
  const char* op = "npu_moe_update_expert";
  TORCH_CHECK_VALUE(expert_ids.dim() == 2, op, ": expert_ids must be 2-D [BS, K], got ", expert_ids.sizes());
  TORCH_CHECK_TYPE(expert_ids.scalar_type() == at::kInt || expert_ids.scalar_type() == at::kLong, op,
                   ": expert_ids must be int32 or int64, got ", expert_ids.scalar_type());
  TORCH_CHECK_VALUE(eplb_table.dim() == 2 && eplb_table.size(1) >= 2, op,
                    ": eplb_table must be 2-D [log_expert_num, F] with F >= 2, got ", eplb_table.sizes());
  TORCH_CHECK_TYPE(eplb_table.scalar_type() == at::kInt, op, ": eplb_table must be int32, got ",
                   eplb_table.scalar_type());
  TORCH_CHECK_VALUE(balance_mode == 0 || balance_mode == 1, op, ": balance_mode must be 0 (by local_rank_id) or 1 ",
                    "(by token id), got ", balance_mode);
  TORCH_CHECK_VALUE(balance_mode != 0 || (world_size >= 1 && local_rank_id >= 0 && local_rank_id < world_size), op,
                    ": balance_mode 0 needs 0 <= local_rank_id < world_size, got local_rank_id ", local_rank_id,
                    " and world_size ", world_size);
  TORCH_CHECK_VALUE(present(expert_scales) == present(pruning_threshold), op,
                    ": expert_scales and pruning_threshold must be given together");
  TORCH_CHECK_VALUE(!present(active_mask) || present(expert_scales), op,
                    ": active_mask needs expert_scales and pruning_threshold");
  if (present(expert_scales)) {
    TORCH_CHECK_VALUE(expert_scales->sizes() == expert_ids.sizes(), op, ": expert_scales must be [BS, K] like ",
                      "expert_ids ", expert_ids.sizes(), ", got ", expert_scales->sizes());
    TORCH_CHECK_VALUE(pruning_threshold->numel() == expert_ids.size(1) && pruning_threshold->dim() <= 2, op,
                      ": pruning_threshold must be [K] or [1, K] with K = ", expert_ids.size(1), ", got ",
                      pruning_threshold->sizes());
  }
  if (present(active_mask)) {
    TORCH_CHECK_VALUE(active_mask->dim() == 1 && active_mask->size(0) == expert_ids.size(0), op,
                      ": active_mask must be [BS] = [", expert_ids.size(0), "], got ", active_mask->sizes());
    TORCH_CHECK_TYPE(active_mask->scalar_type() == at::kBool, op, ": active_mask must be bool, got ",
                     active_mask->scalar_type());
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_moe_update_expert(const at::Tensor& expert_ids, const at::Tensor& eplb_table,
                                                         const std::optional<at::Tensor>& expert_scales,
                                                         const std::optional<at::Tensor>& pruning_threshold,
                                                         const std::optional<at::Tensor>& active_mask,
                                                         int64_t local_rank_id, int64_t world_size,
                                                         int64_t balance_mode) {
  checkUpdateExpert(expert_ids, eplb_table, expert_scales, pruning_threshold, active_mask, local_rank_id, world_size,
                    balance_mode);
  at::Tensor balanced_expert_ids = at::empty(expert_ids.sizes(), expert_ids.options());
  at::Tensor balanced_active_mask = at::empty(expert_ids.sizes(), expert_ids.options().dtype(at::kBool));
  EXEC_NPU_CMD(aclnnMoeUpdateExpert, expert_ids, eplb_table, expert_scales, pruning_threshold, active_mask,
               local_rank_id, world_size, balance_mode, balanced_expert_ids, balanced_active_mask);
  return {balanced_expert_ids, balanced_active_mask};
}

std::tuple<at::Tensor, at::Tensor> npu_moe_update_expert_meta(const at::Tensor& expert_ids,
                                                              const at::Tensor& eplb_table,
                                                              const std::optional<at::Tensor>& expert_scales,
                                                              const std::optional<at::Tensor>& pruning_threshold,
                                                              const std::optional<at::Tensor>& active_mask,
                                                              int64_t local_rank_id, int64_t world_size,
                                                              int64_t balance_mode) {
  return {at::empty(expert_ids.sizes(), expert_ids.options()),
          at::empty(expert_ids.sizes(), expert_ids.options().dtype(at::kBool))};
}

}  // namespace at_npu::native
