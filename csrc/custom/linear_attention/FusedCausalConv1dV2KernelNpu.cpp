// FusedCausalConv1dV2KernelNpu.cpp - npu_fused_causal_conv1d_v2: the fused depthwise causal conv1d of
// npu_fused_causal_conv1d with its outputs written over x (and the conv-state cache updated in place), on
// aclnnInplaceFusedCausalConv1d. Inference only.
#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_fused_causal_conv1d_v2";

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// torch_npu's codes: activation 0 none / 1 silu / 2 swish (documented as having no effect), conv_mode 0 / 1.
int64_t activationCode(const std::optional<c10::string_view>& activation) {
  const std::string name = activation.has_value() ? std::string(*activation) : "None";
  TORCH_CHECK_VALUE(name == "None" || name == "none" || name == "silu" || name == "swish", kOp,
                    ": activation must be 'None', 'silu' or 'swish', got '", name, "'");
  return name == "silu" ? 1 : name == "swish" ? 2 : 0;
}

int64_t convModeCode(const std::optional<c10::string_view>& conv_mode) {
  const std::string name = conv_mode.has_value() ? std::string(*conv_mode) : "default";
  TORCH_CHECK_VALUE(name == "default" || name == "pangu", kOp, ": conv_mode must be 'default' (Qwen3-Next) or "
                    "'pangu' (Pangu V2), got '", name, "'");
  return name == "pangu" ? 1 : 0;
}

void checkConv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& conv_states,
               const std::optional<at::Tensor>& query_start_loc, const std::optional<at::Tensor>& cache_indices,
               const std::optional<at::Tensor>& num_accepted_tokens, const std::optional<at::Tensor>& num_computed_tokens,
               const std::optional<at::Tensor>& block_first, const std::optional<at::Tensor>& block_last,
               const std::optional<at::Tensor>& initial_state_idx, int64_t block_size, int64_t conv_mode) {
  TORCH_CHECK_VALUE(x.dim() == 2 || x.dim() == 3, kOp, ": x must be (cu_seq_len, dim) or (batch, seq_len, dim), "
                    "got ", x.sizes());
  TORCH_CHECK_VALUE(x.dim() == 3 || present(query_start_loc), kOp, ": a 2-D x needs query_start_loc (batch + 1 "
                    "cumulative sequence starts)");
  const at::ScalarType dtype = x.scalar_type();
  TORCH_CHECK_TYPE((dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat) &&
                       weight.scalar_type() == dtype && conv_states.scalar_type() == dtype,
                   kOp, ": x, weight and conv_states must share one dtype of float16, bfloat16 or float32, got ",
                   x.scalar_type(), ", ", weight.scalar_type(), " and ", conv_states.scalar_type());
  const int64_t dim = x.size(-1);
  TORCH_CHECK_VALUE(weight.dim() == 2 && weight.size(1) == dim && weight.size(0) >= 1, kOp,
                    ": weight must be (K, dim) with dim = ", dim, ", got ", weight.sizes());
  TORCH_CHECK_VALUE(conv_states.dim() == 3 && conv_states.size(2) == dim && conv_states.size(1) >= weight.size(0) - 1,
                    kOp, ": conv_states must be (slots, state_len >= K - 1, dim), got ", conv_states.sizes());
  for (const auto* t : {&query_start_loc, &cache_indices, &num_accepted_tokens, &num_computed_tokens, &block_first,
                        &block_last, &initial_state_idx}) {
    TORCH_CHECK_TYPE(!present(*t) || (*t)->scalar_type() == at::kInt || (*t)->scalar_type() == at::kLong, kOp,
                     ": index inputs (query_start_loc, cache_indices, num_*_tokens, block_idx_*, initial_state_idx) "
                     "must be int32 (or int64)");
  }
  const int64_t batch = present(query_start_loc) ? query_start_loc->numel() - 1 : x.size(0);
  TORCH_CHECK_VALUE(batch >= 1, kOp, ": query_start_loc must hold batch + 1 >= 2 offsets");
  if (present(block_last)) {
    TORCH_CHECK_VALUE(present(cache_indices) && cache_indices->dim() == 2 && cache_indices->size(0) == batch &&
                          present(block_first) && present(initial_state_idx) && present(num_computed_tokens),
                      kOp, ": prefix caching (block_idx_last_scheduled_token) needs cache_indices [batch, max_blocks], "
                      "block_idx_first_scheduled_token, initial_state_idx and num_computed_tokens");
    TORCH_CHECK_VALUE(block_size >= 2, kOp, ": block_size must be at least 2, got ", block_size);
  } else if (present(cache_indices)) {
    TORCH_CHECK_VALUE(cache_indices->dim() == 1 && cache_indices->size(0) == batch, kOp,
                      ": without prefix caching cache_indices must be [batch] (", batch, "), got ",
                      cache_indices->sizes());
  }
  TORCH_CHECK_VALUE(conv_mode == 0 || present(num_computed_tokens), kOp,
                    ": conv_mode 'pangu' needs num_computed_tokens");
  for (const auto* t : {&num_accepted_tokens, &num_computed_tokens}) {
    TORCH_CHECK_VALUE(!present(*t) || ((*t)->dim() == 1 && (*t)->size(0) == batch), kOp,
                      ": num_accepted_tokens / num_computed_tokens must be [batch] (", batch, ")");
  }
}

}  // namespace

void npu_fused_causal_conv1d_v2(
    at::Tensor& x, const at::Tensor& weight, at::Tensor& conv_states, const std::optional<at::Tensor>& query_start_loc,
    const std::optional<at::Tensor>& cache_indices, const std::optional<at::Tensor>& initial_state_mode,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& num_accepted_tokens,
    std::optional<c10::string_view> activation, std::optional<int64_t> pad_slot_id, std::optional<int64_t> run_mode,
    std::optional<int64_t> residual_connection, std::optional<int64_t> max_query_len,
    const std::optional<at::Tensor>& num_computed_tokens,
    const std::optional<at::Tensor>& block_idx_first_scheduled_token,
    const std::optional<at::Tensor>& block_idx_last_scheduled_token,
    const std::optional<at::Tensor>& initial_state_idx, std::optional<int64_t> block_size,
    std::optional<c10::string_view> conv_mode) {
  const int64_t mode = convModeCode(conv_mode), act = activationCode(activation);
  const int64_t block = block_size.value_or(128);
  checkConv(x, weight, conv_states, query_start_loc, cache_indices, num_accepted_tokens, num_computed_tokens,
            block_idx_first_scheduled_token, block_idx_last_scheduled_token, initial_state_idx, block, mode);
  EXEC_NPU_CMD(aclnnInplaceFusedCausalConv1d, x, weight, conv_states, query_start_loc, cache_indices,
               initial_state_mode, bias, num_accepted_tokens, num_computed_tokens, block_idx_first_scheduled_token,
               block_idx_last_scheduled_token, initial_state_idx, act, pad_slot_id.value_or(-1), run_mode.value_or(0),
               max_query_len.value_or(-1), residual_connection.value_or(0), block, mode);
}

void npu_fused_causal_conv1d_v2_meta(
    at::Tensor& x, const at::Tensor& weight, at::Tensor& conv_states, const std::optional<at::Tensor>& query_start_loc,
    const std::optional<at::Tensor>& cache_indices, const std::optional<at::Tensor>& initial_state_mode,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& num_accepted_tokens,
    std::optional<c10::string_view> activation, std::optional<int64_t> pad_slot_id, std::optional<int64_t> run_mode,
    std::optional<int64_t> residual_connection, std::optional<int64_t> max_query_len,
    const std::optional<at::Tensor>& num_computed_tokens,
    const std::optional<at::Tensor>& block_idx_first_scheduled_token,
    const std::optional<at::Tensor>& block_idx_last_scheduled_token,
    const std::optional<at::Tensor>& initial_state_idx, std::optional<int64_t> block_size,
    std::optional<c10::string_view> conv_mode) {
  const int64_t mode = convModeCode(conv_mode);
  activationCode(activation);
  checkConv(x, weight, conv_states, query_start_loc, cache_indices, num_accepted_tokens, num_computed_tokens,
            block_idx_first_scheduled_token, block_idx_last_scheduled_token, initial_state_idx,
            block_size.value_or(128), mode);
}

}  // namespace at_npu::native
