// InferAttentionV2KernelNpu.cpp - npu_fused_infer_attention_score_v2 on the aclnnFusedInferAttentionScoreV4
// device op, with the learnable sink folded into the output from the softmax log-sum-exp.
#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/logaddexp.h>
#include <ATen/ops/nan_to_num.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/zeros.h>

#include <string>
#include <utility>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/attention/InferAttentionLayout.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_fused_infer_attention_score_v2";

bool given(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

using Layouts = infer_attention::LayoutPair;
using infer_attention::lseShape;

// Upstream's input_layout values (NSD has no software kernel).
Layouts layoutsOf(c10::string_view input_layout, const at::Tensor& query) {
  const std::string s(input_layout);
  static const char* kTaken[] = {"BSH",       "BSND",      "BNSD",      "TND",       "NTD",
                                 "BNSD_BSND", "BSH_BNSD",  "BSND_BNSD", "NTD_TND",   "BSH_NBSD",
                                 "BSND_NBSD", "BNSD_NBSD", "TND_NTD"};
  bool ok = false;
  for (const char* t : kTaken) ok = ok || s == t;
  TORCH_CHECK_VALUE(s != "NSD", kOp, ": input_layout NSD is not supported on the software NPU: use BNSD with B = 1");
  TORCH_CHECK_VALUE(ok, kOp, ": input_layout must be one of BSH, BSND, BNSD, TND, NTD, BNSD_BSND, BSH_BNSD, ",
                    "BSND_BNSD, NTD_TND, BSH_NBSD, BSND_NBSD, BNSD_NBSD, TND_NTD; got '", s, "'");
  const Layouts l = infer_attention::splitLayout(s);
  const int64_t want = l.in == "BSH" || l.in == "TND" || l.in == "NTD" ? 3 : 4;
  TORCH_CHECK_VALUE(query.dim() == want, kOp, ": query must be ", want, "-D for input_layout ", s, ", got ",
                    query.sizes());
  return l;
}

bool tokenLayout(const std::string& l) { return l == "TND" || l == "NTD"; }

// Quantized operands and chip number formats have no software kernel: say which argument to drop.
void checkFloatForm(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                    const std::vector<std::pair<const char*, bool>>& quant_args) {
  for (const auto& [name, present] : quant_args) {
    TORCH_CHECK_VALUE(!present, kOp, ": ", name,
                      " belongs to the quantized forms, which the software NPU does not have: pass None");
  }
  for (const at::Tensor* t : {&query, &key, &value}) {
    const at::ScalarType d = t->scalar_type();
    TORCH_CHECK_TYPE(d != at::kChar && d != at::kByte && d != at::kInt && !isFloat8Type(d), kOp, ": ", d,
                     " attention operands (int8 / int4 / float8 / hifloat8) are chip number formats the software ",
                     "NPU does not have: use float16, bfloat16 or float32");
    TORCH_CHECK_TYPE(d == at::kHalf || d == at::kBFloat16 || d == at::kFloat, kOp,
                     ": query, key and value must be float16, bfloat16 or float32, got ", d);
  }
}

std::vector<int64_t> outShape(const Layouts& l, const at::Tensor& query, const at::Tensor& value, int64_t heads,
                              int64_t kv_heads, bool paged) {
  TORCH_CHECK_VALUE(heads > 0, kOp, ": num_query_heads must be positive, got ", heads);
  TORCH_CHECK_VALUE(kv_heads > 0, kOp, ": num_key_value_heads must be 0 (= num_query_heads) or positive, got ",
                    kv_heads);
  int64_t dv = 0;
  if (paged) {
    TORCH_CHECK_VALUE(value.dim() == 3 || value.dim() == 4, kOp, ": with block_table, value must be ",
                      "[blocks, block_size, H] or [blocks, N, block_size, D] (the 5-D NZ cache is chip-only), got ",
                      value.sizes());
    dv = value.dim() == 3 ? value.size(2) / kv_heads : value.size(3);
  } else {
    TORCH_CHECK_VALUE(value.dim() == query.dim(), kOp, ": value must have query's rank ", query.dim(),
                      " without block_table, got ", value.sizes());
    dv = l.in == "BSH" ? value.size(2) / kv_heads : value.size(-1);
  }
  return infer_attention::outputShape(l, query, heads, dv);
}

void checkSink(const std::optional<at::Tensor>& sink, int64_t heads) {
  if (!given(sink)) return;
  TORCH_CHECK_VALUE(sink->dim() == 1 && sink->size(0) == heads, kOp, ": learnable_sink must be (num_query_heads,) = (",
                    heads, ",), got ", sink->sizes());
  const at::ScalarType d = sink->scalar_type();
  TORCH_CHECK_TYPE(d == at::kBFloat16 || d == at::kHalf || d == at::kFloat, kOp,
                   ": learnable_sink must be bfloat16, float16 or float32, got ", d);
}

// The lse ([B, N, S, 1] / [T, N, 1]) rearranged to broadcast over the output in its layout.
at::Tensor toOutLayout(const at::Tensor& per_row, const Layouts& l) {
  if (tokenLayout(l.in)) return l.out == "NTD" ? per_row.permute({1, 0, 2}) : per_row;
  if (l.out == "BNSD") return per_row;
  if (l.out == "NBSD") return per_row.permute({1, 0, 2, 3});
  return per_row.permute({0, 2, 1, 3});  // BSND, and BSH seen as [B, S, N, D]
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_fused_infer_attention_score_v2(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& query_rope, const std::optional<at::Tensor>& key_rope,
    const std::optional<at::Tensor>& pse_shift, const std::optional<at::Tensor>& atten_mask,
    at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_kvlen,
    const std::optional<at::Tensor>& block_table, const std::optional<at::Tensor>& dequant_scale_query,
    const std::optional<at::Tensor>& dequant_scale_key, const std::optional<at::Tensor>& dequant_offset_key,
    const std::optional<at::Tensor>& dequant_scale_value, const std::optional<at::Tensor>& dequant_offset_value,
    const std::optional<at::Tensor>& dequant_scale_key_rope, const std::optional<at::Tensor>& quant_scale_out,
    const std::optional<at::Tensor>& quant_offset_out, const std::optional<at::Tensor>& quant_scale_p,
    const std::optional<at::Tensor>& learnable_sink, int64_t num_query_heads, int64_t num_key_value_heads,
    double softmax_scale, int64_t pre_tokens, int64_t next_tokens, c10::string_view input_layout,
    int64_t sparse_mode, int64_t block_size, int64_t query_quant_mode, int64_t key_quant_mode,
    int64_t value_quant_mode, int64_t inner_precise, bool return_softmax_lse, std::optional<int64_t> query_dtype,
    std::optional<int64_t> key_dtype, std::optional<int64_t> value_dtype, std::optional<int64_t> query_rope_dtype,
    std::optional<int64_t> key_rope_dtype, std::optional<int64_t> key_shared_prefix_dtype,
    std::optional<int64_t> value_shared_prefix_dtype, std::optional<int64_t> dequant_scale_query_dtype,
    std::optional<int64_t> dequant_scale_key_dtype, std::optional<int64_t> dequant_scale_value_dtype,
    std::optional<int64_t> dequant_scale_key_rope_dtype, std::optional<int64_t> out_dtype) {
  // The *_dtype arguments are documented upstream as reserved (out_dtype only names the output of the
  // quantized forms): the float forms here take them and keep the query's dtype.
  checkFloatForm(query, key, value,
                 {{"dequant_scale_query", given(dequant_scale_query)}, {"dequant_scale_key", given(dequant_scale_key)},
                  {"dequant_offset_key", given(dequant_offset_key)}, {"dequant_scale_value", given(dequant_scale_value)},
                  {"dequant_offset_value", given(dequant_offset_value)},
                  {"dequant_scale_key_rope", given(dequant_scale_key_rope)},
                  {"quant_scale_out", given(quant_scale_out)}, {"quant_offset_out", given(quant_offset_out)},
                  {"quant_scale_p", given(quant_scale_p)}});
  TORCH_CHECK_VALUE(query_quant_mode == 0 && key_quant_mode == 0 && value_quant_mode == 0, kOp,
                    ": query_quant_mode / key_quant_mode / value_quant_mode select quantized forms the software NPU ",
                    "does not have: pass 0");
  const Layouts l = layoutsOf(input_layout, query);
  const int64_t kv_heads = num_key_value_heads == 0 ? num_query_heads : num_key_value_heads;
  checkSink(learnable_sink, num_query_heads);
  const bool sink = given(learnable_sink);
  at::Tensor out = at::empty(outShape(l, query, value, num_query_heads, kv_heads, given(block_table)),
                             query.options());
  // The sink needs the log-sum-exp of the scores, so the device op computes it whenever a sink is given.
  const bool want_lse = return_softmax_lse || sink;
  at::Tensor lse = want_lse ? at::empty(lseShape(l, query, num_query_heads), query.options().dtype(at::kFloat))
                            : at::zeros({0}, query.options().dtype(at::kFloat));
  const std::string layout(input_layout);
  const std::optional<at::Tensor> none;
  const at::OptionalIntArrayRef no_prefix;
  const int64_t antiquant_mode = 0;
  EXEC_NPU_CMD(aclnnFusedInferAttentionScoreV4, query, at::TensorList(key), at::TensorList(value), pse_shift,
               atten_mask, actual_seq_qlen, actual_seq_kvlen, none, none, none, none, none, none, none, block_table,
               none, none, none, none, none, none, none, none, no_prefix, query_rope, key_rope, none, none, none,
               num_query_heads, softmax_scale, pre_tokens, next_tokens, layout, num_key_value_heads, sparse_mode,
               inner_precise, block_size, antiquant_mode, want_lse, key_quant_mode, value_quant_mode,
               query_quant_mode, out, lse);
  if (sink) {
    // With a sink logit z per head the softmax denominator gains exp(z): each row's output scales by
    // sum / (sum + exp(z)) = sigmoid(lse - z), and the row's log-sum-exp becomes logaddexp(lse, z).
    // Rows with no valid key (lse = -inf or NaN) give 0.
    std::vector<int64_t> sink_shape(lse.dim(), 1);
    sink_shape[1] = num_query_heads;  // the lse is [T, N, 1] or [B, N, S, 1]
    const at::Tensor z = learnable_sink->to(at::kFloat).view(sink_shape);
    const at::Tensor keep = at::nan_to_num(at::sigmoid(lse - z), 0.0, 0.0, 0.0);
    at::Tensor shaped = l.out == "BSH" ? out.view({out.size(0), out.size(1), num_query_heads, -1}) : out;
    shaped.copy_(shaped.to(at::kFloat) * toOutLayout(keep, l));
    lse = return_softmax_lse ? at::logaddexp(lse, z) : at::zeros({0}, query.options().dtype(at::kFloat));
  }
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor> npu_fused_infer_attention_score_v2_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& query_rope, const std::optional<at::Tensor>& key_rope,
    const std::optional<at::Tensor>& pse_shift, const std::optional<at::Tensor>& atten_mask,
    at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_kvlen,
    const std::optional<at::Tensor>& block_table, const std::optional<at::Tensor>& dequant_scale_query,
    const std::optional<at::Tensor>& dequant_scale_key, const std::optional<at::Tensor>& dequant_offset_key,
    const std::optional<at::Tensor>& dequant_scale_value, const std::optional<at::Tensor>& dequant_offset_value,
    const std::optional<at::Tensor>& dequant_scale_key_rope, const std::optional<at::Tensor>& quant_scale_out,
    const std::optional<at::Tensor>& quant_offset_out, const std::optional<at::Tensor>& quant_scale_p,
    const std::optional<at::Tensor>& learnable_sink, int64_t num_query_heads, int64_t num_key_value_heads,
    double softmax_scale, int64_t pre_tokens, int64_t next_tokens, c10::string_view input_layout,
    int64_t sparse_mode, int64_t block_size, int64_t query_quant_mode, int64_t key_quant_mode,
    int64_t value_quant_mode, int64_t inner_precise, bool return_softmax_lse, std::optional<int64_t> query_dtype,
    std::optional<int64_t> key_dtype, std::optional<int64_t> value_dtype, std::optional<int64_t> query_rope_dtype,
    std::optional<int64_t> key_rope_dtype, std::optional<int64_t> key_shared_prefix_dtype,
    std::optional<int64_t> value_shared_prefix_dtype, std::optional<int64_t> dequant_scale_query_dtype,
    std::optional<int64_t> dequant_scale_key_dtype, std::optional<int64_t> dequant_scale_value_dtype,
    std::optional<int64_t> dequant_scale_key_rope_dtype, std::optional<int64_t> out_dtype) {
  const Layouts l = layoutsOf(input_layout, query);
  const int64_t kv_heads = num_key_value_heads == 0 ? num_query_heads : num_key_value_heads;
  checkSink(learnable_sink, num_query_heads);
  at::Tensor out = at::empty(outShape(l, query, value, num_query_heads, kv_heads, given(block_table)),
                             query.options());
  at::Tensor lse = return_softmax_lse
                       ? at::empty(lseShape(l, query, num_query_heads), query.options().dtype(at::kFloat))
                       : at::empty({0}, query.options().dtype(at::kFloat));
  return {out, lse};
}

}  // namespace at_npu::native
