// MoeTokenPermuteKernelNpu.cpp - MoE token permutation (Megatron's permute / unpermute): npu_moe_token_permute
// (tokens grouped by expert, on aclnnMoeTokenPermute), npu_moe_token_unpermute (back to token order, weighted by
// probs and summed, on aclnnMoeTokenUnpermute) and their backward ops npu_moe_token_permute_grad(_v2)
// (aclnnMoeTokenPermuteGrad) and npu_moe_token_unpermute_grad(_v2) (aclnnMoeTokenUnpermuteGrad).
// padded_mode: indices are token ids per [expert, capacity] slot (rows gathered as listed, scattered back with
// restore_shape), as Megatron defines it.
#include <ATen/ops/empty.h>

#include <algorithm>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

bool isFloat(at::ScalarType type) { return type == at::kFloat || type == at::kHalf || type == at::kBFloat16; }

bool isIndexType(at::ScalarType type) { return type == at::kInt || type == at::kLong; }

void checkRows(const char* op, const char* what, const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.dim() == 2, op, ": ", what, " must be 2-D [rows, hidden], got ", t.sizes());
  TORCH_CHECK_TYPE(isFloat(t.scalar_type()), op, ": ", what, " must be float16, bfloat16 or float32, got ",
                   t.scalar_type());
}

void checkIndices(const char* op, const char* what, const at::Tensor& t, bool one_dim_only) {
  TORCH_CHECK_VALUE(t.dim() == 1 || (!one_dim_only && t.dim() == 2), op, ": ", what, " must be ",
                    one_dim_only ? "1-D" : "1-D [tokens] or 2-D [tokens, topk]", ", got ", t.sizes());
  TORCH_CHECK_TYPE(isIndexType(t.scalar_type()), op, ": ", what, " must be int32 or int64, got ", t.scalar_type());
}

int64_t topkOf(const at::Tensor& indices) { return indices.dim() == 1 ? 1 : indices.size(1); }

// How many permuted rows are kept: num_out_tokens > 0 caps them, <= 0 drops that many from the end (None: 0).
int64_t permutedRows(const at::Tensor& tokens, const at::Tensor& indices, std::optional<int64_t> num_out_tokens,
                     bool padded_mode) {
  const char* op = "npu_moe_token_permute";
  checkRows(op, "tokens", tokens);
  checkIndices(op, "indices", indices, /*one_dim_only=*/false);
  TORCH_CHECK_VALUE(padded_mode || indices.size(0) == tokens.size(0), op, ": indices must have one row per token (",
                    tokens.size(0), "), got ", indices.sizes());
  const int64_t n = indices.numel(), want = num_out_tokens.value_or(0);
  const int64_t rows = want > 0 ? std::min(want, n) : want + n;
  TORCH_CHECK_VALUE(rows >= 0, op, ": num_out_tokens ", want, " drops more than the ", n, " routed positions");
  return rows;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_moe_token_permute(const at::Tensor& tokens, const at::Tensor& indices,
                                                         std::optional<int64_t> num_out_tokens, bool padded_mode) {
  const int64_t rows = permutedRows(tokens, indices, num_out_tokens, padded_mode);
  at::Tensor permuted = at::empty({rows, tokens.size(1)}, tokens.options());
  at::Tensor sorted_indices = at::empty({indices.numel()}, indices.options().dtype(at::kInt));
  if (sorted_indices.numel() == 0) return {permuted, sorted_indices};
  EXEC_NPU_CMD(aclnnMoeTokenPermute, tokens, indices, rows, padded_mode, permuted, sorted_indices);
  return {permuted, sorted_indices};
}

std::tuple<at::Tensor, at::Tensor> npu_moe_token_permute_meta(const at::Tensor& tokens, const at::Tensor& indices,
                                                              std::optional<int64_t> num_out_tokens,
                                                              bool padded_mode) {
  const int64_t rows = permutedRows(tokens, indices, num_out_tokens, padded_mode);
  return {at::empty({rows, tokens.size(1)}, tokens.options()),
          at::empty({indices.numel()}, indices.options().dtype(at::kInt))};
}

namespace {

void checkProbs(const char* op, const std::optional<at::Tensor>& probs) {
  if (!present(probs)) return;
  TORCH_CHECK_VALUE(probs->dim() == 2, op, ": probs must be 2-D [tokens, topk], got ", probs->sizes());
  TORCH_CHECK_TYPE(isFloat(probs->scalar_type()), op, ": probs must be floating point, got ", probs->scalar_type());
}

// Unpadded: [sorted_indices / topk, H]; padded: restore_shape (token ids scattered back).
std::vector<int64_t> unpermutedShape(const at::Tensor& permuted, const at::Tensor& sorted_indices,
                                     const std::optional<at::Tensor>& probs, bool padded_mode,
                                     at::OptionalIntArrayRef restore_shape) {
  const char* op = "npu_moe_token_unpermute";
  checkRows(op, "permuted_tokens", permuted);
  checkIndices(op, "sorted_indices", sorted_indices, /*one_dim_only=*/true);
  checkProbs(op, probs);
  const int64_t n = sorted_indices.numel();
  if (padded_mode) {
    TORCH_CHECK_VALUE(restore_shape.has_value() && restore_shape->size() == 2 && (*restore_shape)[0] >= 0 &&
                          (*restore_shape)[1] == permuted.size(1),
                      op, ": padded_mode needs restore_shape [tokens, hidden = ", permuted.size(1), "]");
    TORCH_CHECK_VALUE(n == permuted.size(0), op, ": padded_mode takes one token id per permuted row (",
                      permuted.size(0), "), got ", n);
    TORCH_CHECK_VALUE(!present(probs) || probs->numel() == n, op, ": padded_mode takes one prob per permuted row (",
                      n, "), got ", probs->sizes());
    return restore_shape->vec();
  }
  const int64_t topk = present(probs) ? probs->size(1) : 1;
  TORCH_CHECK_VALUE(topk >= 1 && n % topk == 0, op, ": sorted_indices holds ", n, " positions, not tokens * topk (",
                    topk, ")");
  TORCH_CHECK_VALUE(!present(probs) || probs->size(0) == n / topk, op, ": probs must be [tokens = ", n / topk,
                    ", topk], got ", probs->sizes());
  return {n / topk, permuted.size(1)};
}

}  // namespace

at::Tensor npu_moe_token_unpermute(const at::Tensor& permuted_tokens, const at::Tensor& sorted_indices,
                                   const std::optional<at::Tensor>& probs, bool padded_mode,
                                   at::OptionalIntArrayRef restore_shape) {
  at::Tensor out = at::empty(unpermutedShape(permuted_tokens, sorted_indices, probs, padded_mode, restore_shape),
                             permuted_tokens.options());
  if (out.numel() == 0) return out;
  EXEC_NPU_CMD(aclnnMoeTokenUnpermute, permuted_tokens, sorted_indices, probs, padded_mode, restore_shape, out);
  return out;
}

at::Tensor npu_moe_token_unpermute_meta(const at::Tensor& permuted_tokens, const at::Tensor& sorted_indices,
                                        const std::optional<at::Tensor>& probs, bool padded_mode,
                                        at::OptionalIntArrayRef restore_shape) {
  return at::empty(unpermutedShape(permuted_tokens, sorted_indices, probs, padded_mode, restore_shape),
                   permuted_tokens.options());
}

// ---------------------------------------------------------------------------------------------- backward

namespace {

// grad_tokens [tokens, H]: the permuted rows' gradients summed back onto the tokens they came from.
void checkPermuteGrad(const char* op, const at::Tensor& grad, const at::Tensor& sorted_indices, int64_t tokens,
                      int64_t num_topk, bool padded_mode) {
  TORCH_CHECK_VALUE(grad.dim() == 2, op, ": grad_permuted_tokens must be 2-D [rows, hidden], got ", grad.sizes());
  TORCH_CHECK_TYPE(isFloat(grad.scalar_type()), op, ": grad_permuted_tokens must be floating point, got ",
                   grad.scalar_type());
  checkIndices(op, "sorted_indices", sorted_indices, /*one_dim_only=*/true);
  TORCH_CHECK_VALUE(tokens >= 0 && num_topk >= 1, op, ": need tokens >= 0 and num_topK >= 1, got ", tokens, " and ",
                    num_topk);
  TORCH_CHECK_VALUE(padded_mode || sorted_indices.numel() == tokens * num_topk, op, ": sorted_indices holds ",
                    sorted_indices.numel(), " positions, not tokens * topk = ", tokens, " * ", num_topk);
}

at::Tensor permuteGrad(const at::Tensor& grad, const at::Tensor& sorted_indices, int64_t tokens, at::ScalarType dtype,
                       int64_t num_topk, bool padded_mode) {
  at::Tensor grad_tokens = at::empty({tokens, grad.size(1)}, grad.options().dtype(dtype));
  if (grad_tokens.numel() == 0) return grad_tokens;
  EXEC_NPU_CMD(aclnnMoeTokenPermuteGrad, grad, sorted_indices, num_topk, padded_mode, grad_tokens);
  return grad_tokens;
}

}  // namespace

at::Tensor npu_moe_token_permute_grad(const at::Tensor& tokens, const at::Tensor& grad_permuted_tokens,
                                      const at::Tensor& indices, const at::Tensor& sorted_indices, bool padded_mode) {
  const char* op = "npu_moe_token_permute_grad";
  checkRows(op, "tokens", tokens);
  checkIndices(op, "indices", indices, /*one_dim_only=*/false);
  checkPermuteGrad(op, grad_permuted_tokens, sorted_indices, tokens.size(0), topkOf(indices), padded_mode);
  return permuteGrad(grad_permuted_tokens, sorted_indices, tokens.size(0), tokens.scalar_type(), topkOf(indices),
                     padded_mode);
}

at::Tensor npu_moe_token_permute_grad_meta(const at::Tensor& tokens, const at::Tensor& grad_permuted_tokens,
                                           const at::Tensor& indices, const at::Tensor& sorted_indices,
                                           bool padded_mode) {
  const char* op = "npu_moe_token_permute_grad";
  checkRows(op, "tokens", tokens);
  checkIndices(op, "indices", indices, /*one_dim_only=*/false);
  checkPermuteGrad(op, grad_permuted_tokens, sorted_indices, tokens.size(0), topkOf(indices), padded_mode);
  return at::empty({tokens.size(0), grad_permuted_tokens.size(1)}, tokens.options());
}

at::Tensor npu_moe_token_permute_grad_v2(const at::Tensor& grad_permuted_tokens, const at::Tensor& sorted_indices,
                                         int64_t tokens_size_0, at::ScalarType tokens_dtype, int64_t num_topK,
                                         bool padded_mode) {
  checkPermuteGrad("npu_moe_token_permute_grad_v2", grad_permuted_tokens, sorted_indices, tokens_size_0, num_topK,
                   padded_mode);
  return permuteGrad(grad_permuted_tokens, sorted_indices, tokens_size_0, tokens_dtype, num_topK, padded_mode);
}

at::Tensor npu_moe_token_permute_grad_v2_meta(const at::Tensor& grad_permuted_tokens, const at::Tensor& sorted_indices,
                                              int64_t tokens_size_0, at::ScalarType tokens_dtype, int64_t num_topK,
                                              bool padded_mode) {
  checkPermuteGrad("npu_moe_token_permute_grad_v2", grad_permuted_tokens, sorted_indices, tokens_size_0, num_topK,
                   padded_mode);
  return at::empty({tokens_size_0, grad_permuted_tokens.size(1)}, grad_permuted_tokens.options().dtype(tokens_dtype));
}

namespace {

struct UnpermuteGradShapes {
  std::vector<int64_t> grad_permuted, grad_probs;  // grad_probs: [] (0-dim) without probs
  at::ScalarType probs_type;
};

// grad_permuted_tokens [rows, H] and grad_probs (probs' shape, or a 0-dim placeholder without probs).
UnpermuteGradShapes unpermuteGradShapes(const char* op, const at::Tensor& grad, const at::Tensor& sorted_indices,
                                        int64_t rows, const std::optional<at::Tensor>& probs,
                                        const std::optional<at::Tensor>& permuted_tokens, bool padded_mode) {
  TORCH_CHECK_VALUE(grad.dim() == 2, op, ": grad_unpermuted_tokens must be 2-D [tokens, hidden], got ", grad.sizes());
  TORCH_CHECK_TYPE(isFloat(grad.scalar_type()), op, ": grad_unpermuted_tokens must be floating point, got ",
                   grad.scalar_type());
  checkIndices(op, "sorted_indices", sorted_indices, /*one_dim_only=*/true);
  checkProbs(op, probs);
  TORCH_CHECK_VALUE(rows >= 0, op, ": the permuted row count must be >= 0, got ", rows);
  if (present(permuted_tokens)) {
    TORCH_CHECK_VALUE(permuted_tokens->dim() == 2 && permuted_tokens->size(0) == rows &&
                          permuted_tokens->size(1) == grad.size(1),
                      op, ": permuted_tokens must be [", rows, ", ", grad.size(1), "], got ", permuted_tokens->sizes());
  }
  TORCH_CHECK_VALUE(!present(probs) || present(permuted_tokens), op,
                    ": the gradient of probs needs permuted_tokens");
  const int64_t n = sorted_indices.numel();
  if (padded_mode) {
    TORCH_CHECK_VALUE(n == rows && (!present(probs) || probs->numel() == n), op,
                      ": padded_mode takes one token id (and prob) per permuted row (", rows, "), got ", n);
  } else {
    const int64_t topk = present(probs) ? probs->size(1) : 1;
    TORCH_CHECK_VALUE(n == grad.size(0) * topk && (!present(probs) || probs->size(0) == grad.size(0)), op,
                      ": sorted_indices must hold tokens * topk = ", grad.size(0), " * ", topk, " positions, got ", n);
  }
  UnpermuteGradShapes s;
  s.grad_permuted = {rows, grad.size(1)};
  if (present(probs)) s.grad_probs = probs->sizes().vec();
  s.probs_type = present(probs) ? probs->scalar_type() : grad.scalar_type();
  return s;
}

std::tuple<at::Tensor, at::Tensor> unpermuteGrad(const UnpermuteGradShapes& s, at::ScalarType permuted_type,
                                                 const std::optional<at::Tensor>& permuted_tokens,
                                                 const at::Tensor& grad, const at::Tensor& sorted_indices,
                                                 const std::optional<at::Tensor>& probs, bool padded_mode,
                                                 at::OptionalIntArrayRef restore_shape) {
  at::Tensor grad_permuted = at::empty(s.grad_permuted, grad.options().dtype(permuted_type));
  at::Tensor grad_probs = at::empty(s.grad_probs, grad.options().dtype(s.probs_type));
  EXEC_NPU_CMD(aclnnMoeTokenUnpermuteGrad, permuted_tokens, grad, sorted_indices, probs, padded_mode, restore_shape,
               grad_permuted, grad_probs);
  return {grad_permuted, grad_probs};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_moe_token_unpermute_grad(const at::Tensor& permuted_tokens,
                                                                const at::Tensor& grad_unpermuted_tokens,
                                                                const at::Tensor& sorted_indices,
                                                                const std::optional<at::Tensor>& probs,
                                                                bool padded_mode,
                                                                at::OptionalIntArrayRef restore_shape) {
  const char* op = "npu_moe_token_unpermute_grad";
  checkRows(op, "permuted_tokens", permuted_tokens);
  const UnpermuteGradShapes s = unpermuteGradShapes(op, grad_unpermuted_tokens, sorted_indices,
                                                    permuted_tokens.size(0), probs, permuted_tokens, padded_mode);
  return unpermuteGrad(s, permuted_tokens.scalar_type(), permuted_tokens, grad_unpermuted_tokens, sorted_indices,
                       probs, padded_mode, restore_shape);
}

std::tuple<at::Tensor, at::Tensor> npu_moe_token_unpermute_grad_meta(const at::Tensor& permuted_tokens,
                                                                     const at::Tensor& grad_unpermuted_tokens,
                                                                     const at::Tensor& sorted_indices,
                                                                     const std::optional<at::Tensor>& probs,
                                                                     bool padded_mode,
                                                                     at::OptionalIntArrayRef restore_shape) {
  const char* op = "npu_moe_token_unpermute_grad";
  checkRows(op, "permuted_tokens", permuted_tokens);
  const UnpermuteGradShapes s = unpermuteGradShapes(op, grad_unpermuted_tokens, sorted_indices,
                                                    permuted_tokens.size(0), probs, permuted_tokens, padded_mode);
  return {at::empty(s.grad_permuted, permuted_tokens.options()),
          at::empty(s.grad_probs, grad_unpermuted_tokens.options().dtype(s.probs_type))};
}

std::tuple<at::Tensor, at::Tensor> npu_moe_token_unpermute_grad_v2(
    const at::Tensor& grad_unpermuted_tokens, const at::Tensor& sorted_indices, int64_t permuted_tokens_size_0,
    at::ScalarType permuted_tokens_dtype, const std::optional<at::Tensor>& probs, bool padded_mode,
    at::OptionalIntArrayRef restore_shape, const std::optional<at::Tensor>& permuted_tokens) {
  const UnpermuteGradShapes s = unpermuteGradShapes("npu_moe_token_unpermute_grad_v2", grad_unpermuted_tokens,
                                                    sorted_indices, permuted_tokens_size_0, probs, permuted_tokens,
                                                    padded_mode);
  return unpermuteGrad(s, permuted_tokens_dtype, permuted_tokens, grad_unpermuted_tokens, sorted_indices, probs,
                       padded_mode, restore_shape);
}

std::tuple<at::Tensor, at::Tensor> npu_moe_token_unpermute_grad_v2_meta(
    const at::Tensor& grad_unpermuted_tokens, const at::Tensor& sorted_indices, int64_t permuted_tokens_size_0,
    at::ScalarType permuted_tokens_dtype, const std::optional<at::Tensor>& probs, bool padded_mode,
    at::OptionalIntArrayRef restore_shape, const std::optional<at::Tensor>& permuted_tokens) {
  const UnpermuteGradShapes s = unpermuteGradShapes("npu_moe_token_unpermute_grad_v2", grad_unpermuted_tokens,
                                                    sorted_indices, permuted_tokens_size_0, probs, permuted_tokens,
                                                    padded_mode);
  return {at::empty(s.grad_permuted, grad_unpermuted_tokens.options().dtype(permuted_tokens_dtype)),
          at::empty(s.grad_probs, grad_unpermuted_tokens.options().dtype(s.probs_type))};
}

}  // namespace at_npu::native
