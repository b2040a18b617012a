// MoeInitRoutingQuantKernelNpu.cpp - npu_moe_init_routing_quant: MoE token expansion by expert (dropless, active
// or drop / pad) with the expanded rows quantized to int8, static (x * scale + offset) or dynamic (per row, with an
// optional smoothing scale), on aclnnMoeInitRoutingQuantV2. Inference op: no gradient upstream.
#include <ATen/ops/empty.h>

#include <algorithm>
#include <tuple>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kMoeInitRoutingQuantOp = "npu_moe_init_routing_quant";

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

bool isFloat(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
}

using RoutingQuantOutputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// expanded_x (int8: [expert_num, expert_capacity, H] with drop / pad, else [rows, H]), expanded_row_idx [tokens * k]
// int32, the per-expert token counts (dropless with expert_tokens_num_mode > 0) and counts before capacity (drop /
// pad with the flag), both [expert_num] int32, and the dynamic scales [rows] float32. Outputs a mode does not make
// are undefined (None), as upstream.
RoutingQuantOutputs routingQuantOutputs(const at::Tensor& x, const at::Tensor& expert_idx,
                                        const std::optional<at::Tensor>& scale,
                                        const std::optional<at::Tensor>& offset, int64_t active_num,
                                        int64_t expert_capacity, int64_t expert_num, int64_t drop_pad_mode,
                                        int64_t expert_tokens_num_mode, bool expert_tokens_before_capacity_flag,
                                        int64_t quant_mode) {
  const char* op = kMoeInitRoutingQuantOp;
  TORCH_CHECK_VALUE(x.dim() == 2, op, ": x must be 2-d [tokens, H], got ", x.sizes());
  TORCH_CHECK_TYPE(isFloat(x), op, ": x must be float16, bfloat16 or float32, got ", x.scalar_type());
  TORCH_CHECK_VALUE(expert_idx.dim() == 2 && expert_idx.size(0) == x.size(0), op,
                    ": expert_idx must be 2-d [tokens = ", x.size(0), ", k], got ", expert_idx.sizes());
  TORCH_CHECK_TYPE(expert_idx.scalar_type() == at::kInt, op, ": expert_idx must be int32, got ",
                   expert_idx.scalar_type());
  TORCH_CHECK_VALUE(drop_pad_mode == 0 || drop_pad_mode == 1, op, ": drop_pad_mode must be 0 (dropless / active) ",
                    "or 1 (drop / pad), got ", drop_pad_mode);
  TORCH_CHECK_VALUE(quant_mode == 0 || quant_mode == 1, op, ": quant_mode must be 0 (static) or 1 (dynamic), got ",
                    quant_mode);
  TORCH_CHECK_VALUE(expert_tokens_num_mode >= 0 && expert_tokens_num_mode <= 2, op,
                    ": expert_tokens_num_mode must be 0 (none), 1 (cumsum) or 2 (count), got ",
                    expert_tokens_num_mode);
  TORCH_CHECK_VALUE(expert_num >= 1, op, ": expert_num must be the number of experts (>= 1), got ", expert_num);
  TORCH_CHECK_VALUE(drop_pad_mode == 0 || expert_capacity >= 1, op,
                    ": drop / pad needs expert_capacity >= 1 (tokens kept per expert), got ", expert_capacity);
  const int64_t h = x.size(1);
  if (quant_mode == 0) {
    TORCH_CHECK_VALUE(present(scale) && scale->numel() == 1, op,
                      ": static quantization (quant_mode=0) needs scale of one value, e.g. shape [1]");
    TORCH_CHECK_VALUE(!present(offset) || offset->numel() == 1, op, ": offset must hold one value, got ",
                      offset->sizes());
  } else {
    TORCH_CHECK_VALUE(!present(offset), op, ": offset is for static quantization (quant_mode=0) only");
    TORCH_CHECK_VALUE(!present(scale) || (scale->dim() == 2 && scale->size(1) == h &&
                                          (scale->size(0) == 1 || scale->size(0) == expert_num)),
                      op, ": dynamic quantization's smoothing scale must be [1, ", h, "] or [expert_num = ",
                      expert_num, ", ", h, "], got ", present(scale) ? scale->sizes() : at::IntArrayRef());
  }
  if (present(scale)) {
    TORCH_CHECK_TYPE(isFloat(*scale), op, ": scale must be a float tensor, got ", scale->scalar_type());
  }
  if (present(offset)) {
    TORCH_CHECK_TYPE(isFloat(*offset), op, ": offset must be a float tensor, got ", offset->scalar_type());
  }
  const int64_t nk = expert_idx.numel();
  at::Tensor expanded_x;
  int64_t rows = 0;
  if (drop_pad_mode == 1) {
    rows = expert_num * expert_capacity;
    expanded_x = at::empty({expert_num, expert_capacity, h}, x.options().dtype(at::kChar));
  } else {
    rows = active_num > 0 ? std::min(active_num, nk) : nk;
    expanded_x = at::empty({rows, h}, x.options().dtype(at::kChar));
  }
  at::Tensor row_idx = at::empty({nk}, expert_idx.options());
  at::Tensor tokens, before, expanded_scale;
  if (drop_pad_mode == 0 && expert_tokens_num_mode > 0) tokens = at::empty({expert_num}, x.options().dtype(at::kInt));
  if (drop_pad_mode == 1 && expert_tokens_before_capacity_flag) {
    before = at::empty({expert_num}, x.options().dtype(at::kInt));
  }
  if (quant_mode == 1) expanded_scale = at::empty({rows}, x.options().dtype(at::kFloat));
  return {expanded_x, row_idx, tokens, before, expanded_scale};
}

}  // namespace

RoutingQuantOutputs npu_moe_init_routing_quant(const at::Tensor& x, const at::Tensor& expert_idx,
                                               const std::optional<at::Tensor>& scale,
                                               const std::optional<at::Tensor>& offset, int64_t active_num,
                                               int64_t expert_capacity, int64_t expert_num, int64_t drop_pad_mode,
                                               int64_t expert_tokens_num_mode,
                                               bool expert_tokens_before_capacity_flag, int64_t quant_mode) {
  RoutingQuantOutputs outs =
      routingQuantOutputs(x, expert_idx, scale, offset, active_num, expert_capacity, expert_num, drop_pad_mode,
                          expert_tokens_num_mode, expert_tokens_before_capacity_flag, quant_mode);
  auto& [expanded_x, row_idx, tokens, before, expanded_scale] = outs;
  EXEC_NPU_CMD(aclnnMoeInitRoutingQuantV2, x, expert_idx, scale, offset, active_num, expert_capacity, expert_num,
               drop_pad_mode, expert_tokens_num_mode, expert_tokens_before_capacity_flag, quant_mode, expanded_x,
               row_idx, tokens, before, expanded_scale);
  return outs;
}

RoutingQuantOutputs npu_moe_init_routing_quant_meta(const at::Tensor& x, const at::Tensor& expert_idx,
                                                    const std::optional<at::Tensor>& scale,
                                                    const std::optional<at::Tensor>& offset, int64_t active_num,
                                                    int64_t expert_capacity, int64_t expert_num,
                                                    int64_t drop_pad_mode, int64_t expert_tokens_num_mode,
                                                    bool expert_tokens_before_capacity_flag, int64_t quant_mode) {
  return routingQuantOutputs(x, expert_idx, scale, offset, active_num, expert_capacity, expert_num, drop_pad_mode,
                             expert_tokens_num_mode, expert_tokens_before_capacity_flag, quant_mode);
}

}  // namespace at_npu::native
