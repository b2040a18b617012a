// MoeTokenPermuteWithRoutingMapKernelNpu.cpp - npu_moe_token_permute_with_routing_map (tokens grouped by expert
// from a [tokens, experts] routing mask, optionally capacity-padded) and its _grad, on
// aclnnMoeTokenPermuteWithRoutingMap / aclnnMoeTokenPermuteWithRoutingMapGrad.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined() && t->numel() > 0; }

// Output rows as torch_npu sizes them: num_out_tokens rounded down to a multiple of the tokens (dropless) or of the
// experts (drop_and_pad: capacity num_out_tokens / experts per expert).
int64_t permutedRows(const at::Tensor& tokens, const at::Tensor& routing_map, std::optional<int64_t> num_out_tokens,
                     bool drop_and_pad) {
  const char* op = "npu_moe_token_permute_with_routing_map";
  TORCH_CHECK_VALUE(tokens.dim() == 2 && routing_map.dim() == 2 && routing_map.size(0) == tokens.size(0), op,
                    ": tokens must be [T, H] and routing_map [T, E], got ", tokens.sizes(), " and ",
                    routing_map.sizes());
  const int64_t want = num_out_tokens.value_or(tokens.size(0));
  const int64_t unit = routing_map.size(drop_and_pad ? 1 : 0);
  TORCH_CHECK_VALUE(want >= 0 && unit > 0, op, ": num_out_tokens must be >= 0 with a non-empty routing_map, got ",
                    want);
  return want / unit * unit;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_token_permute_with_routing_map(
    const at::Tensor& tokens, const at::Tensor& routing_map, const std::optional<at::Tensor>& probs,
    std::optional<int64_t> num_out_tokens, bool drop_and_pad) {
  if (probs.has_value() && probs->defined()) {
    TORCH_CHECK_VALUE(probs->sizes() == routing_map.sizes(), "npu_moe_token_permute_with_routing_map: probs must be ",
                      "[T, E] like routing_map ", routing_map.sizes(), ", got ", probs->sizes());
  }
  const int64_t rows = permutedRows(tokens, routing_map, num_out_tokens, drop_and_pad);
  const int64_t num_out = num_out_tokens.value_or(tokens.size(0));
  at::Tensor permuted = at::empty({rows, tokens.size(1)}, tokens.options());
  // Without probs there are no permuted probs: an empty tensor stands in for torch_npu's None.
  at::Tensor permuted_probs = probs.has_value() && probs->defined() ? at::empty({rows}, probs->options())
                                                                     : at::empty({0}, tokens.options());
  at::Tensor sorted_indices = at::empty({rows}, tokens.options().dtype(at::kInt));
  EXEC_NPU_CMD(aclnnMoeTokenPermuteWithRoutingMap, tokens, routing_map, probs, num_out, drop_and_pad, permuted,
               permuted_probs, sorted_indices);
  return {permuted, permuted_probs, sorted_indices};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_moe_token_permute_with_routing_map_meta(
    const at::Tensor& tokens, const at::Tensor& routing_map, const std::optional<at::Tensor>& probs,
    std::optional<int64_t> num_out_tokens, bool drop_and_pad) {
  const int64_t rows = permutedRows(tokens, routing_map, num_out_tokens, drop_and_pad);
  return {at::empty({rows, tokens.size(1)}, tokens.options()),
          probs.has_value() && probs->defined() ? at::empty({rows}, probs->options())
                                                : at::empty({0}, tokens.options()),
          at::empty({rows}, tokens.options().dtype(at::kInt))};
}

// tokens_grad [tokens_num, H] sums the gradients of every permuted copy of a token; probs_grad [tokens_num,
// experts_num] puts each permuted prob's gradient back at its (token, expert) (empty without a probs gradient).
std::tuple<at::Tensor, at::Tensor> npu_moe_token_permute_with_routing_map_grad(
    const at::Tensor& permuted_token_out_grad, const std::optional<at::Tensor>& probs_grad,
    const at::Tensor& sorted_indices, const at::Tensor& routing_map, int64_t experts_num, int64_t tokens_num,
    bool drop_and_pad) {
  const char* op = "npu_moe_token_permute_with_routing_map_grad";
  TORCH_CHECK_VALUE(permuted_token_out_grad.dim() == 2 && routing_map.dim() == 2 &&
                        routing_map.size(0) == tokens_num && routing_map.size(1) == experts_num,
                    op, ": the gradient must be [rows, H] and routing_map [tokens_num, experts_num] = [", tokens_num,
                    ", ", experts_num, "], got ", permuted_token_out_grad.sizes(), " and ", routing_map.sizes());
  at::Tensor tokens_grad = at::empty({tokens_num, permuted_token_out_grad.size(1)}, permuted_token_out_grad.options());
  at::Tensor probs_grad_out = present(probs_grad) ? at::empty({tokens_num, experts_num}, probs_grad->options())
                                                  : at::empty({0}, permuted_token_out_grad.options());
  EXEC_NPU_CMD(aclnnMoeTokenPermuteWithRoutingMapGrad, permuted_token_out_grad, probs_grad, sorted_indices,
               routing_map, experts_num, tokens_num, drop_and_pad, tokens_grad, probs_grad_out);
  return {tokens_grad, probs_grad_out};
}

std::tuple<at::Tensor, at::Tensor> npu_moe_token_permute_with_routing_map_grad_meta(
    const at::Tensor& permuted_token_out_grad, const std::optional<at::Tensor>& probs_grad,
    const at::Tensor& sorted_indices, const at::Tensor& routing_map, int64_t experts_num, int64_t tokens_num,
    bool drop_and_pad) {
  return {at::empty({tokens_num, permuted_token_out_grad.size(1)}, permuted_token_out_grad.options()),
          present(probs_grad) ? at::empty({tokens_num, experts_num}, probs_grad->options())
                              : at::empty({0}, permuted_token_out_grad.options())};
}

}  // namespace at_npu::native
