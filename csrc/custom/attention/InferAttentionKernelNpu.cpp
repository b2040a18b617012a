// InferAttentionKernelNpu.cpp - the inference attention ops: npu_prompt_flash_attention (prefill),
// npu_incre_flash_attention (decode, paged KV) and npu_fused_infer_attention_score (both, MLA rope parts,
// softmax_lse) on the aclnnPromptFlashAttentionV3 / aclnnIncreFlashAttentionV4 /
// aclnnFusedInferAttentionScoreV3 device ops.
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/attention/InferAttentionLayout.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

using infer_attention::LayoutPair;
using infer_attention::lseShape;

LayoutPair layoutsOf(const char* op, c10::string_view input_layout) {
  const LayoutPair l = infer_attention::splitLayout(std::string(input_layout));
  const bool tokens = l.in == "TND" || l.in == "NTD";
  TORCH_CHECK_VALUE(l.in == "BSH" || l.in == "BSND" || l.in == "BNSD" || tokens, op,
                    ": input_layout must be BSH, BSND, BNSD, TND or NTD (optionally _<output layout>, e.g. BNSD_BSND), "
                    "got '", input_layout, "'");
  TORCH_CHECK_VALUE(tokens ? (l.out == "TND" || l.out == "NTD")
                           : (l.out == "BSH" || l.out == "BSND" || l.out == "BNSD" || l.out == "NBSD"),
                    op, ": output layout ", l.out, " does not go with input layout ", l.in);
  return l;
}

// The attention output's shape: the query's (B, N, S) in the output layout, with the value's head size.
std::vector<int64_t> outputShape(const char* op, const LayoutPair& l, const at::Tensor& query, const at::Tensor& value,
                                 int64_t num_heads, int64_t num_kv_heads, bool paged) {
  const int64_t want = l.in == "BSH" || l.in == "TND" || l.in == "NTD" ? 3 : 4;
  TORCH_CHECK_VALUE(query.dim() == want, op, ": query must be ", want, "-D for input_layout ", l.in, ", got ",
                    query.sizes());
  TORCH_CHECK_VALUE(num_heads > 0, op, ": num_heads must be positive, got ", num_heads);
  const int64_t kv_heads = num_kv_heads == 0 ? num_heads : num_kv_heads;
  // The value's head size: its last dimension, or its hidden size over its heads (BSH / paged BnBsH).
  int64_t dv = value.size(-1);
  if ((l.in == "BSH" && !paged) || (paged && value.dim() == 3)) {
    TORCH_CHECK_VALUE(kv_heads > 0 && value.size(-1) % kv_heads == 0, op, ": the value's hidden size ", value.size(-1),
                      " is not a multiple of num_key_value_heads ", kv_heads);
    dv = value.size(-1) / kv_heads;
  }
  return infer_attention::outputShape(l, query, num_heads, dv);
}

bool given(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

}  // namespace

at::Tensor npu_prompt_flash_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& padding_mask, const std::optional<at::Tensor>& atten_mask,
    const std::optional<at::Tensor>& pse_shift, at::OptionalIntArrayRef actual_seq_lengths,
    const std::optional<at::Tensor>& deq_scale1, const std::optional<at::Tensor>& quant_scale1,
    const std::optional<at::Tensor>& deq_scale2, const std::optional<at::Tensor>& quant_scale2,
    const std::optional<at::Tensor>& quant_offset2, int64_t num_heads, double scale_value, int64_t pre_tokens,
    int64_t next_tokens, c10::string_view input_layout, int64_t num_key_value_heads,
    at::OptionalIntArrayRef actual_seq_lengths_kv, int64_t sparse_mode) {
  const char* op = "npu_prompt_flash_attention";
  TORCH_CHECK_VALUE(!given(padding_mask), op, ": padding_mask is reserved, as on NPUs: pass None");
  const LayoutPair l = layoutsOf(op, input_layout);
  at::Tensor out = at::empty(outputShape(op, l, query, value, num_heads, num_key_value_heads, false), query.options());
  const std::string layout(input_layout);
  const int64_t inner_precise = 1;
  EXEC_NPU_CMD(aclnnPromptFlashAttentionV3, query, key, value, pse_shift, atten_mask, actual_seq_lengths,
               actual_seq_lengths_kv, deq_scale1, quant_scale1, deq_scale2, quant_scale2, quant_offset2, num_heads,
               scale_value, pre_tokens, next_tokens, layout, num_key_value_heads, sparse_mode, inner_precise, out);
  return out;
}

at::Tensor npu_prompt_flash_attention_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& padding_mask, const std::optional<at::Tensor>& atten_mask,
    const std::optional<at::Tensor>& pse_shift, at::OptionalIntArrayRef actual_seq_lengths,
    const std::optional<at::Tensor>& deq_scale1, const std::optional<at::Tensor>& quant_scale1,
    const std::optional<at::Tensor>& deq_scale2, const std::optional<at::Tensor>& quant_scale2,
    const std::optional<at::Tensor>& quant_offset2, int64_t num_heads, double scale_value, int64_t pre_tokens,
    int64_t next_tokens, c10::string_view input_layout, int64_t num_key_value_heads,
    at::OptionalIntArrayRef actual_seq_lengths_kv, int64_t sparse_mode) {
  const LayoutPair l = layoutsOf("npu_prompt_flash_attention", input_layout);
  return at::empty(outputShape("npu_prompt_flash_attention", l, query, value, num_heads, num_key_value_heads, false),
                   query.options());
}

at::Tensor npu_incre_flash_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& padding_mask, const std::optional<at::Tensor>& atten_mask,
    const std::optional<at::Tensor>& pse_shift, at::OptionalIntArrayRef actual_seq_lengths,
    const std::optional<at::Tensor>& antiquant_scale, const std::optional<at::Tensor>& antiquant_offset,
    const std::optional<at::Tensor>& block_table, const std::optional<at::Tensor>& dequant_scale1,
    const std::optional<at::Tensor>& quant_scale1, const std::optional<at::Tensor>& dequant_scale2,
    const std::optional<at::Tensor>& quant_scale2, const std::optional<at::Tensor>& quant_offset2,
    const std::optional<at::Tensor>& kv_padding_size, int64_t num_heads, double scale_value,
    c10::string_view input_layout, int64_t num_key_value_heads, int64_t block_size, int64_t inner_precise) {
  const char* op = "npu_incre_flash_attention";
  TORCH_CHECK_VALUE(!given(padding_mask), op, ": padding_mask is reserved, as on NPUs: pass None");
  const LayoutPair l = layoutsOf(op, input_layout);
  at::Tensor out = at::empty(outputShape(op, l, query, value, num_heads, num_key_value_heads, given(block_table)),
                             query.options());
  const std::string layout(input_layout);
  EXEC_NPU_CMD(aclnnIncreFlashAttentionV4, query, at::TensorList(key), at::TensorList(value), pse_shift, atten_mask,
               actual_seq_lengths, dequant_scale1, quant_scale1, dequant_scale2, quant_scale2, quant_offset2,
               antiquant_scale, antiquant_offset, block_table, kv_padding_size, num_heads, scale_value, layout,
               num_key_value_heads, block_size, inner_precise, out);
  return out;
}

at::Tensor npu_incre_flash_attention_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& padding_mask, const std::optional<at::Tensor>& atten_mask,
    const std::optional<at::Tensor>& pse_shift, at::OptionalIntArrayRef actual_seq_lengths,
    const std::optional<at::Tensor>& antiquant_scale, const std::optional<at::Tensor>& antiquant_offset,
    const std::optional<at::Tensor>& block_table, const std::optional<at::Tensor>& dequant_scale1,
    const std::optional<at::Tensor>& quant_scale1, const std::optional<at::Tensor>& dequant_scale2,
    const std::optional<at::Tensor>& quant_scale2, const std::optional<at::Tensor>& quant_offset2,
    const std::optional<at::Tensor>& kv_padding_size, int64_t num_heads, double scale_value,
    c10::string_view input_layout, int64_t num_key_value_heads, int64_t block_size, int64_t inner_precise) {
  const LayoutPair l = layoutsOf("npu_incre_flash_attention", input_layout);
  return at::empty(outputShape("npu_incre_flash_attention", l, query, value, num_heads, num_key_value_heads,
                               given(block_table)),
                   query.options());
}

std::tuple<at::Tensor, at::Tensor> npu_fused_infer_attention_score(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& pse_shift,
    const std::optional<at::Tensor>& atten_mask, at::OptionalIntArrayRef actual_seq_lengths,
    at::OptionalIntArrayRef actual_seq_lengths_kv, const std::optional<at::Tensor>& dequant_scale1,
    const std::optional<at::Tensor>& quant_scale1, const std::optional<at::Tensor>& dequant_scale2,
    const std::optional<at::Tensor>& quant_scale2, const std::optional<at::Tensor>& quant_offset2,
    const std::optional<at::Tensor>& antiquant_scale, const std::optional<at::Tensor>& antiquant_offset,
    const std::optional<at::Tensor>& key_antiquant_scale, const std::optional<at::Tensor>& key_antiquant_offset,
    const std::optional<at::Tensor>& value_antiquant_scale, const std::optional<at::Tensor>& value_antiquant_offset,
    const std::optional<at::Tensor>& block_table, const std::optional<at::Tensor>& query_padding_size,
    const std::optional<at::Tensor>& kv_padding_size, const std::optional<at::Tensor>& key_shared_prefix,
    const std::optional<at::Tensor>& value_shared_prefix, at::OptionalIntArrayRef actual_shared_prefix_len,
    const std::optional<at::Tensor>& query_rope, const std::optional<at::Tensor>& key_rope,
    const std::optional<at::Tensor>& key_rope_antiquant_scale, int64_t num_heads, double scale, int64_t pre_tokens,
    int64_t next_tokens, c10::string_view input_layout, int64_t num_key_value_heads, int64_t sparse_mode,
    int64_t inner_precise, int64_t block_size, int64_t antiquant_mode, int64_t key_antiquant_mode,
    int64_t value_antiquant_mode, bool softmax_lse_flag) {
  const char* op = "npu_fused_infer_attention_score";
  const LayoutPair l = layoutsOf(op, input_layout);
  at::Tensor out = at::empty(outputShape(op, l, query, value, num_heads, num_key_value_heads, given(block_table)),
                             query.options());
  at::Tensor lse = softmax_lse_flag ? at::empty(lseShape(l, query, num_heads), query.options().dtype(at::kFloat))
                                    : at::zeros({0}, query.options().dtype(at::kFloat));
  const std::string layout(input_layout);
  EXEC_NPU_CMD(aclnnFusedInferAttentionScoreV3, query, at::TensorList(key), at::TensorList(value), pse_shift,
               atten_mask, actual_seq_lengths, actual_seq_lengths_kv, dequant_scale1, quant_scale1, dequant_scale2,
               quant_scale2, quant_offset2, antiquant_scale, antiquant_offset, block_table, query_padding_size,
               kv_padding_size, key_antiquant_scale, key_antiquant_offset, value_antiquant_scale,
               value_antiquant_offset, key_shared_prefix, value_shared_prefix, actual_shared_prefix_len, query_rope,
               key_rope, key_rope_antiquant_scale, num_heads, scale, pre_tokens, next_tokens, layout,
               num_key_value_heads, sparse_mode, inner_precise, block_size, antiquant_mode, softmax_lse_flag,
               key_antiquant_mode, value_antiquant_mode, out, lse);
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor> npu_fused_infer_attention_score_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& pse_shift,
    const std::optional<at::Tensor>& atten_mask, at::OptionalIntArrayRef actual_seq_lengths,
    at::OptionalIntArrayRef actual_seq_lengths_kv, const std::optional<at::Tensor>& dequant_scale1,
    const std::optional<at::Tensor>& quant_scale1, const std::optional<at::Tensor>& dequant_scale2,
    const std::optional<at::Tensor>& quant_scale2, const std::optional<at::Tensor>& quant_offset2,
    const std::optional<at::Tensor>& antiquant_scale, const std::optional<at::Tensor>& antiquant_offset,
    const std::optional<at::Tensor>& key_antiquant_scale, const std::optional<at::Tensor>& key_antiquant_offset,
    const std::optional<at::Tensor>& value_antiquant_scale, const std::optional<at::Tensor>& value_antiquant_offset,
    const std::optional<at::Tensor>& block_table, const std::optional<at::Tensor>& query_padding_size,
    const std::optional<at::Tensor>& kv_padding_size, const std::optional<at::Tensor>& key_shared_prefix,
    const std::optional<at::Tensor>& value_shared_prefix, at::OptionalIntArrayRef actual_shared_prefix_len,
    const std::optional<at::Tensor>& query_rope, const std::optional<at::Tensor>& key_rope,
    const std::optional<at::Tensor>& key_rope_antiquant_scale, int64_t num_heads, double scale, int64_t pre_tokens,
    int64_t next_tokens, c10::string_view input_layout, int64_t num_key_value_heads, int64_t sparse_mode,
    int64_t inner_precise, int64_t block_size, int64_t antiquant_mode, int64_t key_antiquant_mode,
    int64_t value_antiquant_mode, bool softmax_lse_flag) {
  const char* op = "npu_fused_infer_attention_score";
  const LayoutPair l = layoutsOf(op, input_layout);
  at::Tensor out = at::empty(outputShape(op, l, query, value, num_heads, num_key_value_heads, given(block_table)),
                             query.options());
  at::Tensor lse = softmax_lse_flag ? at::empty(lseShape(l, query, num_heads), query.options().dtype(at::kFloat))
                                    : at::empty({0}, query.options().dtype(at::kFloat));
  return {out, lse};
}

// The out= form (graph capture and task updates write into fixed buffers): the same computation
// into attention_out and softmax_lse. `workspace` is the device op's scratch memory on Ascend,
// sized by _npu_fused_infer_attention_score_get_max_workspace; this device op needs none.
std::tuple<at::Tensor&, at::Tensor&> npu_fused_infer_attention_score_out(

    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& pse_shift,
    const std::optional<at::Tensor>& atten_mask, at::OptionalIntArrayRef actual_seq_lengths,
    at::OptionalIntArrayRef actual_seq_lengths_kv, const std::optional<at::Tensor>& dequant_scale1,
    const std::optional<at::Tensor>& quant_scale1, const std::optional<at::Tensor>& dequant_scale2,
    const std::optional<at::Tensor>& quant_scale2, const std::optional<at::Tensor>& quant_offset2,
    const std::optional<at::Tensor>& antiquant_scale, const std::optional<at::Tensor>& antiquant_offset,
    const std::optional<at::Tensor>& key_antiquant_scale, const std::optional<at::Tensor>& key_antiquant_offset,
    const std::optional<at::Tensor>& value_antiquant_scale, const std::optional<at::Tensor>& value_antiquant_offset,
    const std::optional<at::Tensor>& block_table, const std::optional<at::Tensor>& query_padding_size,
    const std::optional<at::Tensor>& kv_padding_size, const std::optional<at::Tensor>& key_shared_prefix,
    const std::optional<at::Tensor>& value_shared_prefix, at::OptionalIntArrayRef actual_shared_prefix_len,
    const std::optional<at::Tensor>& query_rope, const std::optional<at::Tensor>& key_rope,
    const std::optional<at::Tensor>& key_rope_antiquant_scale, int64_t num_heads, double scale, int64_t pre_tokens,
    int64_t next_tokens, c10::string_view input_layout, int64_t num_key_value_heads, int64_t sparse_mode,
    int64_t inner_precise, int64_t block_size, int64_t antiquant_mode, int64_t key_antiquant_mode,
    int64_t value_antiquant_mode, bool softmax_lse_flag,
    const std::optional<at::Tensor>& workspace, at::Tensor& attention_out, at::Tensor& softmax_lse) {
  const char* op = "npu_fused_infer_attention_score.out";
  const LayoutPair l = layoutsOf(op, input_layout);
  const std::vector<int64_t> shape = outputShape(op, l, query, value, num_heads, num_key_value_heads,
                                                 given(block_table));
  TORCH_CHECK_VALUE(attention_out.sizes().vec() == shape, op, ": attention_out has shape ", attention_out.sizes(),
                    "; the attention output is ", c10::IntArrayRef(shape));
  TORCH_CHECK_TYPE(attention_out.scalar_type() == query.scalar_type(), op, ": attention_out must have query's dtype ",
                   query.scalar_type(), ", got ", attention_out.scalar_type());
  if (softmax_lse_flag) {
    const std::vector<int64_t> lse_shape = lseShape(l, query, num_heads);
    TORCH_CHECK_VALUE(softmax_lse.sizes().vec() == lse_shape, op, ": softmax_lse has shape ", softmax_lse.sizes(),
                      "; with softmax_lse_flag=True it is ", c10::IntArrayRef(lse_shape));
  }
  at::Tensor out = attention_out.is_contiguous() ? attention_out : at::empty(shape, attention_out.options());
  at::Tensor lse = !softmax_lse_flag ? at::zeros({0}, query.options().dtype(at::kFloat))
                   : softmax_lse.is_contiguous() && softmax_lse.scalar_type() == at::kFloat
                       ? softmax_lse
                       : at::empty(softmax_lse.sizes(), softmax_lse.options().dtype(at::kFloat));
  const std::string layout(input_layout);
  EXEC_NPU_CMD(aclnnFusedInferAttentionScoreV3, query, at::TensorList(key), at::TensorList(value), pse_shift,
               atten_mask, actual_seq_lengths, actual_seq_lengths_kv, dequant_scale1, quant_scale1, dequant_scale2,
               quant_scale2, quant_offset2, antiquant_scale, antiquant_offset, block_table, query_padding_size,
               kv_padding_size, key_antiquant_scale, key_antiquant_offset, value_antiquant_scale,
               value_antiquant_offset, key_shared_prefix, value_shared_prefix, actual_shared_prefix_len, query_rope,
               key_rope, key_rope_antiquant_scale, num_heads, scale, pre_tokens, next_tokens, layout,
               num_key_value_heads, sparse_mode, inner_precise, block_size, antiquant_mode, softmax_lse_flag,
               key_antiquant_mode, value_antiquant_mode, out, lse);
  if (!out.is_same(attention_out)) attention_out.copy_(out);
  if (softmax_lse_flag && !lse.is_same(softmax_lse)) softmax_lse.copy_(lse);
  return {attention_out, softmax_lse};
}

std::tuple<at::Tensor&, at::Tensor&> npu_fused_infer_attention_score_out_meta(

    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& pse_shift,
    const std::optional<at::Tensor>& atten_mask, at::OptionalIntArrayRef actual_seq_lengths,
    at::OptionalIntArrayRef actual_seq_lengths_kv, const std::optional<at::Tensor>& dequant_scale1,
    const std::optional<at::Tensor>& quant_scale1, const std::optional<at::Tensor>& dequant_scale2,
    const std::optional<at::Tensor>& quant_scale2, const std::optional<at::Tensor>& quant_offset2,
    const std::optional<at::Tensor>& antiquant_scale, const std::optional<at::Tensor>& antiquant_offset,
    const std::optional<at::Tensor>& key_antiquant_scale, const std::optional<at::Tensor>& key_antiquant_offset,
    const std::optional<at::Tensor>& value_antiquant_scale, const std::optional<at::Tensor>& value_antiquant_offset,
    const std::optional<at::Tensor>& block_table, const std::optional<at::Tensor>& query_padding_size,
    const std::optional<at::Tensor>& kv_padding_size, const std::optional<at::Tensor>& key_shared_prefix,
    const std::optional<at::Tensor>& value_shared_prefix, at::OptionalIntArrayRef actual_shared_prefix_len,
    const std::optional<at::Tensor>& query_rope, const std::optional<at::Tensor>& key_rope,
    const std::optional<at::Tensor>& key_rope_antiquant_scale, int64_t num_heads, double scale, int64_t pre_tokens,
    int64_t next_tokens, c10::string_view input_layout, int64_t num_key_value_heads, int64_t sparse_mode,
    int64_t inner_precise, int64_t block_size, int64_t antiquant_mode, int64_t key_antiquant_mode,
    int64_t value_antiquant_mode, bool softmax_lse_flag,
    const std::optional<at::Tensor>& workspace, at::Tensor& attention_out, at::Tensor& softmax_lse) {
  return {attention_out, softmax_lse};
}

// Ascend sizes the device op's scratch memory for the largest sequence lengths, so that one buffer
// serves every later update of a captured graph. This device op needs no scratch memory: the
// workspace is an empty uint8 tensor on query's device.
at::Tensor _npu_fused_infer_attention_score_get_max_workspace(

    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& pse_shift,
    const std::optional<at::Tensor>& atten_mask, at::OptionalIntArrayRef actual_seq_lengths,
    at::OptionalIntArrayRef actual_seq_lengths_kv, const std::optional<at::Tensor>& dequant_scale1,
    const std::optional<at::Tensor>& quant_scale1, const std::optional<at::Tensor>& dequant_scale2,
    const std::optional<at::Tensor>& quant_scale2, const std::optional<at::Tensor>& quant_offset2,
    const std::optional<at::Tensor>& antiquant_scale, const std::optional<at::Tensor>& antiquant_offset,
    const std::optional<at::Tensor>& key_antiquant_scale, const std::optional<at::Tensor>& key_antiquant_offset,
    const std::optional<at::Tensor>& value_antiquant_scale, const std::optional<at::Tensor>& value_antiquant_offset,
    const std::optional<at::Tensor>& block_table, const std::optional<at::Tensor>& query_padding_size,
    const std::optional<at::Tensor>& kv_padding_size, const std::optional<at::Tensor>& key_shared_prefix,
    const std::optional<at::Tensor>& value_shared_prefix, at::OptionalIntArrayRef actual_shared_prefix_len,
    const std::optional<at::Tensor>& query_rope, const std::optional<at::Tensor>& key_rope,
    const std::optional<at::Tensor>& key_rope_antiquant_scale, int64_t num_heads, double scale, int64_t pre_tokens,
    int64_t next_tokens, c10::string_view input_layout, int64_t num_key_value_heads, int64_t sparse_mode,
    int64_t inner_precise, int64_t block_size, int64_t antiquant_mode, int64_t key_antiquant_mode,
    int64_t value_antiquant_mode, bool softmax_lse_flag) {
  layoutsOf("_npu_fused_infer_attention_score_get_max_workspace", input_layout);
  return at::empty({0}, query.options().dtype(at::kByte));
}

at::Tensor _npu_fused_infer_attention_score_get_max_workspace_meta(

    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const std::optional<at::Tensor>& pse_shift,
    const std::optional<at::Tensor>& atten_mask, at::OptionalIntArrayRef actual_seq_lengths,
    at::OptionalIntArrayRef actual_seq_lengths_kv, const std::optional<at::Tensor>& dequant_scale1,
    const std::optional<at::Tensor>& quant_scale1, const std::optional<at::Tensor>& dequant_scale2,
    const std::optional<at::Tensor>& quant_scale2, const std::optional<at::Tensor>& quant_offset2,
    const std::optional<at::Tensor>& antiquant_scale, const std::optional<at::Tensor>& antiquant_offset,
    const std::optional<at::Tensor>& key_antiquant_scale, const std::optional<at::Tensor>& key_antiquant_offset,
    const std::optional<at::Tensor>& value_antiquant_scale, const std::optional<at::Tensor>& value_antiquant_offset,
    const std::optional<at::Tensor>& block_table, const std::optional<at::Tensor>& query_padding_size,
    const std::optional<at::Tensor>& kv_padding_size, const std::optional<at::Tensor>& key_shared_prefix,
    const std::optional<at::Tensor>& value_shared_prefix, at::OptionalIntArrayRef actual_shared_prefix_len,
    const std::optional<at::Tensor>& query_rope, const std::optional<at::Tensor>& key_rope,
    const std::optional<at::Tensor>& key_rope_antiquant_scale, int64_t num_heads, double scale, int64_t pre_tokens,
    int64_t next_tokens, c10::string_view input_layout, int64_t num_key_value_heads, int64_t sparse_mode,
    int64_t inner_precise, int64_t block_size, int64_t antiquant_mode, int64_t key_antiquant_mode,
    int64_t value_antiquant_mode, bool softmax_lse_flag) {
  return at::empty({0}, query.options().dtype(at::kByte));
}

}  // namespace at_npu::native
