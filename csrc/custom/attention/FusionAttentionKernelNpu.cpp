// FusionAttentionKernelNpu.cpp - npu_fusion_attention (and its v2 / v3 forms) and its grad on the
// FlashAttentionScore device ops (tiled flash attention: memory grows with S, not S^2), in layouts BSH / SBH / BSND / BNSD / TND
// and sparse modes 0-8. Dropout masks come from aclnnDropoutGenMaskV2 with a (seed, offset) drawn from
// the npu generator, so the backward regenerates exactly the forward's mask.
#include <ATen/ops/empty.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/full.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <tuple>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/dropout/DropoutMask.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr int64_t kStatsWidth = 8;  // torch_npu keeps softmax max / sum broadcast over 8 lanes

// The sizes torch_npu derives from query / key / value in each layout.
struct Dims {
  std::string layout;
  int64_t b = 0, n = 0, s0 = 0, s1 = 0, d = 0, d2 = 0, t = 0;
  std::vector<int64_t> out_shape;
};

Dims dimsOf(const char* op, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
            int64_t head_num, c10::string_view input_layout) {
  Dims x;
  x.layout = std::string(input_layout);
  for (auto& c : x.layout) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  TORCH_CHECK_VALUE(head_num > 0, op, ": head_num must be positive, got ", head_num);
  TORCH_CHECK_VALUE(x.layout == "BSH" || x.layout == "SBH" || x.layout == "BSND" || x.layout == "BNSD" ||
                        x.layout == "TND",
                    op, ": input_layout must be BSH, SBH, BSND, BNSD or TND (any case), got '", input_layout, "'");
  const int64_t want = (x.layout == "BSND" || x.layout == "BNSD") ? 4 : 3;
  for (const at::Tensor* t : {&query, &key, &value}) {
    TORCH_CHECK_VALUE(t->dim() == want, op, ": layout ", x.layout, " takes ", want, "-D query, key and value, got ",
                      query.sizes(), ", ", key.sizes(), " and ", value.sizes());
  }
  if (x.layout == "BSH" || x.layout == "SBH") {
    const int64_t bdim = x.layout == "BSH" ? 0 : 1, sdim = 1 - bdim;
    x.b = query.size(bdim);
    x.s0 = query.size(sdim);
    x.s1 = key.size(sdim);
    x.n = head_num;
    TORCH_CHECK_VALUE(query.size(2) % head_num == 0, op, ": the query's hidden size ", query.size(2),
                      " is not a multiple of head_num ", head_num);
    x.d = query.size(2) / head_num;
    const int64_t kv_heads = x.d > 0 ? key.size(2) / x.d : 0;
    x.d2 = kv_heads > 0 ? value.size(2) / kv_heads : x.d;
    x.out_shape = x.layout == "BSH" ? std::vector<int64_t>{x.b, x.s0, head_num * x.d2}
                                    : std::vector<int64_t>{x.s0, x.b, head_num * x.d2};
  } else if (x.layout == "TND") {
    x.t = query.size(0);
    x.n = query.size(1);
    x.d = query.size(2);
    x.d2 = value.size(2);
    x.out_shape = {x.t, x.n, x.d2};
  } else {
    const int64_t ndim = x.layout == "BSND" ? 2 : 1, sdim = x.layout == "BSND" ? 1 : 2;
    x.b = query.size(0);
    x.n = query.size(ndim);
    x.s0 = query.size(sdim);
    x.s1 = key.size(sdim);
    x.d = query.size(3);
    x.d2 = value.size(3);
    x.out_shape = query.sizes().vec();
    x.out_shape[3] = x.d2;
  }
  return x;
}

void checkArguments(const char* op, const Dims& x, double keep_prob, int64_t sparse_mode,
                    at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_kvlen,
                    const std::optional<at::Tensor>& padding_mask, c10::string_view softmax_layout) {
  TORCH_CHECK_VALUE(keep_prob > 0 && keep_prob <= 1, op, ": keep_prob must be in (0, 1], got ", keep_prob);
  TORCH_CHECK_VALUE(!(padding_mask.has_value() && padding_mask->defined()), op,
                    ": padding_mask is reserved, as on NPUs: pass None; give padded batches as TND with "
                    "actual_seq_qlen / actual_seq_kvlen");
  const std::string softmax(softmax_layout);
  TORCH_CHECK_VALUE(softmax.empty() || softmax == "TND", op, ": softmax_layout must be \"\" or \"TND\", got '",
                    softmax, "'");
  TORCH_CHECK_VALUE(softmax.empty() || x.layout == "TND", op, ": softmax_layout=\"TND\" needs input_layout=\"TND\"");
  const bool qlen = actual_seq_qlen.has_value() && !actual_seq_qlen->empty();
  const bool kvlen = actual_seq_kvlen.has_value() && !actual_seq_kvlen->empty();
  if (x.layout == "TND") {
    TORCH_CHECK_VALUE(qlen && kvlen && actual_seq_qlen->size() == actual_seq_kvlen->size(), op,
                      ": input_layout TND needs actual_seq_qlen and actual_seq_kvlen, the cumulative sequence ends "
                      "of each batch (e.g. [3, 7, 12]), of one length");
    TORCH_CHECK_VALUE(sparse_mode >= 0 && sparse_mode <= 8 && sparse_mode != 5, op,
                      ": with TND, sparse_mode must be in [0, 5) or (5, 8], got ", sparse_mode);
  } else {
    TORCH_CHECK_VALUE(!qlen && !kvlen, op, ": actual_seq_qlen / actual_seq_kvlen are for input_layout TND; got ",
                      x.layout);
    TORCH_CHECK_VALUE(sparse_mode >= 0 && sparse_mode <= 6, op, ": with ", x.layout,
                      ", sparse_mode must be in [0, 6] (7 and 8 are for TND), got ", sparse_mode);
  }
}

// Scores the dropout mask covers: B * N * Sq * Skv, or N * sum(Sq_i * Skv_i) for TND.
int64_t scoreCount(const Dims& x, at::OptionalIntArrayRef qlen, at::OptionalIntArrayRef kvlen) {
  if (x.layout != "TND") return x.b * x.n * x.s0 * x.s1;
  int64_t total = 0, q_prev = 0, kv_prev = 0;
  for (size_t i = 0; i < qlen->size(); ++i) {
    total += ((*qlen)[i] - q_prev) * ((*kvlen)[i] - kv_prev);
    q_prev = (*qlen)[i];
    kv_prev = (*kvlen)[i];
  }
  return total * x.n;
}

at::Tensor genDropMask(const at::Tensor& query, double keep_prob, int64_t seed, int64_t offset, int64_t numels) {
  // The op takes the probability of dropping.
  return dropoutMaskBits(numels, 1.0 - keep_prob, seed, offset, query.options(), query.scalar_type());
}

at::Tensor lastDimContiguous(const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

at::Tensor statsTensor(const Dims& x, const at::Tensor& query) {
  auto opts = query.options().dtype(at::kFloat);
  if (x.layout == "TND") return at::empty({x.t, x.n, kStatsWidth}, opts);
  return at::empty({x.b, x.n, x.s0, kStatsWidth}, opts);
}

const at::Tensor& orUndefined(const std::optional<at::Tensor>& t) {
  static const at::Tensor undefined;
  return t.has_value() ? *t : undefined;
}

}  // namespace

namespace {

// The forward of every npu_fusion_attention form. pse_type 1 adds pse before the scaling (FlashAttentionScore,
// VarLenScore), 0 after it (the V3 / V5 ops, which also take sinks).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, int64_t> forwardCore(
    const char* op, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, double scale, double keep_prob, int64_t pre_tockens,
    int64_t next_tockens, int64_t inner_precise, at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_seq_kvlen, int64_t sparse_mode, c10::string_view softmax_layout,
    const std::optional<at::Tensor>& sink, const std::optional<at::Tensor>& dropout_mask, int64_t seed, int64_t offset,
    int64_t pse_type) {
  const Dims x = dimsOf(op, query, key, value, head_num, input_layout);
  checkArguments(op, x, keep_prob, sparse_mode, actual_seq_qlen, actual_seq_kvlen, padding_mask, softmax_layout);
  const at::Tensor q = lastDimContiguous(query), k = lastDimContiguous(key), v = lastDimContiguous(value);
  const int64_t numels = scoreCount(x, actual_seq_qlen, actual_seq_kvlen);
  at::Tensor drop;
  if (dropout_mask.has_value() && dropout_mask->defined()) {
    drop = *dropout_mask;  // given by the caller; seed and offset pass through
  } else if (keep_prob < 1.0) {
    if (seed == 0 && offset == 0) std::tie(seed, offset) = nextDropoutSeed(query.device().index());
    drop = genDropMask(query, keep_prob, seed, offset, numels);
  }
  at::Tensor out = at::empty(x.out_shape, query.options());
  at::Tensor softmax_max = statsTensor(x, query), softmax_sum = statsTensor(x, query);
  at::Tensor softmax_out = at::empty({0}, query.options());
  const std::string layout = x.layout;
  const auto prefix_n = prefix.value_or(at::IntArrayRef{});
  const bool tnd_stats = std::string(softmax_layout) == "TND";
  const std::string stats_layout = tnd_stats ? "same_as_input" : "";
  const at::Tensor& sink_t = orUndefined(sink);
  TORCH_CHECK_VALUE(pse_type == 0 || pse_type == 1, op, ": pse_type must be 0 (pse added after the scaling) or 1 ",
                    "(before it); 2 and 3 (alibi from slopes) are not supported on the software NPU, got ", pse_type);
  const bool v3 = sink_t.defined() || pse_type != 1;  // the ops that take pse_type and sinks
  if (x.layout == "TND") {
    const auto qlen = *actual_seq_qlen, kvlen = *actual_seq_kvlen;
    if (v3) {
      const at::Tensor none;
      const at::IntArrayRef no_idx{};
      EXEC_NPU_CMD(aclnnFlashAttentionVarLenScoreV5, q, none, k, none, v, orUndefined(pse), drop, orUndefined(padding_mask),
                   orUndefined(atten_mask), sink_t, prefix_n, qlen, kvlen, no_idx, no_idx, scale, keep_prob,
                   pre_tockens, next_tockens, head_num, layout, inner_precise, sparse_mode, pse_type, stats_layout,
                   softmax_max, softmax_sum, softmax_out, out);
    } else if (tnd_stats) {
      EXEC_NPU_CMD(aclnnFlashAttentionVarLenScoreV4, q, k, v, orUndefined(pse), drop, orUndefined(padding_mask),
                   orUndefined(atten_mask), prefix_n, qlen, kvlen, scale, keep_prob, pre_tockens, next_tockens,
                   head_num, layout, inner_precise, sparse_mode, stats_layout, softmax_max, softmax_sum, softmax_out,
                   out);
    } else {
      EXEC_NPU_CMD(aclnnFlashAttentionVarLenScore, q, k, v, orUndefined(pse), drop, orUndefined(padding_mask),
                   orUndefined(atten_mask), prefix_n, qlen, kvlen, scale, keep_prob, pre_tockens, next_tockens,
                   head_num, layout, inner_precise, sparse_mode, softmax_max, softmax_sum, softmax_out, out);
    }
  } else if (v3) {
    const at::IntArrayRef no_idx{};
    EXEC_NPU_CMD(aclnnFlashAttentionScoreV3, q, k, v, orUndefined(pse), drop, orUndefined(padding_mask),
                 orUndefined(atten_mask), sink_t, prefix_n, no_idx, no_idx, scale, keep_prob, pre_tockens,
                 next_tockens, head_num, layout, inner_precise, sparse_mode, pse_type, softmax_max, softmax_sum,
                 softmax_out, out);
  } else {
    EXEC_NPU_CMD(aclnnFlashAttentionScore, q, k, v, orUndefined(pse), drop, orUndefined(padding_mask),
                 orUndefined(atten_mask), prefix_n, scale, keep_prob, pre_tockens, next_tockens, head_num, layout,
                 inner_precise, sparse_mode, softmax_max, softmax_sum, softmax_out, out);
  }
  return {out, softmax_max, softmax_sum, softmax_out, seed, offset, numels};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, int64_t> npu_fusion_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, double scale, double keep_prob, int64_t pre_tockens,
    int64_t next_tockens, int64_t inner_precise, at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_seq_kvlen, int64_t sparse_mode, bool gen_mask_parallel, bool sync,
    c10::string_view softmax_layout, const std::optional<at::Tensor>& sink,
    const std::optional<at::Tensor>& dropout_mask, int64_t seed, int64_t offset) {
  return forwardCore("npu_fusion_attention", query, key, value, head_num, input_layout, pse, padding_mask, atten_mask,
                     scale, keep_prob, pre_tockens, next_tockens, inner_precise, prefix, actual_seq_qlen,
                     actual_seq_kvlen, sparse_mode, softmax_layout, sink, dropout_mask, seed, offset, 1);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, int64_t> npu_fusion_attention_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, double scale, double keep_prob, int64_t pre_tockens,
    int64_t next_tockens, int64_t inner_precise, at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_seq_kvlen, int64_t sparse_mode, bool gen_mask_parallel, bool sync,
    c10::string_view softmax_layout, const std::optional<at::Tensor>& sink,
    const std::optional<at::Tensor>& dropout_mask, int64_t seed, int64_t offset) {
  const char* op = "npu_fusion_attention";
  const Dims x = dimsOf(op, query, key, value, head_num, input_layout);
  checkArguments(op, x, keep_prob, sparse_mode, actual_seq_qlen, actual_seq_kvlen, padding_mask, softmax_layout);
  return {at::empty(x.out_shape, query.options()), statsTensor(x, query), statsTensor(x, query),
          at::empty({0}, query.options()), seed, offset, scoreCount(x, actual_seq_qlen, actual_seq_kvlen)};
}

namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> backwardCore(
    const char* op, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& dy,
    int64_t head_num, c10::string_view input_layout, const std::optional<at::Tensor>& pse,
    const std::optional<at::Tensor>& padding_mask, const std::optional<at::Tensor>& atten_mask,
    const std::optional<at::Tensor>& softmax_max, const std::optional<at::Tensor>& softmax_sum,
    const std::optional<at::Tensor>& softmax_in, const std::optional<at::Tensor>& attention_in, double scale_value,
    double keep_prob, int64_t pre_tockens, int64_t next_tockens, int64_t inner_precise, int64_t seed, int64_t offset,
    at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_kvlen,
    int64_t sparse_mode, c10::string_view softmax_layout, const std::optional<at::Tensor>& sink, int64_t pse_type) {
  const Dims x = dimsOf(op, query, key, value, head_num, input_layout);
  checkArguments(op, x, keep_prob, sparse_mode, actual_seq_qlen, actual_seq_kvlen, padding_mask, softmax_layout);
  // The gradients are laid out as their inputs, so inputs with gaps between rows are packed first.
  const at::Tensor q = query.contiguous(), k = key.contiguous(), v = value.contiguous();
  TORCH_CHECK_VALUE(dy.sizes().vec() == x.out_shape, op, ": dy must have the attention output's shape ",
                    c10::IntArrayRef(x.out_shape), ", got ", dy.sizes());
  const at::Tensor g = dy.contiguous();
  at::Tensor smax = orUndefined(softmax_max), ssum = orUndefined(softmax_sum), out = orUndefined(attention_in);
  if (!smax.defined() || !ssum.defined() || !out.defined()) {
    // Without the forward's statistics, run the forward again (same dropout mask from seed / offset).
    auto fwd = forwardCore(op, q, k, v, head_num, input_layout, pse, padding_mask, atten_mask, scale_value, keep_prob,
                           pre_tockens, next_tockens, inner_precise, prefix, actual_seq_qlen, actual_seq_kvlen,
                           sparse_mode, softmax_layout, sink, std::nullopt, keep_prob < 1.0 ? seed : 0,
                           keep_prob < 1.0 ? offset : 0, pse_type);
    out = std::get<0>(fwd);
    smax = std::get<1>(fwd);
    ssum = std::get<2>(fwd);
  }
  out = out.contiguous();
  at::Tensor drop;
  if (keep_prob < 1.0) {
    drop = genDropMask(query, keep_prob, seed, offset, scoreCount(x, actual_seq_qlen, actual_seq_kvlen));
  }
  at::Tensor dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v);
  const at::Tensor& pse_t = orUndefined(pse);
  const at::Tensor& sink_t = orUndefined(sink);
  at::Tensor dpse = pse_t.defined() ? at::empty_like(pse_t, at::MemoryFormat::Contiguous)
                                    : at::empty({0}, query.options());
  at::Tensor dsink = sink_t.defined() ? at::empty(sink_t.sizes(), sink_t.options().dtype(at::kFloat))
                                      : at::empty({0}, key.options().dtype(at::kFloat));
  const std::string layout = x.layout;
  const auto prefix_n = prefix.value_or(at::IntArrayRef{});
  const bool tnd_stats = std::string(softmax_layout) == "TND";
  const std::string stats_layout = tnd_stats ? "same_as_input" : "";
  const at::Tensor& softmax = orUndefined(softmax_in);
  const bool v3 = sink_t.defined() || pse_type != 1;
  if (x.layout == "TND") {
    const auto qlen = *actual_seq_qlen, kvlen = *actual_seq_kvlen;
    if (v3) {
      const at::Tensor none;
      at::Tensor no_grad = at::empty({0}, query.options());
      const at::IntArrayRef no_idx{};
      EXEC_NPU_CMD(aclnnFlashAttentionUnpaddingScoreGradV5, q, none, k, none, v, g, pse_t, drop,
                   orUndefined(padding_mask), orUndefined(atten_mask), smax, ssum, softmax, out, sink_t, prefix_n,
                   qlen, kvlen, no_idx, no_idx, scale_value, keep_prob, pre_tockens, next_tockens, head_num, layout,
                   inner_precise, sparse_mode, pse_type, stats_layout, dq, no_grad, dk, no_grad, dv, dpse, dsink);
    } else if (tnd_stats) {
      EXEC_NPU_CMD(aclnnFlashAttentionUnpaddingScoreGradV4, q, k, v, g, pse_t, drop, orUndefined(padding_mask),
                   orUndefined(atten_mask), smax, ssum, softmax, out, prefix_n, qlen, kvlen, scale_value, keep_prob,
                   pre_tockens, next_tockens, head_num, layout, inner_precise, sparse_mode, dq, dk, dv, dpse,
                   stats_layout);
    } else {
      EXEC_NPU_CMD(aclnnFlashAttentionUnpaddingScoreGrad, q, k, v, g, pse_t, drop, orUndefined(padding_mask),
                   orUndefined(atten_mask), smax, ssum, softmax, out, prefix_n, qlen, kvlen, scale_value, keep_prob,
                   pre_tockens, next_tockens, head_num, layout, inner_precise, sparse_mode, dq, dk, dv, dpse);
    }
  } else if (v3) {
    const at::IntArrayRef no_idx{};
    EXEC_NPU_CMD(aclnnFlashAttentionScoreGradV3, q, k, v, g, pse_t, drop, orUndefined(padding_mask),
                 orUndefined(atten_mask), smax, ssum, softmax, out, sink_t, prefix_n, no_idx, no_idx, scale_value,
                 keep_prob, pre_tockens, next_tockens, head_num, layout, inner_precise, sparse_mode, pse_type, dq, dk,
                 dv, dpse, dsink);
  } else {
    EXEC_NPU_CMD(aclnnFlashAttentionScoreGrad, q, k, v, g, pse_t, drop, orUndefined(padding_mask),
                 orUndefined(atten_mask), smax, ssum, softmax, out, prefix_n, scale_value, keep_prob, pre_tockens,
                 next_tockens, head_num, layout, inner_precise, sparse_mode, dq, dk, dv, dpse);
  }
  if (!pse_t.defined()) dpse = at::Tensor();
  return {dq, dk, dv, dpse, dsink};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_fusion_attention_grad(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& dy, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, const std::optional<at::Tensor>& softmax_max,
    const std::optional<at::Tensor>& softmax_sum, const std::optional<at::Tensor>& softmax_in,
    const std::optional<at::Tensor>& attention_in, double scale_value, double keep_prob, int64_t pre_tockens,
    int64_t next_tockens, int64_t inner_precise, int64_t seed, int64_t offset, int64_t numels,
    at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_kvlen,
    int64_t sparse_mode, bool gen_mask_parallel, bool sync, c10::string_view softmax_layout,
    const std::optional<at::Tensor>& sink) {
  return backwardCore("npu_fusion_attention_grad", query, key, value, dy, head_num, input_layout, pse, padding_mask,
                      atten_mask, softmax_max, softmax_sum, softmax_in, attention_in, scale_value, keep_prob,
                      pre_tockens, next_tockens, inner_precise, seed, offset, prefix, actual_seq_qlen,
                      actual_seq_kvlen, sparse_mode, softmax_layout, sink, 1);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_fusion_attention_grad_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& dy, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, const std::optional<at::Tensor>& softmax_max,
    const std::optional<at::Tensor>& softmax_sum, const std::optional<at::Tensor>& softmax_in,
    const std::optional<at::Tensor>& attention_in, double scale_value, double keep_prob, int64_t pre_tockens,
    int64_t next_tockens, int64_t inner_precise, int64_t seed, int64_t offset, int64_t numels,
    at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_kvlen,
    int64_t sparse_mode, bool gen_mask_parallel, bool sync, c10::string_view softmax_layout,
    const std::optional<at::Tensor>& sink) {
  const char* op = "npu_fusion_attention_grad";
  const Dims x = dimsOf(op, query, key, value, head_num, input_layout);
  checkArguments(op, x, keep_prob, sparse_mode, actual_seq_qlen, actual_seq_kvlen, padding_mask, softmax_layout);
  const at::Tensor& pse_t = orUndefined(pse);
  const at::Tensor& sink_t = orUndefined(sink);
  at::Tensor dpse = pse_t.defined() ? at::empty_like(pse_t, at::MemoryFormat::Contiguous) : at::Tensor();
  at::Tensor dsink = sink_t.defined() ? at::empty(sink_t.sizes(), sink_t.options().dtype(at::kFloat))
                                      : at::empty({0}, key.options().dtype(at::kFloat));
  return {at::empty(query.sizes(), query.options()), at::empty(key.sizes(), key.options()),
          at::empty(value.sizes(), value.options()), dpse, dsink};
}

}  // namespace at_npu::native

// npu_fusion_attention_v2: rope parts of query / key (their scores add to the main parts'), pse_type.
namespace at_npu::native {
namespace {

bool hiddenLayout(const std::string& layout) { return layout == "BSH" || layout == "SBH"; }

// x and its rope part joined along each head's values.
at::Tensor joinRope(const at::Tensor& x, const std::optional<at::Tensor>& rope, const std::string& layout,
                    int64_t heads) {
  if (!rope.has_value() || !rope->defined()) return x;
  if (!hiddenLayout(layout)) return at::cat({x, *rope}, -1);
  return at::cat({x.unflatten(2, {heads, x.size(2) / heads}), rope->unflatten(2, {heads, rope->size(2) / heads})}, -1)
      .flatten(2);
}

// The gradient of a joined tensor split back into (main, rope) parts of head sizes d and d_rope.
std::pair<at::Tensor, at::Tensor> splitRope(const at::Tensor& g, int64_t d, int64_t d_rope, const std::string& layout,
                                            int64_t heads) {
  if (!hiddenLayout(layout)) {
    return {g.narrow(-1, 0, d).contiguous(), g.narrow(-1, d, d_rope).contiguous()};
  }
  at::Tensor per_head = g.unflatten(2, {heads, d + d_rope});
  return {per_head.narrow(-1, 0, d).flatten(2).contiguous(), per_head.narrow(-1, d, d_rope).flatten(2).contiguous()};
}

int64_t headsOf(const at::Tensor& x, const std::string& layout, int64_t head_size) {
  return hiddenLayout(layout) ? x.size(2) / head_size : (layout == "BNSD" ? x.size(1) : x.size(-2));
}

std::string upper(c10::string_view layout) {
  std::string s(layout);
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, int64_t> npu_fusion_attention_v2(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, const std::optional<at::Tensor>& query_rope,
    const std::optional<at::Tensor>& key_rope, double scale, double keep_prob, int64_t pre_tokens, int64_t next_tokens,
    int64_t inner_precise, at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_seq_kvlen, int64_t sparse_mode, bool gen_mask_parallel, bool sync,
    int64_t pse_type, at::OptionalIntArrayRef q_start_idx, at::OptionalIntArrayRef kv_start_idx,
    c10::string_view softmax_layout, const std::optional<at::Tensor>& sink,
    const std::optional<at::Tensor>& dropout_mask, int64_t seed, int64_t offset) {
  const char* op = "npu_fusion_attention_v2";
  TORCH_CHECK_VALUE(query_rope.has_value() == key_rope.has_value(), op, ": query_rope and key_rope come together");
  const std::string layout = upper(input_layout);
  const at::Tensor q = joinRope(query, query_rope, layout, head_num);
  const int64_t d = hiddenLayout(layout) ? query.size(2) / head_num : query.size(-1);
  const at::Tensor k = joinRope(key, key_rope, layout, headsOf(key, layout, d));
  return forwardCore(op, q, k, value, head_num, input_layout, pse, padding_mask, atten_mask, scale, keep_prob,
                     pre_tokens, next_tokens, inner_precise, prefix, actual_seq_qlen, actual_seq_kvlen, sparse_mode,
                     softmax_layout, sink, dropout_mask, seed, offset, pse_type);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, int64_t> npu_fusion_attention_v2_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, const std::optional<at::Tensor>& query_rope,
    const std::optional<at::Tensor>& key_rope, double scale, double keep_prob, int64_t pre_tokens, int64_t next_tokens,
    int64_t inner_precise, at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_seq_kvlen, int64_t sparse_mode, bool gen_mask_parallel, bool sync,
    int64_t pse_type, at::OptionalIntArrayRef q_start_idx, at::OptionalIntArrayRef kv_start_idx,
    c10::string_view softmax_layout, const std::optional<at::Tensor>& sink,
    const std::optional<at::Tensor>& dropout_mask, int64_t seed, int64_t offset) {
  const std::string layout = upper(input_layout);
  const at::Tensor q = joinRope(query, query_rope, layout, head_num);
  const int64_t d = hiddenLayout(layout) ? query.size(2) / head_num : query.size(-1);
  const at::Tensor k = joinRope(key, key_rope, layout, headsOf(key, layout, d));
  return npu_fusion_attention_meta(q, k, value, head_num, input_layout, pse, padding_mask, atten_mask, scale,
                                   keep_prob, pre_tokens, next_tokens, inner_precise, prefix, actual_seq_qlen,
                                   actual_seq_kvlen, sparse_mode, gen_mask_parallel, sync, softmax_layout, sink,
                                   dropout_mask, seed, offset);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
npu_fusion_attention_grad_v2(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& dy, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, const std::optional<at::Tensor>& softmax_max,
    const std::optional<at::Tensor>& softmax_sum, const std::optional<at::Tensor>& softmax_in,
    const std::optional<at::Tensor>& attention_in, const std::optional<at::Tensor>& query_rope,
    const std::optional<at::Tensor>& key_rope, double scale_value, double keep_prob, int64_t pre_tokens,
    int64_t next_tokens, int64_t inner_precise, int64_t seed, int64_t offset, int64_t numels,
    at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_kvlen,
    int64_t sparse_mode, bool gen_mask_parallel, bool sync, int64_t pse_type, at::OptionalIntArrayRef q_start_idx,
    at::OptionalIntArrayRef kv_start_idx, c10::string_view softmax_layout, const std::optional<at::Tensor>& sink) {
  const char* op = "npu_fusion_attention_grad_v2";
  TORCH_CHECK_VALUE(query_rope.has_value() == key_rope.has_value(), op, ": query_rope and key_rope come together");
  const std::string layout = upper(input_layout);
  const at::Tensor q = joinRope(query, query_rope, layout, head_num);
  const int64_t d = hiddenLayout(layout) ? query.size(2) / head_num : query.size(-1);
  const int64_t kv_heads = headsOf(key, layout, d);
  const at::Tensor k = joinRope(key, key_rope, layout, kv_heads);
  auto [dq, dk, dv, dpse, dsink] =
      backwardCore(op, q, k, value, dy, head_num, input_layout, pse, padding_mask, atten_mask, softmax_max,
                   softmax_sum, softmax_in, attention_in, scale_value, keep_prob, pre_tokens, next_tokens,
                   inner_precise, seed, offset, prefix, actual_seq_qlen, actual_seq_kvlen, sparse_mode, softmax_layout,
                   sink, pse_type);
  at::Tensor dq_rope = at::empty({0}, query.options()), dk_rope = at::empty({0}, key.options());
  if (query_rope.has_value() && query_rope->defined()) {
    const int64_t dr = hiddenLayout(layout) ? query_rope->size(2) / head_num : query_rope->size(-1);
    std::tie(dq, dq_rope) = splitRope(dq, d, dr, layout, head_num);
    std::tie(dk, dk_rope) = splitRope(dk, d, dr, layout, kv_heads);
  }
  return {dq, dk, dv, dpse, dq_rope, dk_rope, dsink};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>
npu_fusion_attention_grad_v2_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& dy, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, const std::optional<at::Tensor>& softmax_max,
    const std::optional<at::Tensor>& softmax_sum, const std::optional<at::Tensor>& softmax_in,
    const std::optional<at::Tensor>& attention_in, const std::optional<at::Tensor>& query_rope,
    const std::optional<at::Tensor>& key_rope, double scale_value, double keep_prob, int64_t pre_tokens,
    int64_t next_tokens, int64_t inner_precise, int64_t seed, int64_t offset, int64_t numels,
    at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_kvlen,
    int64_t sparse_mode, bool gen_mask_parallel, bool sync, int64_t pse_type, at::OptionalIntArrayRef q_start_idx,
    at::OptionalIntArrayRef kv_start_idx, c10::string_view softmax_layout, const std::optional<at::Tensor>& sink) {
  const bool rope = query_rope.has_value() && query_rope->defined();
  at::Tensor dpse = pse.has_value() && pse->defined() ? at::empty_like(*pse, at::MemoryFormat::Contiguous) : at::Tensor();
  at::Tensor dsink = sink.has_value() && sink->defined() ? at::empty(sink->sizes(), sink->options().dtype(at::kFloat))
                                                         : at::empty({0}, key.options().dtype(at::kFloat));
  return {at::empty(query.sizes(), query.options()), at::empty(key.sizes(), key.options()),
          at::empty(value.sizes(), value.options()), dpse,
          rope ? at::empty(query_rope->sizes(), query_rope->options()) : at::empty({0}, query.options()),
          rope ? at::empty(key_rope->sizes(), key_rope->options()) : at::empty({0}, key.options()), dsink};
}

// npu_fusion_attention_v3: sequence lengths as host tensors, seed / offset returned as tensors (graph capture).
namespace {

std::optional<std::vector<int64_t>> lengthsOf(const std::optional<at::Tensor>& t, const char* what) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  TORCH_CHECK_VALUE(t->device().is_cpu() && t->dim() == 1 && !at::isFloatingType(t->scalar_type()),
                    "npu_fusion_attention_v3: ", what, " must be a 1-D integer CPU tensor, got ", t->sizes(), " on ",
                    t->device());
  const at::Tensor l = t->to(at::kLong).contiguous();
  return std::vector<int64_t>(l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel());
}

at::OptionalIntArrayRef asRef(const std::optional<std::vector<int64_t>>& v) {
  return v.has_value() ? at::OptionalIntArrayRef(*v) : std::nullopt;
}

int64_t scalarOf(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() && t->numel() > 0 ? t->to(at::kCPU).to(at::kLong).flatten()[0].item<int64_t>()
                                                         : 0;
}

at::Tensor hostScalar(int64_t v) { return at::full({1}, v, at::TensorOptions().dtype(at::kLong)); }

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_fusion_attention_v3(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, double scale, double keep_prob, int64_t pre_tockens,
    int64_t next_tockens, int64_t inner_precise, at::OptionalIntArrayRef prefix,
    const std::optional<at::Tensor>& actual_seq_qlen, const std::optional<at::Tensor>& actual_seq_kvlen,
    int64_t sparse_mode, bool gen_mask_parallel, bool sync, c10::string_view softmax_layout,
    const std::optional<at::Tensor>& sink) {
  const auto ql = lengthsOf(actual_seq_qlen, "actual_seq_qlen"), kl = lengthsOf(actual_seq_kvlen, "actual_seq_kvlen");
  auto [out, smax, ssum, sout, seed, offset, numels] =
      forwardCore("npu_fusion_attention_v3", query, key, value, head_num, input_layout, pse, padding_mask, atten_mask,
                  scale, keep_prob, pre_tockens, next_tockens, inner_precise, prefix, asRef(ql), asRef(kl),
                  sparse_mode, softmax_layout, sink, std::nullopt, 0, 0, 1);
  return {out, smax, ssum, sout, hostScalar(seed), hostScalar(offset)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_fusion_attention_v3_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, double scale, double keep_prob, int64_t pre_tockens,
    int64_t next_tockens, int64_t inner_precise, at::OptionalIntArrayRef prefix,
    const std::optional<at::Tensor>& actual_seq_qlen, const std::optional<at::Tensor>& actual_seq_kvlen,
    int64_t sparse_mode, bool gen_mask_parallel, bool sync, c10::string_view softmax_layout,
    const std::optional<at::Tensor>& sink) {
  const Dims x = dimsOf("npu_fusion_attention_v3", query, key, value, head_num, input_layout);
  return {at::empty(x.out_shape, query.options()), statsTensor(x, query), statsTensor(x, query),
          at::empty({0}, query.options()), at::empty({1}, at::TensorOptions().dtype(at::kLong)),
          at::empty({1}, at::TensorOptions().dtype(at::kLong))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_fusion_attention_grad_v3(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& dy, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, const std::optional<at::Tensor>& softmax_max,
    const std::optional<at::Tensor>& softmax_sum, const std::optional<at::Tensor>& softmax_in,
    const std::optional<at::Tensor>& attention_in, double scale_value, double keep_prob, int64_t pre_tockens,
    int64_t next_tockens, int64_t inner_precise, const std::optional<at::Tensor>& seed,
    const std::optional<at::Tensor>& offset, at::OptionalIntArrayRef prefix,
    const std::optional<at::Tensor>& actual_seq_qlen, const std::optional<at::Tensor>& actual_seq_kvlen,
    int64_t sparse_mode, bool gen_mask_parallel, bool sync, c10::string_view softmax_layout,
    const std::optional<at::Tensor>& sink) {
  const auto ql = lengthsOf(actual_seq_qlen, "actual_seq_qlen"), kl = lengthsOf(actual_seq_kvlen, "actual_seq_kvlen");
  return backwardCore("npu_fusion_attention_grad_v3", query, key, value, dy, head_num, input_layout, pse, padding_mask,
                      atten_mask, softmax_max, softmax_sum, softmax_in, attention_in, scale_value, keep_prob,
                      pre_tockens, next_tockens, inner_precise, scalarOf(seed), scalarOf(offset), prefix, asRef(ql),
                      asRef(kl), sparse_mode, softmax_layout, sink, 1);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_fusion_attention_grad_v3_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& dy, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, const std::optional<at::Tensor>& softmax_max,
    const std::optional<at::Tensor>& softmax_sum, const std::optional<at::Tensor>& softmax_in,
    const std::optional<at::Tensor>& attention_in, double scale_value, double keep_prob, int64_t pre_tockens,
    int64_t next_tockens, int64_t inner_precise, const std::optional<at::Tensor>& seed,
    const std::optional<at::Tensor>& offset, at::OptionalIntArrayRef prefix,
    const std::optional<at::Tensor>& actual_seq_qlen, const std::optional<at::Tensor>& actual_seq_kvlen,
    int64_t sparse_mode, bool gen_mask_parallel, bool sync, c10::string_view softmax_layout,
    const std::optional<at::Tensor>& sink) {
  return npu_fusion_attention_grad_meta(query, key, value, dy, head_num, input_layout, pse, padding_mask, atten_mask,
                                        softmax_max, softmax_sum, softmax_in, attention_in, scale_value, keep_prob,
                                        pre_tockens, next_tockens, inner_precise, 0, 0, 0, prefix, std::nullopt,
                                        std::nullopt, sparse_mode, gen_mask_parallel, sync, softmax_layout, sink);
}

}  // namespace at_npu::native

// _npu_dropout_gen_mask.Tensor: the dropout mask bits of `size` scores (1 = keep, each dropped with
// probability p), a function of (seed, offset): what npu_fusion_attention's dropout_mask takes.
namespace at_npu::native {

at::Tensor _npu_dropout_gen_mask_Tensor(const at::Tensor& self, at::IntArrayRef size, double p, int64_t seed,
                                        int64_t offset, std::optional<bool> parallel, std::optional<bool> sync) {
  TORCH_CHECK_VALUE(p >= 0 && p <= 1, "_npu_dropout_gen_mask: p (the probability of dropping) must be in [0, 1], got ",
                    p);
  return dropoutMaskBits(c10::multiply_integers(size), p, seed, offset, self.options(), self.scalar_type());
}

at::Tensor _npu_dropout_gen_mask_Tensor_meta(const at::Tensor& self, at::IntArrayRef size, double p, int64_t seed,
                                             int64_t offset, std::optional<bool> parallel, std::optional<bool> sync) {
  return at::empty({dropoutMaskBytes(c10::multiply_integers(size))}, self.options().dtype(at::kByte));
}

}  // namespace at_npu::native
