// TopKTopPSampleKernelNpu.cpp - npu_top_k_top_p_sample: top-k / top-p / min-p filtering of logits, then a q-race
// (qSample), argmax (None) or multinomial (multiNomial, from the npu generator) pick per row, on
// aclnnTopKTopPSampleV2 (+ aclnnMultinomial and aclnnGather for multiNomial). Inference only.
#include <ATen/ops/empty.h>

#include <string>
#include <tuple>

#include "csrc/core/NPUGenerator.h"
#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_top_k_top_p_sample";

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

bool isFloat(at::ScalarType t) { return t == at::kFloat || t == at::kHalf || t == at::kBFloat16; }

// Checks the arguments; returns the post-sampling mode ("qSample", "multiNomial" or "None"), as it runs: a missing q
// turns qSample into None (argmax), as torch_npu documents.
std::string checkSample(const at::Tensor& logits, const at::Tensor& top_k, const at::Tensor& top_p,
                        const std::optional<at::Tensor>& q, const std::optional<at::Tensor>& min_ps, int64_t ks_max,
                        const std::string& post_sample) {
  TORCH_CHECK_TYPE(isFloat(logits.scalar_type()), kOp, ": logits must be float16, bfloat16 or float32, got ",
                   logits.scalar_type());
  TORCH_CHECK_VALUE(logits.dim() == 2 && logits.numel() > 0, kOp, ": logits must be a non-empty 2-D [batch, "
                    "voc_size] tensor, got ", logits.sizes());
  const int64_t batch = logits.size(0);
  TORCH_CHECK_TYPE(top_k.scalar_type() == at::kInt, kOp, ": top_k must be int32, got ", top_k.scalar_type());
  TORCH_CHECK_VALUE(top_k.dim() == 1 && top_k.size(0) == batch, kOp, ": top_k must be [batch] = [", batch,
                    "]; pass values outside [1, min(voc_size, ks_max)] to skip top-k, got ", top_k.sizes());
  TORCH_CHECK_TYPE(isFloat(top_p.scalar_type()), kOp, ": top_p must be float16, bfloat16 or float32, got ",
                   top_p.scalar_type());
  TORCH_CHECK_VALUE(top_p.dim() == 1 && top_p.size(0) == batch, kOp, ": top_p must be [batch] = [", batch,
                    "]; pass values >= 1 to skip top-p, got ", top_p.sizes());
  if (present(min_ps)) {
    TORCH_CHECK_TYPE(isFloat(min_ps->scalar_type()), kOp, ": min_ps must be floating, got ", min_ps->scalar_type());
    TORCH_CHECK_VALUE(min_ps->dim() == 1 && min_ps->size(0) == batch, kOp, ": min_ps must be [batch] = [", batch,
                      "], got ", min_ps->sizes());
  }
  TORCH_CHECK_VALUE(ks_max >= 1, kOp, ": ks_max must be a positive integer, got ", ks_max);
  TORCH_CHECK_VALUE(post_sample == "qSample" || post_sample == "multiNomial" || post_sample == "None", kOp,
                    ": post_sample must be 'qSample', 'multiNomial' or 'None', got '", post_sample, "'");
  if (post_sample == "multiNomial") {
    // torch_npu draws the multinomial from the generator; q, if given, is its seed table.
    TORCH_CHECK_VALUE(!present(q) || (q->scalar_type() == at::kLong && q->dim() == 2 && q->size(1) == 2 &&
                                      q->size(0) >= 1),
                      kOp, ": with post_sample='multiNomial' q must be None or an int64 [q_rows, 2] seed table");
    return post_sample;
  }
  if (post_sample == "None" || !present(q)) return "None";
  TORCH_CHECK_TYPE(q->scalar_type() == at::kFloat, kOp, ": q must be float32 for qSample, got ", q->scalar_type());
  TORCH_CHECK_VALUE(q->sizes().equals(logits.sizes()), kOp, ": q must have logits' shape ", logits.sizes(),
                    " for qSample, got ", q->sizes());
  return post_sample;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_top_k_top_p_sample(
    const at::Tensor& logits, const at::Tensor& top_k, const at::Tensor& top_p, const std::optional<at::Tensor>& q,
    std::optional<double> eps, std::optional<bool> is_need_logits, std::optional<int64_t> top_k_guess,
    const std::optional<at::Tensor>& min_ps, std::optional<int64_t> ks_max, std::optional<bool> input_is_logits,
    std::optional<c10::string_view> post_sample, std::optional<at::Generator> generator) {
  const int64_t ks = ks_max.value_or(1024);
  const std::string mode = checkSample(logits, top_k, top_p, q, min_ps, ks,
                                       std::string(post_sample.value_or("qSample")));
  const double eps_v = eps.value_or(1e-8);
  const bool need_logits = is_need_logits.value_or(false), is_logits = input_is_logits.value_or(true);
  const int64_t guess = top_k_guess.value_or(32);
  const int64_t batch = logits.size(0), vocab = logits.size(1);
  at::Tensor kept_logits = at::empty({batch, vocab}, logits.options().dtype(at::kFloat));
  at::Tensor logits_idx = at::empty({batch, vocab}, logits.options().dtype(at::kLong));
  at::Tensor sort_masked = at::empty({batch, vocab}, logits.options().dtype(at::kFloat));
  // "None" never reads q, whatever the caller passed.
  const std::optional<at::Tensor> q_used = mode == "qSample" ? q : std::nullopt;
  if (mode == "multiNomial") {
    at::Tensor picked = at::empty({batch, 1}, logits.options().dtype(at::kLong));
    const bool sample_result = true;
    EXEC_NPU_CMD(aclnnTopKTopPSampleV2, logits, top_k, top_p, q, min_ps, eps_v, need_logits, guess, ks, is_logits,
                 sample_result, picked, kept_logits, logits_idx, sort_masked);
    // The draw positions come from the npu generator at launch, then map back to vocabulary indices.
    at::Tensor draws = at::empty({batch, 1}, logits.options().dtype(at::kLong));
    const int64_t num_samples = 1, offset = 0, dim = 1;
    const bool replacement = true;
    const int64_t seed = static_cast<int64_t>(c10_npu::launchSeedFor(generator, logits.device().index()));
    EXEC_NPU_CMD(aclnnMultinomial, sort_masked, num_samples, replacement, seed, offset, draws);
    EXEC_NPU_CMD(aclnnGather, logits_idx, dim, draws, picked);
    return std::make_tuple(picked.reshape({-1}), kept_logits);
  }
  at::Tensor picked = at::empty({batch}, logits.options().dtype(at::kLong));
  const bool sample_result = false;
  EXEC_NPU_CMD(aclnnTopKTopPSampleV2, logits, top_k, top_p, q_used, min_ps, eps_v, need_logits, guess, ks, is_logits,
               sample_result, picked, kept_logits, logits_idx, sort_masked);
  return std::make_tuple(picked, kept_logits);
}

std::tuple<at::Tensor, at::Tensor> npu_top_k_top_p_sample_meta(
    const at::Tensor& logits, const at::Tensor& top_k, const at::Tensor& top_p, const std::optional<at::Tensor>& q,
    std::optional<double> eps, std::optional<bool> is_need_logits, std::optional<int64_t> top_k_guess,
    const std::optional<at::Tensor>& min_ps, std::optional<int64_t> ks_max, std::optional<bool> input_is_logits,
    std::optional<c10::string_view> post_sample, std::optional<at::Generator> generator) {
  checkSample(logits, top_k, top_p, q, min_ps, ks_max.value_or(1024), std::string(post_sample.value_or("qSample")));
  const int64_t batch = logits.size(0), vocab = logits.size(1);
  return std::make_tuple(at::empty({batch}, logits.options().dtype(at::kLong)),
                         at::empty({batch, vocab}, logits.options().dtype(at::kFloat)));
}

}  // namespace at_npu::native
