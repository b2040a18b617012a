// MoeTokenUnpermuteWithRoutingMapKernelNpu.cpp - npu_moe_token_unpermute_with_routing_map (expert-grouped rows summed
// back per token, weighted by probs) and its _grad, on aclnnMoeTokenUnpermuteWithRoutingMap(Grad).
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined() && t->numel() > 0; }

void checkUnpermute(const char* op, const at::Tensor& permuted_tokens, const at::Tensor& sorted_indices,
                    at::IntArrayRef restore_shape, const std::optional<at::Tensor>& probs,
                    const std::optional<at::Tensor>& routing_map) {
  TORCH_CHECK_VALUE(permuted_tokens.dim() == 2 && sorted_indices.dim() == 1 &&
                        sorted_indices.size(0) == permuted_tokens.size(0),
                    op, ": permuted_tokens must be [rows, H] with sorted_indices [rows], got ", permuted_tokens.sizes(),
                    " and ", sorted_indices.sizes());
  TORCH_CHECK_VALUE(restore_shape.size() == 2 && restore_shape[1] == permuted_tokens.size(1) && restore_shape[0] > 0,
                    op, ": restore_shape must be [T, H] with H = ", permuted_tokens.size(1), ", got ", restore_shape);
  TORCH_CHECK_VALUE(!present(probs) || (present(routing_map) && probs->sizes() == routing_map->sizes() &&
                                        probs->size(0) == restore_shape[0]),
                    op, ": probs needs a routing_map of its [T, E] shape");
}

}  // namespace

at::Tensor npu_moe_token_unpermute_with_routing_map(const at::Tensor& permuted_tokens, const at::Tensor& sorted_indices,
                                                    at::IntArrayRef restore_shape,
                                                    const std::optional<at::Tensor>& probs,
                                                    const std::optional<at::Tensor>& routing_map, bool drop_and_pad) {
  checkUnpermute("npu_moe_token_unpermute_with_routing_map", permuted_tokens, sorted_indices, restore_shape, probs,
                 routing_map);
  at::Tensor unpermuted = at::empty({restore_shape[0], restore_shape[1]}, permuted_tokens.options());
  // The per-row bookkeeping torch_npu returns from its internal op (row order, token id, row prob).
  at::Tensor out_index = at::empty(sorted_indices.sizes(), sorted_indices.options());
  at::Tensor permuted_token_id = at::empty(sorted_indices.sizes(), sorted_indices.options());
  at::Tensor permuted_probs = present(probs) ? at::empty(sorted_indices.sizes(), probs->options())
                                             : at::empty({0}, permuted_tokens.options());
  EXEC_NPU_CMD(aclnnMoeTokenUnpermuteWithRoutingMap, permuted_tokens, sorted_indices, routing_map, probs, drop_and_pad,
               restore_shape, unpermuted, out_index, permuted_token_id, permuted_probs);
  return unpermuted;
}

at::Tensor npu_moe_token_unpermute_with_routing_map_meta(const at::Tensor& permuted_tokens,
                                                         const at::Tensor& sorted_indices,
                                                         at::IntArrayRef restore_shape,
                                                         const std::optional<at::Tensor>& probs,
                                                         const std::optional<at::Tensor>& routing_map,
                                                         bool drop_and_pad) {
  checkUnpermute("npu_moe_token_unpermute_with_routing_map", permuted_tokens, sorted_indices, restore_shape, probs,
                 routing_map);
  return at::empty({restore_shape[0], restore_shape[1]}, permuted_tokens.options());
}

// Row out_index[i] belongs to token permuted_token_id[i] (drop_and_pad), or, dropless, position j of the
// token-ordered rows (token j / topk) is row out_index[j]. Returns the rows' and probs' gradients.
std::tuple<at::Tensor, at::Tensor> npu_moe_token_unpermute_with_routing_map_grad(
    const at::Tensor& unpermuted_tokens_grad, const at::Tensor& out_index, const at::Tensor& permuted_token_id,
    const std::optional<at::Tensor>& routing_map, const std::optional<at::Tensor>& permuted_tokens,
    const std::optional<at::Tensor>& probs, bool drop_and_pad, at::IntArrayRef restore_shape) {
  const char* op = "npu_moe_token_unpermute_with_routing_map_grad";
  TORCH_CHECK_VALUE(present(permuted_tokens), op, ": permuted_tokens is needed for the row count and probs' gradient");
  checkUnpermute(op, *permuted_tokens, out_index, restore_shape, probs, routing_map);
  at::Tensor rows_grad = at::empty(permuted_tokens->sizes(), unpermuted_tokens_grad.options());
  at::Tensor probs_grad = present(probs) ? at::empty(probs->sizes(), probs->options())
                                         : at::empty({0}, unpermuted_tokens_grad.options());
  EXEC_NPU_CMD(aclnnMoeTokenUnpermuteWithRoutingMapGrad, unpermuted_tokens_grad, out_index, permuted_token_id,
               routing_map, permuted_tokens, probs, drop_and_pad, restore_shape, rows_grad, probs_grad);
  return {rows_grad, probs_grad};
}

std::tuple<at::Tensor, at::Tensor> npu_moe_token_unpermute_with_routing_map_grad_meta(
    const at::Tensor& unpermuted_tokens_grad, const at::Tensor& out_index, const at::Tensor& permuted_token_id,
    const std::optional<at::Tensor>& routing_map, const std::optional<at::Tensor>& permuted_tokens,
    const std::optional<at::Tensor>& probs, bool drop_and_pad, at::IntArrayRef restore_shape) {
  TORCH_CHECK_VALUE(present(permuted_tokens), "npu_moe_token_unpermute_with_routing_map_grad: permuted_tokens is ",
                    "needed");
  return {at::empty(permuted_tokens->sizes(), unpermuted_tokens_grad.options()),
          present(probs) ? at::empty(probs->sizes(), probs->options())
                         : at::empty({0}, unpermuted_tokens_grad.options())};
}

}  // namespace at_npu::native
