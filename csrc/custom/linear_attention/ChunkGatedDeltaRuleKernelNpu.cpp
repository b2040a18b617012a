// ChunkGatedDeltaRuleKernelNpu.cpp - npu_chunk_gated_delta_rule (prefill gated delta rule over packed sequences,
// returning the outputs and the final states) with its Meta kernel, on aclnnChunkGatedDeltaRule.
#include <ATen/ops/empty.h>

#include <tuple>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

namespace {

constexpr const char* kChunkGdrOp = "npu_chunk_gated_delta_rule";

// out is (T, Nv, Dv) in query's dtype (bfloat16 on the chip, the only documented input type); final_state is shaped
// and typed like initial_state.
std::tuple<at::Tensor, at::Tensor> chunkGdrOutputs(const at::Tensor& query, const at::Tensor& key,
                                                   const at::Tensor& value, const std::optional<at::Tensor>& beta,
                                                   const std::optional<at::Tensor>& initial_state,
                                                   const std::optional<at::Tensor>& actual_seq_lengths,
                                                   const std::optional<at::Tensor>& g) {
  const char* op = kChunkGdrOp;
  TORCH_CHECK_VALUE(beta.has_value() && beta->defined(), op, ": beta (T, Nv) is required");
  TORCH_CHECK_VALUE(initial_state.has_value() && initial_state->defined(), op,
                    ": initial_state (B, Nv, Dv, Dk) is required");
  TORCH_CHECK_VALUE(actual_seq_lengths.has_value() && actual_seq_lengths->defined(), op,
                    ": actual_seq_lengths (B,) int32 is required");
  TORCH_CHECK_VALUE(query.dim() == 3 && key.sizes() == query.sizes(), op,
                    ": query and key must both be (T, Nk, Dk), got ", query.sizes(), " and ", key.sizes());
  TORCH_CHECK_VALUE(value.dim() == 3 && value.size(0) == query.size(0) && value.numel() > 0, op,
                    ": value must be a non-empty (T, Nv, Dv) with query's T, got ", value.sizes());
  const at::ScalarType type = query.scalar_type();
  TORCH_CHECK_TYPE(type == at::kBFloat16 || type == at::kHalf || type == at::kFloat, op,
                   ": query must be bfloat16 (float16/float32 also run here), got ", type);
  TORCH_CHECK_TYPE(key.scalar_type() == type && value.scalar_type() == type, op,
                   ": key and value must have query's dtype ", type);
  const int64_t tokens = query.size(0), nk = query.size(1), dk = query.size(2), nv = value.size(1), dv = value.size(2);
  TORCH_CHECK_VALUE(nk > 0 && nv % nk == 0, op, ": Nv (", nv, ") must be a multiple of Nk (", nk, ")");
  TORCH_CHECK_VALUE(beta->sizes() == at::IntArrayRef({tokens, nv}), op, ": beta must be (T, Nv) = (", tokens, ", ",
                    nv, "), got ", beta->sizes());
  TORCH_CHECK_TYPE(beta->scalar_type() == type || beta->scalar_type() == at::kFloat, op,
                   ": beta must have query's dtype (or float32)");
  const bool has_g = g.has_value() && g->defined();
  TORCH_CHECK_VALUE(!has_g || g->sizes() == at::IntArrayRef({tokens, nv}), op, ": g must be (T, Nv), got ",
                    has_g ? g->sizes() : at::IntArrayRef{});
  TORCH_CHECK_TYPE(!has_g || g->scalar_type() == at::kFloat, op, ": g must be float32");
  const at::Tensor& state = *initial_state;
  TORCH_CHECK_VALUE(state.dim() == 4 && state.size(1) == nv && state.size(2) == dv && state.size(3) == dk, op,
                    ": initial_state must be (B, Nv=", nv, ", Dv=", dv, ", Dk=", dk, "), got ", state.sizes());
  TORCH_CHECK_TYPE(state.scalar_type() == at::kBFloat16 || state.scalar_type() == at::kFloat ||
                       state.scalar_type() == at::kHalf,
                   op, ": initial_state must be bfloat16 or float32, got ", state.scalar_type());
  TORCH_CHECK_TYPE(actual_seq_lengths->scalar_type() == at::kInt, op, ": actual_seq_lengths must be int32, got ",
                   actual_seq_lengths->scalar_type());
  TORCH_CHECK_VALUE(actual_seq_lengths->dim() == 1 && actual_seq_lengths->size(0) == state.size(0), op,
                    ": actual_seq_lengths must be (B,) with B = initial_state.size(0) = ", state.size(0));
  return std::make_tuple(at::empty(value.sizes(), value.options().dtype(type)),
                         at::empty(state.sizes(), state.options()));
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_chunk_gated_delta_rule(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& beta,
    const std::optional<at::Tensor>& initial_state, const std::optional<at::Tensor>& actual_seq_lengths,
    std::optional<double> scale, const std::optional<at::Tensor>& g) {
  auto [out, final_state] = chunkGdrOutputs(query, key, value, beta, initial_state, actual_seq_lengths, g);
  const float scale_value = static_cast<float>(scale.value_or(1.0));  // None means 1.0 (documented default)
  EXEC_NPU_CMD(aclnnChunkGatedDeltaRule, query, key, value, beta, initial_state, actual_seq_lengths, scale_value, g,
               out, final_state);
  return std::make_tuple(out, final_state);
}

std::tuple<at::Tensor, at::Tensor> npu_chunk_gated_delta_rule_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& beta,
    const std::optional<at::Tensor>& initial_state, const std::optional<at::Tensor>& actual_seq_lengths,
    std::optional<double> scale, const std::optional<at::Tensor>& g) {
  return chunkGdrOutputs(query, key, value, beta, initial_state, actual_seq_lengths, g);
}

}  // namespace at_npu::native
