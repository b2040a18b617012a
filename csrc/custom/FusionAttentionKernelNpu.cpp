// FusionAttentionKernelNpu.cpp - npu_fusion_attention and its grad: softmax(q k^T * scale + pse, masked)
// with optional dropout, times v, in layouts BNSD / BSND / BSH / SBH. Dropout masks come from a seed drawn
// from the npu generator, so the backward regenerates exactly the forward's mask.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sum.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/core/NPUGenerator.h"
#include "csrc/custom/CustomOpUtils.h"

namespace at_npu::native {
namespace {

constexpr int64_t kDefaultTockens = 2147483647;
constexpr int64_t kStatsWidth = 8;  // torch_npu returns softmax max / sum broadcast over 8 lanes

struct Layout {
  std::string name;
  int64_t head_num;
  int64_t head_dim;

  // (B, N, S, D) view of a tensor in this layout.
  at::Tensor toBnsd(const at::Tensor& t) const {
    if (name == "BNSD") return t;
    if (name == "BSND") return t.permute({0, 2, 1, 3});
    if (name == "BSH") return t.unflatten(2, {t.size(2) / head_dim, head_dim}).permute({0, 2, 1, 3});
    return t.unflatten(2, {t.size(2) / head_dim, head_dim}).permute({1, 2, 0, 3});  // SBH
  }
  at::Tensor fromBnsd(const at::Tensor& t) const {
    if (name == "BNSD") return t.contiguous();
    if (name == "BSND") return t.permute({0, 2, 1, 3}).contiguous();
    if (name == "BSH") return t.permute({0, 2, 1, 3}).flatten(2).contiguous();
    return t.permute({2, 0, 1, 3}).flatten(2).contiguous();  // SBH
  }
};

Layout makeLayout(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
                  c10::string_view input_layout) {
  std::string name(input_layout);
  TORCH_CHECK_VALUE(name == "BNSD" || name == "BSND" || name == "BSH" || name == "SBH",
                    "npu_fusion_attention: input_layout must be BNSD, BSND, BSH or SBH, got '", name, "'");
  const int64_t want_dim = (name == "BSH" || name == "SBH") ? 3 : 4;
  for (const at::Tensor* t : {&query, &key, &value}) {
    TORCH_CHECK_VALUE(t->dim() == want_dim, "npu_fusion_attention: layout ", name, " needs ", want_dim,
                      "-D query/key/value, got shape ", t->sizes());
  }
  TORCH_CHECK_VALUE(head_num > 0, "npu_fusion_attention: head_num must be positive, got ", head_num);
  int64_t head_dim = query.size(-1);
  if (want_dim == 3) {
    TORCH_CHECK_VALUE(query.size(2) % head_num == 0, "npu_fusion_attention: hidden size ", query.size(2),
                      " is not divisible by head_num ", head_num);
    head_dim = query.size(2) / head_num;
  } else {
    const int64_t n = name == "BNSD" ? query.size(1) : query.size(2);
    TORCH_CHECK_VALUE(n == head_num, "npu_fusion_attention: query has ", n, " heads but head_num is ", head_num);
  }
  return {name, head_num, head_dim};
}

void checkUnsupported(const std::optional<at::Tensor>& padding_mask, at::OptionalIntArrayRef prefix,
                      at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_kvlen,
                      int64_t sparse_mode, double keep_prob) {
  TORCH_CHECK_VALUE(!(padding_mask.has_value() && padding_mask->defined()),
                    "npu_fusion_attention: padding_mask is not supported (as in torch_npu); pass atten_mask");
  TORCH_CHECK_VALUE(!prefix.has_value() && !actual_seq_qlen.has_value() && !actual_seq_kvlen.has_value(),
                    "npu_fusion_attention: prefix / actual_seq_qlen / actual_seq_kvlen (variable-length TND "
                    "batches) are not supported yet; pad the batch and pass atten_mask");
  TORCH_CHECK_VALUE(sparse_mode == 0, "npu_fusion_attention: only sparse_mode=0 (atten_mask as given, plus "
                    "pre_tockens / next_tockens bands) is supported, got ", sparse_mode);
  TORCH_CHECK_VALUE(keep_prob > 0 && keep_prob <= 1, "npu_fusion_attention: keep_prob must be in (0, 1], got ",
                    keep_prob);
}

struct Attention {
  at::Tensor out;          // (B, N, Sq, D), float32
  at::Tensor row_max;      // (B, N, Sq, 1)
  at::Tensor row_sum;      // (B, N, Sq, 1)
};

// The attention itself on (B, N, S, D) float32 tensors; `drop` is the keep mask (or undefined).
Attention attend(at::Tensor q, at::Tensor k, at::Tensor v, const at::Tensor& pse, const at::Tensor& masked,
                 double scale, const at::Tensor& drop, double keep_prob) {
  const int64_t n = q.size(1), n_kv = k.size(1);
  TORCH_CHECK_VALUE(n_kv > 0 && n % n_kv == 0 && v.size(1) == n_kv, "npu_fusion_attention: key/value heads (",
                    n_kv, ") must divide query heads (", n, ")");
  if (n_kv != n) {  // grouped-query attention: each key/value head serves n / n_kv query heads
    k = k.repeat_interleave(n / n_kv, 1);
    v = v.repeat_interleave(n / n_kv, 1);
  }
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  if (pse.defined()) scores = scores + pse.to(at::kFloat);
  if (masked.defined()) scores = scores.masked_fill(masked, -1e30);
  at::Tensor row_max = at::amax(scores, {-1}, /*keepdim=*/true);
  at::Tensor e = at::exp(scores - row_max);
  at::Tensor row_sum = at::sum(e, {-1}, /*keepdim=*/true);
  at::Tensor probs = e / row_sum;
  if (drop.defined()) probs = probs * drop / keep_prob;
  return {at::matmul(probs, v), row_max, row_sum};
}

// Positions masked out: atten_mask (True / 1 = masked) and the pre/next token band.
at::Tensor maskFor(const std::optional<at::Tensor>& atten_mask, int64_t sq, int64_t skv, int64_t pre_tockens,
                   int64_t next_tockens, const at::TensorOptions& opts) {
  at::Tensor masked;
  if (atten_mask.has_value() && atten_mask->defined()) masked = atten_mask->to(at::kBool);
  if (pre_tockens < skv || next_tockens < skv) {
    at::Tensor i = at::arange(sq, opts.dtype(at::kLong)).view({-1, 1});
    at::Tensor j = at::arange(skv, opts.dtype(at::kLong)).view({1, -1});
    at::Tensor band = (j > i + next_tockens) | (j < i - pre_tockens);
    masked = masked.defined() ? (masked | band) : band;
  }
  return masked;
}

at::Tensor dropMask(int64_t seed, at::IntArrayRef shape, const at::TensorOptions& opts, double keep_prob) {
  if (keep_prob >= 1.0) return at::Tensor();
  // Drawn on the host from the seed alone: the same seed gives the same mask in forward and backward.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  at::Tensor m = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  m.bernoulli_(keep_prob, gen);
  return m.to(opts.device());
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, int64_t> npu_fusion_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, double scale, double keep_prob, int64_t pre_tockens,
    int64_t next_tockens, int64_t inner_precise, at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_seq_kvlen, int64_t sparse_mode, bool gen_mask_parallel, bool sync) {
  checkUnsupported(padding_mask, prefix, actual_seq_qlen, actual_seq_kvlen, sparse_mode, keep_prob);
  Layout layout = makeLayout(query, key, value, head_num, input_layout);
  at::Tensor q = layout.toBnsd(query).to(at::kFloat), k = layout.toBnsd(key).to(at::kFloat);
  at::Tensor v = layout.toBnsd(value).to(at::kFloat);
  const int64_t b = q.size(0), n = q.size(1), sq = q.size(2), skv = k.size(2);
  int64_t seed = 0, numels = 0;
  if (keep_prob < 1.0) {
    at::Generator engine = c10_npu::launchEngineFor(std::nullopt, query.device().index());
    seed = static_cast<int64_t>(engine.current_seed() & 0x7fffffffffffffffULL);
    numels = b * n * sq * skv;
  }
  at::Tensor drop = dropMask(seed, {b, n, sq, skv}, query.options(), keep_prob);
  at::Tensor masked = maskFor(atten_mask, sq, skv, pre_tockens, next_tockens, query.options());
  Attention a = attend(q, k, v, pse.value_or(at::Tensor()), masked, scale, drop, keep_prob);
  at::Tensor out = layout.fromBnsd(a.out).to(query.scalar_type());
  at::Tensor softmax_max = a.row_max.expand({b, n, sq, kStatsWidth}).contiguous();
  at::Tensor softmax_sum = a.row_sum.expand({b, n, sq, kStatsWidth}).contiguous();
  at::Tensor softmax_out = at::empty({0}, query.options());
  return {out, softmax_max, softmax_sum, softmax_out, seed, 0, numels};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, int64_t> npu_fusion_attention_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, double scale, double keep_prob, int64_t pre_tockens,
    int64_t next_tockens, int64_t inner_precise, at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen,
    at::OptionalIntArrayRef actual_seq_kvlen, int64_t sparse_mode, bool gen_mask_parallel, bool sync) {
  checkUnsupported(padding_mask, prefix, actual_seq_qlen, actual_seq_kvlen, sparse_mode, keep_prob);
  Layout layout = makeLayout(query, key, value, head_num, input_layout);
  at::Tensor q = layout.toBnsd(query);
  auto stats = query.options().dtype(at::kFloat);
  return {at::empty_like(query, at::MemoryFormat::Contiguous),
          at::empty({q.size(0), q.size(1), q.size(2), kStatsWidth}, stats),
          at::empty({q.size(0), q.size(1), q.size(2), kStatsWidth}, stats), at::empty({0}, query.options()), 0, 0,
          0};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_fusion_attention_grad(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& dy, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, const std::optional<at::Tensor>& softmax_max,
    const std::optional<at::Tensor>& softmax_sum, const std::optional<at::Tensor>& softmax_in,
    const std::optional<at::Tensor>& attention_in, double scale_value, double keep_prob, int64_t pre_tockens,
    int64_t next_tockens, int64_t inner_precise, int64_t seed, int64_t offset, int64_t numels,
    at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_kvlen,
    int64_t sparse_mode, bool gen_mask_parallel, bool sync) {
  checkUnsupported(padding_mask, prefix, actual_seq_qlen, actual_seq_kvlen, sparse_mode, keep_prob);
  Layout layout = makeLayout(query, key, value, head_num, input_layout);
  const int64_t b = layout.toBnsd(query).size(0), n = layout.toBnsd(query).size(1);
  const int64_t sq = layout.toBnsd(query).size(2), skv = layout.toBnsd(key).size(2);
  at::Tensor drop = dropMask(seed, {b, n, sq, skv}, query.options(), keep_prob);
  at::Tensor masked = maskFor(atten_mask, sq, skv, pre_tockens, next_tockens, query.options());
  // The derivative of the same composition (recomputes the probabilities, like flash attention).
  auto grads = custom::compositeGrads(
      [&](const std::vector<at::Tensor>& in) {
        Attention a = attend(layout.toBnsd(in[0]).to(at::kFloat), layout.toBnsd(in[1]).to(at::kFloat),
                             layout.toBnsd(in[2]).to(at::kFloat), in[3], masked, scale_value, drop, keep_prob);
        return std::vector<at::Tensor>{layout.fromBnsd(a.out)};
      },
      {query, key, value, pse.value_or(at::Tensor())}, {dy.to(at::kFloat)});
  at::Tensor dpse = grads[3].defined() ? grads[3].to(pse->scalar_type()) : at::Tensor();
  return {grads[0].to(query.scalar_type()), grads[1].to(key.scalar_type()), grads[2].to(value.scalar_type()), dpse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_fusion_attention_grad_meta(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& dy, int64_t head_num,
    c10::string_view input_layout, const std::optional<at::Tensor>& pse, const std::optional<at::Tensor>& padding_mask,
    const std::optional<at::Tensor>& atten_mask, const std::optional<at::Tensor>& softmax_max,
    const std::optional<at::Tensor>& softmax_sum, const std::optional<at::Tensor>& softmax_in,
    const std::optional<at::Tensor>& attention_in, double scale_value, double keep_prob, int64_t pre_tockens,
    int64_t next_tockens, int64_t inner_precise, int64_t seed, int64_t offset, int64_t numels,
    at::OptionalIntArrayRef prefix, at::OptionalIntArrayRef actual_seq_qlen, at::OptionalIntArrayRef actual_seq_kvlen,
    int64_t sparse_mode, bool gen_mask_parallel, bool sync) {
  at::Tensor dpse = pse.has_value() && pse->defined() ? at::empty_like(*pse) : at::Tensor();
  return {at::empty_like(query), at::empty_like(key), at::empty_like(value), dpse};
}

}  // namespace at_npu::native
