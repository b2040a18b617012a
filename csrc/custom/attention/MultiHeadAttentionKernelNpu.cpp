// MultiHeadAttentionKernelNpu.cpp - npu_multi_head_attention (q/k/v projections, softmax attention with bit-mask
// dropout, output projection) and its backward, on aclnnMultiHeadAttention / aclnnMultiHeadAttentionGrad.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>

#include <tuple>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/dropout/DropoutMask.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kMhaOp = "npu_multi_head_attention";
constexpr const char* kMhaBackwardOp = "npu_multi_head_attention_backward";
constexpr int64_t kAlign = 16;  // torch_npu's documented constraint (its kernel tiles by 16)

using Tensors8 = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                            at::Tensor>;
using Tensors11 = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                             at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

const at::Tensor& orUndefined(const std::optional<at::Tensor>& t) {
  static const at::Tensor undefined;
  return t.has_value() ? *t : undefined;
}

bool isAttentionFloat(at::ScalarType t) { return t == at::kFloat || t == at::kHalf || t == at::kBFloat16; }

struct MhaDims {
  int64_t batch, cols, scores;
};

// The checks torch_npu makes (positive sizes aligned to 16) plus the shapes and dtypes its kernel assumes.
MhaDims checkMha(const char* op, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                 std::initializer_list<const at::Tensor*> weights, std::initializer_list<const at::Tensor*> biases,
                 int64_t heads, int64_t dim, int64_t src_len, int64_t tgt_len, double dropout_prob) {
  TORCH_CHECK_VALUE(tgt_len > 0 && src_len > 0 && heads > 0 && dim > 0, op,
                    ": tgt_len, src_len, attn_head_num and attn_dim_per_head must be positive, got ", tgt_len, ", ",
                    src_len, ", ", heads, ", ", dim);
  TORCH_CHECK_VALUE(tgt_len % kAlign == 0 && src_len % kAlign == 0 && heads % kAlign == 0 && dim % kAlign == 0, op,
                    ": tgt_len, src_len, attn_head_num and attn_dim_per_head must be multiples of 16 (as on NPUs), "
                    "got ", tgt_len, ", ", src_len, ", ", heads, ", ", dim);
  TORCH_CHECK_VALUE(dropout_prob >= 0.0 && dropout_prob < 1.0, op,
                    ": dropout_prob (the probability of dropping) must be in [0, 1), got ", dropout_prob);
  TORCH_CHECK_TYPE(isAttentionFloat(query.scalar_type()), op, ": query must be float16, float32 or bfloat16, got ",
                   query.scalar_type());
  const int64_t cols = heads * dim;
  TORCH_CHECK_VALUE(query.dim() == 2 && query.size(1) == cols && query.size(0) % tgt_len == 0 && query.size(0) > 0,
                    op, ": query must be [batch * tgt_len, attn_head_num * attn_dim_per_head] = [B * ", tgt_len,
                    ", ", cols, "], got ", query.sizes());
  const int64_t batch = query.size(0) / tgt_len;
  for (const auto& [name, t] : {std::make_pair("key", &key), std::make_pair("value", &value)}) {
    TORCH_CHECK_VALUE(t->dim() == 2 && t->size(0) == batch * src_len && t->size(1) == cols, op, ": ", name,
                      " must be [batch * src_len, ", cols, "] = [", batch * src_len, ", ", cols, "], got ",
                      t->sizes());
  }
  for (const at::Tensor* t : weights) {
    TORCH_CHECK_VALUE(t->dim() == 2 && t->size(0) == cols && t->size(1) == cols, op, ": the weights must be [", cols,
                      ", ", cols, "] (out_features, in_features), got ", t->sizes());
  }
  for (const at::Tensor* t : biases) {
    TORCH_CHECK_VALUE(!t->defined() || t->numel() == cols, op, ": a bias must hold ", cols, " values, got ",
                      t->sizes());
  }
  for (const at::Tensor* t : {&key, &value}) {
    TORCH_CHECK_TYPE(t->scalar_type() == query.scalar_type(), op, ": key and value must have query's dtype ",
                     query.scalar_type(), ", got ", t->scalar_type());
  }
  for (const auto& group : {weights, biases}) {
    for (const at::Tensor* t : group) {
      TORCH_CHECK_TYPE(!t->defined() || t->scalar_type() == query.scalar_type(), op,
                       ": weights and biases must have query's dtype ", query.scalar_type(), ", got ",
                       t->scalar_type());
    }
  }
  return {batch, cols, batch * heads * tgt_len * src_len};
}

Tensors8 mhaOutputs(const at::Tensor& query, const at::Tensor& attn_mask, const at::Tensor& drop_mask,
                    const MhaDims& d, int64_t heads, int64_t dim, int64_t src_len, int64_t tgt_len,
                    bool softmax_use_float) {
  const std::vector<int64_t> scores{d.batch, heads, tgt_len, src_len};
  TORCH_CHECK_VALUE(attn_mask.dim() <= 4 && at::is_expandable_to(attn_mask.sizes(), scores), kMhaOp,
                    ": attn_mask must broadcast to [batch, attn_head_num, tgt_len, src_len] = ",
                    at::IntArrayRef(scores), ", got ", attn_mask.sizes());
  TORCH_CHECK_TYPE(at::isFloatingType(attn_mask.scalar_type()), kMhaOp, ": attn_mask must be a floating-point ",
                   "(additive) mask, got ", attn_mask.scalar_type());
  if (drop_mask.defined()) {
    TORCH_CHECK_TYPE(drop_mask.scalar_type() == at::kByte, kMhaOp, ": dropout_mask must be the uint8 bit mask ",
                     "(one bit per score, as npu_dropout_gen_mask makes it), got ", drop_mask.scalar_type());
    TORCH_CHECK_VALUE(drop_mask.numel() * 8 >= d.scores, kMhaOp, ": dropout_mask holds ", drop_mask.numel() * 8,
                      " bits, too few for the ", d.scores, " attention scores");
  }
  const auto opts = query.options();
  return {at::empty({query.size(0), d.cols}, opts),
          at::empty({dropoutMaskBytes(d.scores)}, opts.dtype(at::kByte)),
          at::empty({d.batch, heads, tgt_len, dim}, opts),
          at::empty({d.batch, heads, src_len, dim}, opts),
          at::empty({d.batch, heads, src_len, dim}, opts),
          at::empty(scores, softmax_use_float ? opts.dtype(at::kFloat) : opts),
          at::empty(scores, opts),
          at::empty({query.size(0), d.cols}, opts)};
}

}  // namespace

// Returns (y, dropout_mask, query_res, key_res, value_res, attn_scores, attn_res, context). With dropout_prob > 0
// the caller's dropout_mask is used when given, otherwise one is drawn from the npu generator; the mask used is
// returned (all bits set when nothing is dropped).
Tensors8 npu_multi_head_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                  const at::Tensor& query_weight, const at::Tensor& key_weight,
                                  const at::Tensor& value_weight, const at::Tensor& attn_mask,
                                  const at::Tensor& out_proj_weight, const std::optional<at::Tensor>& query_bias,
                                  const std::optional<at::Tensor>& key_bias,
                                  const std::optional<at::Tensor>& value_bias,
                                  const std::optional<at::Tensor>& out_proj_bias,
                                  const std::optional<at::Tensor>& dropout_mask, int64_t attn_head_num,
                                  int64_t attn_dim_per_head, int64_t src_len, int64_t tgt_len, double dropout_prob,
                                  bool softmax_use_float) {
  const at::Tensor &bq = orUndefined(query_bias), &bk = orUndefined(key_bias), &bv = orUndefined(value_bias);
  const at::Tensor &bo = orUndefined(out_proj_bias), &given = orUndefined(dropout_mask);
  const MhaDims d = checkMha(kMhaOp, query, key, value, {&query_weight, &key_weight, &value_weight, &out_proj_weight},
                             {&bq, &bk, &bv, &bo}, attn_head_num, attn_dim_per_head, src_len, tgt_len, dropout_prob);
  Tensors8 outs = mhaOutputs(query, attn_mask, given, d, attn_head_num, attn_dim_per_head, src_len, tgt_len,
                             softmax_use_float);
  at::Tensor drop;
  if (dropout_prob > 0.0) {
    if (given.defined()) {
      drop = given;
    } else {
      const auto [seed, offset] = nextDropoutSeed(query.device().index());
      drop = dropoutMaskBits(d.scores, dropout_prob, seed, offset, query.options(), at::kFloat);
    }
  }
  auto& [y, mask_out, query_res, key_res, value_res, attn_scores, attn_res, context] = outs;
  const double keep_prob = 1.0 - dropout_prob;
  EXEC_NPU_CMD(aclnnMultiHeadAttention, query, key, value, query_weight, key_weight, value_weight, attn_mask,
               out_proj_weight, bq, bk, bv, bo, drop, attn_head_num, attn_dim_per_head, src_len, tgt_len, keep_prob,
               softmax_use_float, y, mask_out, query_res, key_res, value_res, attn_scores, attn_res, context);
  return outs;
}

Tensors8 npu_multi_head_attention_meta(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                       const at::Tensor& query_weight, const at::Tensor& key_weight,
                                       const at::Tensor& value_weight, const at::Tensor& attn_mask,
                                       const at::Tensor& out_proj_weight,
                                       const std::optional<at::Tensor>& query_bias,
                                       const std::optional<at::Tensor>& key_bias,
                                       const std::optional<at::Tensor>& value_bias,
                                       const std::optional<at::Tensor>& out_proj_bias,
                                       const std::optional<at::Tensor>& dropout_mask, int64_t attn_head_num,
                                       int64_t attn_dim_per_head, int64_t src_len, int64_t tgt_len,
                                       double dropout_prob, bool softmax_use_float) {
  const at::Tensor &bq = orUndefined(query_bias), &bk = orUndefined(key_bias), &bv = orUndefined(value_bias);
  const at::Tensor &bo = orUndefined(out_proj_bias);
  const MhaDims d = checkMha(kMhaOp, query, key, value, {&query_weight, &key_weight, &value_weight, &out_proj_weight},
                             {&bq, &bk, &bv, &bo}, attn_head_num, attn_dim_per_head, src_len, tgt_len, dropout_prob);
  return mhaOutputs(query, attn_mask, orUndefined(dropout_mask), d, attn_head_num, attn_dim_per_head, src_len,
                    tgt_len, softmax_use_float);
}

namespace {

// Checks the saved forward results against the forward's shapes; returns the gradients' buffers in torch_npu's
// order and shapes (weights [C, C], inputs [rows, C], biases [1, C]).
Tensors11 mhaBackwardOutputs(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                             const at::Tensor& query_res, const at::Tensor& key_res, const at::Tensor& value_res,
                             const at::Tensor& attn_scores, const at::Tensor& attn_res, const at::Tensor& context,
                             const at::Tensor& y_grad, const at::Tensor& dropout_mask, const MhaDims& d,
                             int64_t heads, int64_t dim, int64_t src_len, int64_t tgt_len, double dropout_prob) {
  const char* op = kMhaBackwardOp;
  const std::vector<int64_t> scores{d.batch, heads, tgt_len, src_len};
  TORCH_CHECK_VALUE(query_res.sizes() == at::IntArrayRef({d.batch, heads, tgt_len, dim}) &&
                        key_res.sizes() == at::IntArrayRef({d.batch, heads, src_len, dim}) &&
                        value_res.sizes() == at::IntArrayRef({d.batch, heads, src_len, dim}),
                    op, ": query_res / key_res / value_res must be the forward's [batch, heads, len, dim] results");
  TORCH_CHECK_VALUE(attn_scores.sizes() == at::IntArrayRef(scores) && attn_res.sizes() == at::IntArrayRef(scores),
                    op, ": attn_scores and attn_res must be ", at::IntArrayRef(scores), ", got ",
                    attn_scores.sizes(), " and ", attn_res.sizes());
  TORCH_CHECK_VALUE(y_grad.sizes() == query.sizes() && context.sizes() == query.sizes(), op,
                    ": y_grad and context must have query's shape ", query.sizes(), ", got ", y_grad.sizes(),
                    " and ", context.sizes());
  if (dropout_prob > 0.0) {
    TORCH_CHECK_TYPE(dropout_mask.scalar_type() == at::kByte, op,
                     ": dropout_mask must be the forward's uint8 bit mask, got ", dropout_mask.scalar_type());
    TORCH_CHECK_VALUE(dropout_mask.numel() * 8 >= d.scores, op, ": dropout_mask holds ", dropout_mask.numel() * 8,
                      " bits, too few for the ", d.scores, " attention scores");
  }
  const auto wopts = query.options();
  const auto weight = [&] { return at::empty({d.cols, d.cols}, wopts); };
  const auto bias = [&] { return at::empty({1, d.cols}, wopts); };
  return {weight(), weight(), weight(), weight(),
          at::empty(query.sizes(), query.options()), at::empty(key.sizes(), key.options()),
          at::empty(value.sizes(), value.options()), bias(), bias(), bias(), bias()};
}

}  // namespace

// Returns (query_weight_grad, key_weight_grad, value_weight_grad, out_proj_weight_grad, query_grad, key_grad,
// value_grad, query_bias_grad, key_bias_grad, value_bias_grad, out_proj_bias_grad), biases as [1, C] like
// torch_npu (autograd sums them to the bias's shape).
Tensors11 npu_multi_head_attention_backward(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& query_weight,
    const at::Tensor& key_weight, const at::Tensor& value_weight, const at::Tensor& out_proj_weight,
    const std::optional<at::Tensor>& query_bias, const std::optional<at::Tensor>& key_bias,
    const std::optional<at::Tensor>& value_bias, const std::optional<at::Tensor>& out_proj_bias,
    const at::Tensor& query_res, const at::Tensor& key_res, const at::Tensor& value_res,
    const at::Tensor& attn_scores, const at::Tensor& attn_res, const at::Tensor& context, const at::Tensor& y_grad,
    const at::Tensor& dropout_mask, int64_t attn_head_num, int64_t attn_dim_per_head, int64_t src_len,
    int64_t tgt_len, double dropout_prob, bool softmax_use_float) {
  const at::Tensor &bq = orUndefined(query_bias), &bk = orUndefined(key_bias), &bv = orUndefined(value_bias);
  const at::Tensor &bo = orUndefined(out_proj_bias);
  const MhaDims d = checkMha(kMhaBackwardOp, query, key, value,
                             {&query_weight, &key_weight, &value_weight, &out_proj_weight}, {&bq, &bk, &bv, &bo},
                             attn_head_num, attn_dim_per_head, src_len, tgt_len, dropout_prob);
  Tensors11 outs = mhaBackwardOutputs(query, key, value, query_res, key_res, value_res, attn_scores, attn_res,
                                      context, y_grad, dropout_mask, d, attn_head_num, attn_dim_per_head, src_len,
                                      tgt_len, dropout_prob);
  // The mask only matters when something was dropped (torch_npu passes it only then).
  static const at::Tensor none;
  const at::Tensor& drop = dropout_prob > 0.0 ? dropout_mask : none;
  const double keep_prob = 1.0 - dropout_prob;
  auto& [gwq, gwk, gwv, gwo, gq, gk, gv, gbq, gbk, gbv, gbo] = outs;
  EXEC_NPU_CMD(aclnnMultiHeadAttentionGrad, query, key, value, query_weight, key_weight, value_weight,
               out_proj_weight, query_res, key_res, value_res, attn_scores, attn_res, context, y_grad, drop,
               attn_head_num, attn_dim_per_head, src_len, tgt_len, keep_prob, softmax_use_float, gwq, gwk, gwv, gwo,
               gq, gk, gv, gbq, gbk, gbv, gbo);
  return outs;
}

Tensors11 npu_multi_head_attention_backward_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& query_weight,
    const at::Tensor& key_weight, const at::Tensor& value_weight, const at::Tensor& out_proj_weight,
    const std::optional<at::Tensor>& query_bias, const std::optional<at::Tensor>& key_bias,
    const std::optional<at::Tensor>& value_bias, const std::optional<at::Tensor>& out_proj_bias,
    const at::Tensor& query_res, const at::Tensor& key_res, const at::Tensor& value_res,
    const at::Tensor& attn_scores, const at::Tensor& attn_res, const at::Tensor& context, const at::Tensor& y_grad,
    const at::Tensor& dropout_mask, int64_t attn_head_num, int64_t attn_dim_per_head, int64_t src_len,
    int64_t tgt_len, double dropout_prob, bool softmax_use_float) {
  const at::Tensor &bq = orUndefined(query_bias), &bk = orUndefined(key_bias), &bv = orUndefined(value_bias);
  const at::Tensor &bo = orUndefined(out_proj_bias);
  const MhaDims d = checkMha(kMhaBackwardOp, query, key, value,
                             {&query_weight, &key_weight, &value_weight, &out_proj_weight}, {&bq, &bk, &bv, &bo},
                             attn_head_num, attn_dim_per_head, src_len, tgt_len, dropout_prob);
  return mhaBackwardOutputs(query, key, value, query_res, key_res, value_res, attn_scores, attn_res, context, y_grad,
                            dropout_mask, d, attn_head_num, attn_dim_per_head, src_len, tgt_len, dropout_prob);
}

}  // namespace at_npu::native
