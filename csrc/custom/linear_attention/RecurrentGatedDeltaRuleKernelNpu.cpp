// RecurrentGatedDeltaRuleKernelNpu.cpp - npu_recurrent_gated_delta_rule (state updated in place) and its functional
// form (new state returned): the recurrent gated delta rule of Qwen3-Next style linear attention over short packed
// sequences (decode / MTP), on the aclnnRecurrentGatedDeltaRule device op. Inference only (no backward upstream).
#include <ATen/ops/empty.h>

#include <cmath>
#include <tuple>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool isDeltaFloat(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat; }

void checkIndexVector(const char* op, const char* what, const std::optional<at::Tensor>& t, int64_t length) {
  if (!t.has_value() || !t->defined()) return;
  TORCH_CHECK_TYPE(t->scalar_type() == at::kInt || t->scalar_type() == at::kLong, op, ": ", what,
                   " must be int32 (or int64), got ", t->scalar_type());
  TORCH_CHECK_VALUE(t->dim() == 1 && (length < 0 || t->size(0) == length), op, ": ", what, " must be 1-D",
                    length < 0 ? "" : " with one entry per token", ", got ", t->sizes());
}

void checkOptionalFactor(const char* op, const char* what, const std::optional<at::Tensor>& t,
                         at::IntArrayRef shape) {
  if (!t.has_value() || !t->defined()) return;
  TORCH_CHECK_TYPE(isDeltaFloat(t->scalar_type()), op, ": ", what, " must be a float tensor, got ", t->scalar_type());
  TORCH_CHECK_VALUE(t->sizes() == shape, op, ": ", what, " must have shape ", shape, ", got ", t->sizes());
}

// Validates the arguments; returns the query scale (1 / sqrt(Dk) when none is given).
double checkGatedDeltaRule(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                           const at::Tensor& state, const std::optional<at::Tensor>& beta, std::optional<double> scale,
                           const std::optional<at::Tensor>& actual_seq_lengths,
                           const std::optional<at::Tensor>& ssm_state_indices,
                           const std::optional<at::Tensor>& num_accepted_tokens, const std::optional<at::Tensor>& g,
                           const std::optional<at::Tensor>& gk) {
  const char* op = "npu_recurrent_gated_delta_rule";
  TORCH_CHECK_VALUE(query.dim() == 3 && key.sizes() == query.sizes(), op, ": query and key must be (T, Nk, Dk) of "
                    "one shape, got ", query.sizes(), " and ", key.sizes());
  TORCH_CHECK_VALUE(value.dim() == 3 && value.size(0) == query.size(0), op, ": value must be (T, Nv, Dv) with "
                    "query's T = ", query.size(0), ", got ", value.sizes());
  const int64_t tokens = value.size(0), nv = value.size(1), dv = value.size(2), nk = query.size(1);
  const int64_t dk = query.size(2);
  TORCH_CHECK_VALUE(nk > 0 && nv % nk == 0, op, ": the value heads (", nv, ") must be a multiple of the key heads (",
                    nk, ")");
  TORCH_CHECK_VALUE(state.dim() == 4 && state.size(1) == nv && state.size(2) == dv && state.size(3) == dk, op,
                    ": state must be (BlockNum, Nv, Dv, Dk) = (*, ", nv, ", ", dv, ", ", dk, "), got ", state.sizes());
  TORCH_CHECK_TYPE(isDeltaFloat(query.scalar_type()) && key.scalar_type() == query.scalar_type() &&
                       value.scalar_type() == query.scalar_type() && isDeltaFloat(state.scalar_type()),
                   op, ": query, key and value must share one dtype of bfloat16, float16 or float32 and state must be "
                   "a float tensor, got ", query.scalar_type(), ", ", key.scalar_type(), ", ", value.scalar_type(),
                   " and ", state.scalar_type());
  checkOptionalFactor(op, "beta", beta, {tokens, nv});
  checkOptionalFactor(op, "g", g, {tokens, nv});
  checkOptionalFactor(op, "gk", gk, {tokens, nv, dk});
  checkIndexVector(op, "actual_seq_lengths", actual_seq_lengths, -1);
  checkIndexVector(op, "ssm_state_indices", ssm_state_indices, tokens);
  const int64_t batch = actual_seq_lengths.has_value() && actual_seq_lengths->defined() ? actual_seq_lengths->size(0)
                                                                                       : tokens;
  checkIndexVector(op, "num_accepted_tokens", num_accepted_tokens, -1);
  TORCH_CHECK_VALUE(!(num_accepted_tokens.has_value() && num_accepted_tokens->defined()) ||
                        num_accepted_tokens->size(0) == batch,
                    op, ": num_accepted_tokens must have one entry per sequence (", batch, ")");
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(dk)));
  TORCH_CHECK_VALUE(std::isfinite(s), op, ": scale must be finite, got ", s);
  return s;
}

at::Tensor deltaRuleOutput(const at::Tensor& value) { return at::empty(value.sizes(), value.options()); }

}  // namespace

at::Tensor npu_recurrent_gated_delta_rule(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                          at::Tensor& state, const std::optional<at::Tensor>& beta,
                                          std::optional<double> scale,
                                          const std::optional<at::Tensor>& actual_seq_lengths,
                                          const std::optional<at::Tensor>& ssm_state_indices,
                                          const std::optional<at::Tensor>& num_accepted_tokens,
                                          const std::optional<at::Tensor>& g, const std::optional<at::Tensor>& gk) {
  const float s = static_cast<float>(checkGatedDeltaRule(query, key, value, state, beta, scale, actual_seq_lengths,
                                                         ssm_state_indices, num_accepted_tokens, g, gk));
  at::Tensor out = deltaRuleOutput(value);
  EXEC_NPU_CMD(aclnnRecurrentGatedDeltaRule, query, key, value, beta, state, actual_seq_lengths, ssm_state_indices, g,
               gk, num_accepted_tokens, s, out);
  return out;
}

at::Tensor npu_recurrent_gated_delta_rule_meta(const at::Tensor& query, const at::Tensor& key,
                                               const at::Tensor& value, at::Tensor& state,
                                               const std::optional<at::Tensor>& beta, std::optional<double> scale,
                                               const std::optional<at::Tensor>& actual_seq_lengths,
                                               const std::optional<at::Tensor>& ssm_state_indices,
                                               const std::optional<at::Tensor>& num_accepted_tokens,
                                               const std::optional<at::Tensor>& g,
                                               const std::optional<at::Tensor>& gk) {
  checkGatedDeltaRule(query, key, value, state, beta, scale, actual_seq_lengths, ssm_state_indices,
                      num_accepted_tokens, g, gk);
  return deltaRuleOutput(value);
}

std::tuple<at::Tensor, at::Tensor> npu_recurrent_gated_delta_rule_functional(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& state,
    const std::optional<at::Tensor>& beta, std::optional<double> scale,
    const std::optional<at::Tensor>& actual_seq_lengths, const std::optional<at::Tensor>& ssm_state_indices,
    const std::optional<at::Tensor>& num_accepted_tokens, const std::optional<at::Tensor>& g,
    const std::optional<at::Tensor>& gk) {
  const float s = static_cast<float>(checkGatedDeltaRule(query, key, value, state, beta, scale, actual_seq_lengths,
                                                         ssm_state_indices, num_accepted_tokens, g, gk));
  at::Tensor out = deltaRuleOutput(value);
  at::Tensor new_state = state.clone(at::MemoryFormat::Contiguous);
  EXEC_NPU_CMD(aclnnRecurrentGatedDeltaRule, query, key, value, beta, new_state, actual_seq_lengths,
               ssm_state_indices, g, gk, num_accepted_tokens, s, out);
  return {out, new_state};
}

std::tuple<at::Tensor, at::Tensor> npu_recurrent_gated_delta_rule_functional_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& state,
    const std::optional<at::Tensor>& beta, std::optional<double> scale,
    const std::optional<at::Tensor>& actual_seq_lengths, const std::optional<at::Tensor>& ssm_state_indices,
    const std::optional<at::Tensor>& num_accepted_tokens, const std::optional<at::Tensor>& g,
    const std::optional<at::Tensor>& gk) {
  checkGatedDeltaRule(query, key, value, state, beta, scale, actual_seq_lengths, ssm_state_indices,
                      num_accepted_tokens, g, gk);
  return {deltaRuleOutput(value), at::empty(state.sizes(), state.options())};
}

}  // namespace at_npu::native
