// MoeInitRoutingKernelNpu.cpp - MoE token expansion by expert: npu_moe_init_routing (on aclnnMoeInitRouting) and
// npu_moe_init_routing_v2 (drop / pad, active expert ranges, expert-token statistics, int8 static / dynamic
// quantization, on aclnnMoeInitRoutingV3). Inference ops: upstream defines no gradient.
#include <ATen/ops/empty.h>

#include <algorithm>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

bool isRoutedFloat(at::ScalarType type) { return type == at::kFloat || type == at::kHalf || type == at::kBFloat16; }

void checkInitRouting(const at::Tensor& x, const at::Tensor& row_idx, const at::Tensor& expert_idx,
                      int64_t active_num) {
  const char* op = "npu_moe_init_routing";
  TORCH_CHECK_VALUE(x.dim() == 2, op, ": x must be 2-D [tokens, H], got ", x.sizes());
  TORCH_CHECK_TYPE(isRoutedFloat(x.scalar_type()), op, ": x must be float16, bfloat16 or float32, got ",
                   x.scalar_type());
  TORCH_CHECK_VALUE(expert_idx.dim() == 2 && expert_idx.size(0) == x.size(0), op, ": expert_idx must be 2-D [tokens = ",
                    x.size(0), ", k], got ", expert_idx.sizes());
  TORCH_CHECK_VALUE(row_idx.sizes().equals(expert_idx.sizes()), op, ": row_idx must have expert_idx's shape ",
                    expert_idx.sizes(), ", got ", row_idx.sizes());
  TORCH_CHECK_TYPE(row_idx.scalar_type() == at::kInt && expert_idx.scalar_type() == at::kInt, op,
                   ": row_idx and expert_idx must be int32, got ", row_idx.scalar_type(), " and ",
                   expert_idx.scalar_type());
  TORCH_CHECK_VALUE(active_num >= 0, op, ": active_num must be >= 0, got ", active_num);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> initRoutingOutputs(const at::Tensor& x, const at::Tensor& row_idx,
                                                                  const at::Tensor& expert_idx, int64_t active_num) {
  const int64_t tokens = x.size(0), k = expert_idx.size(1);
  return {at::empty({std::min(active_num, tokens) * k, x.size(1)}, x.options()),
          at::empty({tokens * k}, row_idx.options()), at::empty({tokens * k}, expert_idx.options())};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_init_routing(const at::Tensor& x, const at::Tensor& row_idx,
                                                                    const at::Tensor& expert_idx, int64_t active_num) {
  checkInitRouting(x, row_idx, expert_idx, active_num);
  auto [expanded_x, expanded_row_idx, expanded_expert_idx] = initRoutingOutputs(x, row_idx, expert_idx, active_num);
  if (expanded_row_idx.numel() == 0) return {expanded_x, expanded_row_idx, expanded_expert_idx};
  EXEC_NPU_CMD(aclnnMoeInitRouting, x, row_idx, expert_idx, active_num, expanded_x, expanded_row_idx,
               expanded_expert_idx);
  return {expanded_x, expanded_row_idx, expanded_expert_idx};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_init_routing_meta(const at::Tensor& x,
                                                                         const at::Tensor& row_idx,
                                                                         const at::Tensor& expert_idx,
                                                                         int64_t active_num) {
  checkInitRouting(x, row_idx, expert_idx, active_num);
  return initRoutingOutputs(x, row_idx, expert_idx, active_num);
}

namespace {

// The quantization modes that produce chip number formats (float8, hifloat8, mxfp4, int4 carriers).
bool isChipQuantMode(int64_t quant_mode) { return quant_mode >= 2 && quant_mode <= 17 && quant_mode != 10; }

struct RoutingV2Plan {
  std::vector<int64_t> expanded_x, expert_tokens;
  int64_t rows = 0;  // expanded rows (and expanded_scale values)
  int64_t start = 0, end = 0;
  at::ScalarType x_type = at::kFloat;
};

// Checks the arguments that decide the outputs' shapes and returns those shapes; upstream's documented modes.
RoutingV2Plan planInitRoutingV2(const at::Tensor& x, const at::Tensor& expert_idx, int64_t active_num,
                                int64_t expert_capacity, int64_t expert_num, int64_t drop_pad_mode,
                                int64_t expert_tokens_num_type, int64_t quant_mode, at::IntArrayRef active_expert_range,
                                int64_t row_idx_type, std::optional<int64_t> x_dtype) {
  const char* op = "npu_moe_init_routing_v2";
  TORCH_CHECK_VALUE(x.dim() == 2, op, ": x must be 2-D [tokens, H], got ", x.sizes());
  TORCH_CHECK_VALUE(expert_idx.dim() == 2 && expert_idx.size(0) == x.size(0), op, ": expert_idx must be 2-D [tokens = ",
                    x.size(0), ", k], got ", expert_idx.sizes());
  TORCH_CHECK_TYPE(expert_idx.scalar_type() == at::kInt, op, ": expert_idx must be int32, got ",
                   expert_idx.scalar_type());
  TORCH_CHECK_TYPE(isRoutedFloat(x.scalar_type()) || x.scalar_type() == at::kChar, op,
                   ": x must be float16, bfloat16, float32 or int8 (float8 / float4 inputs are chip number formats ",
                   "the software NPU does not have), got ", x.scalar_type());
  TORCH_CHECK_VALUE(!x_dtype.has_value(), op, ": x_dtype reinterprets x as a chip number format (hifloat8 / float4 / ",
                    "int4), which the software NPU does not have; leave it None");
  TORCH_CHECK_VALUE(!isChipQuantMode(quant_mode), op, ": quant_mode ", quant_mode, " produces a chip number format ",
                    "(float8 / hifloat8 / mxfp4 / int4), which the software NPU does not have; use -1 (none), ",
                    "0 (static int8) or 1 (dynamic int8)");
  TORCH_CHECK_VALUE(quant_mode >= -1 && quant_mode <= 1, op, ": quant_mode must be -1 (none), 0 (static int8) or 1 ",
                    "(dynamic int8), got ", quant_mode);
  TORCH_CHECK_VALUE(drop_pad_mode == 0 || drop_pad_mode == 1, op, ": drop_pad_mode must be 0 (dropless) or 1 ",
                    "(drop / pad), got ", drop_pad_mode);
  TORCH_CHECK_VALUE(expert_tokens_num_type >= 0 && expert_tokens_num_type <= 2, op, ": expert_tokens_num_type must ",
                    "be 0 (cumsum), 1 (count) or 2 (key_value), got ", expert_tokens_num_type);
  TORCH_CHECK_VALUE(row_idx_type == 0 || row_idx_type == 1, op, ": row_idx_type must be 0 (gather indices) or 1 ",
                    "(scatter indices), got ", row_idx_type);
  TORCH_CHECK_VALUE(expert_num >= 1, op, ": expert_num must be the number of experts (>= 1), got ", expert_num);
  TORCH_CHECK_VALUE(active_num >= -1, op, ": active_num must be >= -1 (-1 and 0: all routed rows), got ", active_num);
  RoutingV2Plan plan;
  plan.end = expert_num;
  if (!active_expert_range.empty()) {
    TORCH_CHECK_VALUE(active_expert_range.size() == 2 && active_expert_range[0] >= 0 &&
                          active_expert_range[0] < active_expert_range[1] && active_expert_range[1] <= expert_num,
                      op, ": active_expert_range must be [start, end] with 0 <= start < end <= expert_num (",
                      expert_num, "), got ", active_expert_range);
    plan.start = active_expert_range[0];
    plan.end = active_expert_range[1];
  }
  const int64_t h = x.size(1), nk = expert_idx.numel();
  if (drop_pad_mode == 1) {
    TORCH_CHECK_VALUE(expert_capacity >= 1, op, ": drop / pad needs expert_capacity >= 1 (tokens per expert), got ",
                      expert_capacity);
    TORCH_CHECK_VALUE(row_idx_type == 0, op, ": drop / pad returns gather indices (row_idx_type=0) only");
    plan.expanded_x = {expert_num, expert_capacity, h};
    plan.rows = expert_num * expert_capacity;
  } else {
    plan.rows = active_num <= 0 ? nk : std::min(active_num, nk);
    plan.expanded_x = {plan.rows, h};
  }
  plan.expert_tokens = expert_tokens_num_type == 2 ? std::vector<int64_t>{expert_num, 2}
                                                   : std::vector<int64_t>{plan.end - plan.start};
  plan.x_type = quant_mode == -1 ? x.scalar_type() : at::kChar;
  return plan;
}

// scale / offset by mode: none: scale [tokens] (carried along); static: scale and offset [1];
// dynamic: scale [1 or expert range, H] (smoothing), no offset.
void checkRoutingV2Scales(const at::Tensor& x, const std::optional<at::Tensor>& scale,
                          const std::optional<at::Tensor>& offset, int64_t quant_mode, const RoutingV2Plan& plan) {
  const char* op = "npu_moe_init_routing_v2";
  if (present(scale)) {
    TORCH_CHECK_TYPE(scale->scalar_type() == at::kFloat, op, ": scale must be float32, got ", scale->scalar_type());
  }
  if (present(offset)) {
    TORCH_CHECK_TYPE(offset->scalar_type() == at::kFloat, op, ": offset must be float32, got ", offset->scalar_type());
  }
  if (quant_mode == -1) {
    TORCH_CHECK_VALUE(!present(scale) || (scale->dim() == 1 && scale->size(0) == x.size(0)), op,
                      ": without quantization scale must be 1-D [tokens = ", x.size(0), "], got ", scale->sizes());
    TORCH_CHECK_VALUE(!present(offset), op, ": offset is for static quantization (quant_mode=0) only");
  } else if (quant_mode == 0) {
    TORCH_CHECK_VALUE(present(scale) && scale->dim() == 1 && scale->size(0) == 1, op,
                      ": static quantization needs scale of shape [1]");
    TORCH_CHECK_VALUE(!present(offset) || (offset->dim() == 1 && offset->size(0) == 1), op,
                      ": static quantization's offset must have shape [1], got ", offset->sizes());
  } else {
    const int64_t range = plan.end - plan.start;
    TORCH_CHECK_VALUE(!present(scale) || (scale->dim() == 2 && scale->size(1) == x.size(1) &&
                                          (scale->size(0) == 1 || scale->size(0) == range)),
                      op, ": dynamic quantization's scale must be [1, H] or [expert range = ", range, ", H = ",
                      x.size(1), "], got ", scale->sizes());
    TORCH_CHECK_VALUE(!present(offset), op, ": dynamic quantization takes no offset");
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_moe_init_routing_v2(
    const at::Tensor& x, const at::Tensor& expert_idx, const std::optional<at::Tensor>& scale,
    const std::optional<at::Tensor>& offset, int64_t active_num, int64_t expert_capacity, int64_t expert_num,
    int64_t drop_pad_mode, int64_t expert_tokens_num_type, bool expert_tokens_num_flag, int64_t quant_mode,
    at::IntArrayRef active_expert_range, int64_t row_idx_type, std::optional<int64_t> x_dtype) {
  const RoutingV2Plan plan = planInitRoutingV2(x, expert_idx, active_num, expert_capacity, expert_num, drop_pad_mode,
                                               expert_tokens_num_type, quant_mode, active_expert_range, row_idx_type,
                                               x_dtype);
  at::Tensor expanded_x = at::empty(plan.expanded_x, x.options().dtype(plan.x_type));
  at::Tensor expanded_row_idx = at::empty({expert_idx.numel()}, expert_idx.options());
  at::Tensor expert_tokens = at::empty(plan.expert_tokens, x.options().dtype(at::kLong));
  at::Tensor expanded_scale = at::empty({plan.rows}, x.options().dtype(at::kFloat));
  if (x.size(0) == 0) {  // no tokens: nothing routed (scales are not checked, as upstream)
    expanded_x.zero_();
    expert_tokens.zero_();
    expanded_scale.zero_();
    return {expanded_x, expanded_row_idx, expert_tokens, expanded_scale};
  }
  checkRoutingV2Scales(x, scale, offset, quant_mode, plan);
  const std::vector<int64_t> range{plan.start, plan.end};
  EXEC_NPU_CMD(aclnnMoeInitRoutingV3, x, expert_idx, scale, offset, active_num, expert_capacity, expert_num,
               drop_pad_mode, expert_tokens_num_type, expert_tokens_num_flag, quant_mode, at::IntArrayRef(range),
               row_idx_type, expanded_x, expanded_row_idx, expert_tokens, expanded_scale);
  return {expanded_x, expanded_row_idx, expert_tokens, expanded_scale};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_moe_init_routing_v2_meta(
    const at::Tensor& x, const at::Tensor& expert_idx, const std::optional<at::Tensor>& scale,
    const std::optional<at::Tensor>& offset, int64_t active_num, int64_t expert_capacity, int64_t expert_num,
    int64_t drop_pad_mode, int64_t expert_tokens_num_type, bool expert_tokens_num_flag, int64_t quant_mode,
    at::IntArrayRef active_expert_range, int64_t row_idx_type, std::optional<int64_t> x_dtype) {
  const RoutingV2Plan plan = planInitRoutingV2(x, expert_idx, active_num, expert_capacity, expert_num, drop_pad_mode,
                                               expert_tokens_num_type, quant_mode, active_expert_range, row_idx_type,
                                               x_dtype);
  if (x.size(0) != 0) checkRoutingV2Scales(x, scale, offset, quant_mode, plan);
  return {at::empty(plan.expanded_x, x.options().dtype(plan.x_type)),
          at::empty({expert_idx.numel()}, expert_idx.options()),
          at::empty(plan.expert_tokens, x.options().dtype(at::kLong)),
          at::empty({plan.rows}, x.options().dtype(at::kFloat))};
}

}  // namespace at_npu::native
