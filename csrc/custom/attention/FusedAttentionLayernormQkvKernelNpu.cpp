// FusedAttentionLayernormQkvKernelNpu.cpp - npu_fused_attention_layernorm_qkv_fwd: layer norm over the hidden size,
// then the query / key / value projections split into heads, on aclnnAttentionLnQKV. No gradient upstream.
#include <ATen/ops/empty.h>

#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kLnQkvOp = "npu_fused_attention_layernorm_qkv_fwd";

// Checks the arguments; returns {norm, query, key, value, mean, variance} as upstream orders them:
// norm (B*S, H) like x; query/key/value (B, num_heads, S, H / num_heads) like the kernels; mean/variance (B*S,).
std::vector<at::Tensor> lnQkvOutputs(const at::Tensor& x, const at::Tensor& kq, const at::Tensor& kk,
                                     const at::Tensor& kv, const at::Tensor& gamma, const at::Tensor& beta,
                                     const std::optional<at::Tensor>& bq, const std::optional<at::Tensor>& bk,
                                     const std::optional<at::Tensor>& bv, int64_t seq_len, int64_t num_heads) {
  const at::ScalarType t = x.scalar_type();
  TORCH_CHECK_TYPE(t == at::kHalf || t == at::kFloat || t == at::kBFloat16, kLnQkvOp,
                   ": x must be float16, float32 or bfloat16, got ", t);
  TORCH_CHECK_VALUE(x.dim() == 2, kLnQkvOp, ": x must be 2-D (batch * seq_len, hidden), got ", x.sizes());
  TORCH_CHECK_VALUE(seq_len > 0 && num_heads > 0, kLnQkvOp, ": seq_len and num_heads must be positive, got ",
                    seq_len, " and ", num_heads);
  const int64_t rows = x.size(0), hidden = x.size(1);
  TORCH_CHECK_VALUE(rows % seq_len == 0 && hidden % num_heads == 0, kLnQkvOp, ": x.size(0) = ", rows,
                    " must be divisible by seq_len = ", seq_len, " and x.size(1) = ", hidden,
                    " by num_heads = ", num_heads);
  for (const auto& [name, k] : {std::make_pair("kernel_query", &kq), std::make_pair("kernel_key", &kk),
                                std::make_pair("kernel_value", &kv)}) {
    TORCH_CHECK_TYPE(k->scalar_type() == t, kLnQkvOp, ": ", name, " must have x's dtype ", t, ", got ",
                     k->scalar_type());
    TORCH_CHECK_VALUE(k->dim() == 2 && k->size(0) == hidden && k->size(1) == hidden, kLnQkvOp, ": ", name,
                      " must be (hidden, hidden) = (", hidden, ", ", hidden, ") (input features first), got ",
                      k->sizes());
  }
  for (const auto& [name, v] : {std::make_pair("gamma", &gamma), std::make_pair("beta", &beta)}) {
    TORCH_CHECK_TYPE(v->scalar_type() == t, kLnQkvOp, ": ", name, " must have x's dtype ", t, ", got ",
                     v->scalar_type());
    TORCH_CHECK_VALUE(v->dim() == 1 && v->size(0) == hidden, kLnQkvOp, ": ", name, " must have shape (", hidden,
                      ",), got ", v->sizes());
  }
  for (const auto& [name, b] : {std::make_pair("bias_query", &bq), std::make_pair("bias_key", &bk),
                                std::make_pair("bias_value", &bv)}) {
    if (!b->has_value() || !(*b)->defined()) continue;
    TORCH_CHECK_TYPE((*b)->scalar_type() == t, kLnQkvOp, ": ", name, " must have x's dtype ", t, ", got ",
                     (*b)->scalar_type());
    TORCH_CHECK_VALUE((*b)->dim() == 1 && (*b)->size(0) == hidden, kLnQkvOp, ": ", name, " must have shape (",
                      hidden, ",), got ", (*b)->sizes());
  }
  const std::vector<int64_t> heads{rows / seq_len, num_heads, seq_len, hidden / num_heads};
  return {at::empty(x.sizes(), x.options()),       at::empty(heads, kq.options()), at::empty(heads, kk.options()),
          at::empty(heads, kv.options()),          at::empty({rows}, kq.options()),
          at::empty({rows}, kq.options())};
}

}  // namespace

std::vector<at::Tensor> npu_fused_attention_layernorm_qkv_fwd(
    const at::Tensor& x, const at::Tensor& kernel_query, const at::Tensor& kernel_key, const at::Tensor& kernel_value,
    const at::Tensor& gamma, const at::Tensor& beta, const std::optional<at::Tensor>& bias_query,
    const std::optional<at::Tensor>& bias_key, const std::optional<at::Tensor>& bias_value, int64_t seq_len,
    int64_t num_heads, double eps) {
  std::vector<at::Tensor> outs = lnQkvOutputs(x, kernel_query, kernel_key, kernel_value, gamma, beta, bias_query,
                                              bias_key, bias_value, seq_len, num_heads);
  EXEC_NPU_CMD(aclnnAttentionLnQKV, x, kernel_query, kernel_key, kernel_value, gamma, beta, bias_query, bias_key,
               bias_value, seq_len, num_heads, eps, outs[0], outs[1], outs[2], outs[3], outs[4], outs[5]);
  return outs;
}

std::vector<at::Tensor> npu_fused_attention_layernorm_qkv_fwd_meta(
    const at::Tensor& x, const at::Tensor& kernel_query, const at::Tensor& kernel_key, const at::Tensor& kernel_value,
    const at::Tensor& gamma, const at::Tensor& beta, const std::optional<at::Tensor>& bias_query,
    const std::optional<at::Tensor>& bias_key, const std::optional<at::Tensor>& bias_value, int64_t seq_len,
    int64_t num_heads, double eps) {
  return lnQkvOutputs(x, kernel_query, kernel_key, kernel_value, gamma, beta, bias_query, bias_key, bias_value,
                      seq_len, num_heads);
}

}  // namespace at_npu::native
