// FusedCausalConv1dKernelNpu.cpp - npu_fused_causal_conv1d: the depthwise causal conv1d (K = 3 taps in torch_npu) of
// Qwen3-Next ("default") and Pangu V2 ("pangu") linear-attention layers over packed sequences, with a per-sequence
// conv-state cache updated in place (prefix caching / APC and speculative decoding included) and an optional
// residual; on the aclnnFusedCausalConv1d device op. Inference only.
#include <ATen/ops/empty.h>

#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

void checkIndexInput(const char* op, const char* what, const std::optional<at::Tensor>& t) {
  if (!present(t)) return;
  TORCH_CHECK_TYPE(t->scalar_type() == at::kInt || t->scalar_type() == at::kLong, op, ": ", what,
                   " must be int32 (or int64), got ", t->scalar_type());
}

// activation is documented as having no effect (torch_npu passes it through as 0 none / 1 silu / 2 swish).
int64_t activationCode(const std::optional<c10::string_view>& activation) {
  const std::string name = activation.has_value() ? std::string(*activation) : "None";
  TORCH_CHECK_VALUE(name == "None" || name == "none" || name == "silu" || name == "swish", "npu_fused_causal_conv1d: "
                    "activation must be 'None', 'silu' or 'swish', got '", name, "'");
  return name == "silu" ? 1 : name == "swish" ? 2 : 0;
}

int64_t convModeCode(const std::optional<c10::string_view>& conv_mode) {
  const std::string name = conv_mode.has_value() ? std::string(*conv_mode) : "default";
  TORCH_CHECK_VALUE(name == "default" || name == "pangu", "npu_fused_causal_conv1d: conv_mode must be 'default' "
                    "(Qwen3-Next) or 'pangu' (Pangu V2), got '", name, "'");
  return name == "pangu" ? 1 : 0;
}

void checkFusedCausalConv1d(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& conv_states,
                            const std::optional<at::Tensor>& query_start_loc,
                            const std::optional<at::Tensor>& cache_indices,
                            const std::optional<at::Tensor>& num_accepted_tokens,
                            const std::optional<at::Tensor>& num_computed_tokens,
                            const std::optional<at::Tensor>& block_idx_first_scheduled_token,
                            const std::optional<at::Tensor>& block_idx_last_scheduled_token,
                            const std::optional<at::Tensor>& initial_state_idx, int64_t block_size,
                            int64_t conv_mode) {
  const char* op = "npu_fused_causal_conv1d";
  TORCH_CHECK_VALUE(x.dim() == 2 || x.dim() == 3, op, ": x must be (cu_seq_len, dim) or (batch, seq_len, dim), got ",
                    x.sizes());
  TORCH_CHECK_VALUE(x.dim() == 3 || present(query_start_loc), op, ": a 2-D x needs query_start_loc (batch + 1 "
                    "cumulative sequence starts)");
  const at::ScalarType dtype = x.scalar_type();
  TORCH_CHECK_TYPE((dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kFloat) &&
                       weight.scalar_type() == dtype && conv_states.scalar_type() == dtype,
                   op, ": x, weight and conv_states must share one dtype of float16, bfloat16 or float32, got ",
                   x.scalar_type(), ", ", weight.scalar_type(), " and ", conv_states.scalar_type());
  const int64_t dim = x.size(-1);
  TORCH_CHECK_VALUE(weight.dim() == 2 && weight.size(1) == dim && weight.size(0) >= 1, op,
                    ": weight must be (K, dim) with dim = ", dim, ", got ", weight.sizes());
  TORCH_CHECK_VALUE(conv_states.dim() == 3 && conv_states.size(2) == dim && conv_states.size(1) >= weight.size(0) - 1,
                    op, ": conv_states must be (slots, state_len >= K - 1, dim), got ", conv_states.sizes());
  checkIndexInput(op, "query_start_loc", query_start_loc);
  checkIndexInput(op, "cache_indices", cache_indices);
  checkIndexInput(op, "num_accepted_tokens", num_accepted_tokens);
  checkIndexInput(op, "num_computed_tokens", num_computed_tokens);
  checkIndexInput(op, "block_idx_first_scheduled_token", block_idx_first_scheduled_token);
  checkIndexInput(op, "block_idx_last_scheduled_token", block_idx_last_scheduled_token);
  checkIndexInput(op, "initial_state_idx", initial_state_idx);
  const int64_t batch = present(query_start_loc) ? query_start_loc->numel() - 1 : x.size(0);
  TORCH_CHECK_VALUE(batch >= 1, op, ": query_start_loc must hold batch + 1 >= 2 offsets");
  const bool apc = present(block_idx_last_scheduled_token);
  if (apc) {
    TORCH_CHECK_VALUE(present(cache_indices) && cache_indices->dim() == 2 && cache_indices->size(0) == batch &&
                          present(block_idx_first_scheduled_token) && present(initial_state_idx) &&
                          present(num_computed_tokens),
                      op, ": prefix caching (block_idx_last_scheduled_token) needs cache_indices [batch, max_blocks], "
                      "block_idx_first_scheduled_token, initial_state_idx and num_computed_tokens");
    TORCH_CHECK_VALUE(block_size >= 2, op, ": block_size must be at least 2, got ", block_size);
  } else if (present(cache_indices)) {
    TORCH_CHECK_VALUE(cache_indices->dim() == 1 && cache_indices->size(0) == batch, op,
                      ": without prefix caching cache_indices must be [batch] (", batch, "), got ",
                      cache_indices->sizes());
  }
  TORCH_CHECK_VALUE(conv_mode == 0 || present(num_computed_tokens), op,
                    ": conv_mode 'pangu' needs num_computed_tokens");
  for (const std::optional<at::Tensor>* t : {&num_accepted_tokens, &num_computed_tokens}) {
    TORCH_CHECK_VALUE(!present(*t) || ((*t)->dim() == 1 && (*t)->size(0) == batch), op,
                      ": num_accepted_tokens / num_computed_tokens must be [batch] (", batch, ")");
  }
}

}  // namespace

at::Tensor npu_fused_causal_conv1d(
    const at::Tensor& x, const at::Tensor& weight, at::Tensor& conv_states,
    const std::optional<at::Tensor>& query_start_loc, const std::optional<at::Tensor>& cache_indices,
    const std::optional<at::Tensor>& initial_state_mode, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& num_accepted_tokens, std::optional<c10::string_view> activation,
    std::optional<int64_t> pad_slot_id, std::optional<int64_t> run_mode, std::optional<int64_t> residual_connection,
    std::optional<int64_t> max_query_len, const std::optional<at::Tensor>& num_computed_tokens,
    const std::optional<at::Tensor>& block_idx_first_scheduled_token,
    const std::optional<at::Tensor>& block_idx_last_scheduled_token,
    const std::optional<at::Tensor>& initial_state_idx, std::optional<int64_t> block_size,
    std::optional<c10::string_view> conv_mode) {
  const int64_t mode = convModeCode(conv_mode), act = activationCode(activation);
  const int64_t block = block_size.value_or(128);
  checkFusedCausalConv1d(x, weight, conv_states, query_start_loc, cache_indices, num_accepted_tokens,
                         num_computed_tokens, block_idx_first_scheduled_token, block_idx_last_scheduled_token,
                         initial_state_idx, block, mode);
  at::Tensor y = at::empty(x.sizes(), x.options());
  EXEC_NPU_CMD(aclnnFusedCausalConv1d, x, weight, conv_states, query_start_loc, cache_indices, initial_state_mode,
               bias, num_accepted_tokens, num_computed_tokens, block_idx_first_scheduled_token,
               block_idx_last_scheduled_token, initial_state_idx, act, pad_slot_id.value_or(-1), run_mode.value_or(0),
               max_query_len.value_or(-1), residual_connection.value_or(0), block, mode, y);
  return y;
}

at::Tensor npu_fused_causal_conv1d_meta(
    const at::Tensor& x, const at::Tensor& weight, at::Tensor& conv_states,
    const std::optional<at::Tensor>& query_start_loc, const std::optional<at::Tensor>& cache_indices,
    const std::optional<at::Tensor>& initial_state_mode, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& num_accepted_tokens, std::optional<c10::string_view> activation,
    std::optional<int64_t> pad_slot_id, std::optional<int64_t> run_mode, std::optional<int64_t> residual_connection,
    std::optional<int64_t> max_query_len, const std::optional<at::Tensor>& num_computed_tokens,
    const std::optional<at::Tensor>& block_idx_first_scheduled_token,
    const std::optional<at::Tensor>& block_idx_last_scheduled_token,
    const std::optional<at::Tensor>& initial_state_idx, std::optional<int64_t> block_size,
    std::optional<c10::string_view> conv_mode) {
  const int64_t mode = convModeCode(conv_mode);
  activationCode(activation);
  checkFusedCausalConv1d(x, weight, conv_states, query_start_loc, cache_indices, num_accepted_tokens,
                         num_computed_tokens, block_idx_first_scheduled_token, block_idx_last_scheduled_token,
                         initial_state_idx, block_size.value_or(128), mode);
  return at::empty(x.sizes(), x.options());
}

}  // namespace at_npu::native
