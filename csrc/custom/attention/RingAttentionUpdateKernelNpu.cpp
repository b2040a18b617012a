// RingAttentionUpdateKernelNpu.cpp - npu_ring_attention_update: merges two partial FlashAttention results (ring /
// context parallel attention) through their softmax max and sum, on the aclnnRingAttentionUpdateV2 device op.
// Layouts: SBH (out (S, B, N * D), stats (B, N, S, 8)) and TND (out (T, N, D), stats (T, N, 8)). Inference only.
#include <ATen/ops/empty.h>

#include <string>
#include <tuple>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr int64_t kStatsLanes = 8;  // FlashAttention keeps each max / sum in 8 equal lanes

bool isAttnFloat(at::ScalarType t) { return t == at::kHalf || t == at::kFloat || t == at::kBFloat16; }

void checkRingAttentionUpdate(const at::Tensor& prev_out, const at::Tensor& prev_max, const at::Tensor& prev_sum,
                              const at::Tensor& cur_out, const at::Tensor& cur_max, const at::Tensor& cur_sum,
                              const std::optional<at::Tensor>& actual_seq_qlen, const std::string& layout,
                              const std::string& softmax_layout) {
  const char* op = "npu_ring_attention_update";
  TORCH_CHECK_VALUE(layout == "SBH" || layout == "TND", op, ": input_layout only supports 'SBH' or 'TND', but got '",
                    layout, "'");
  TORCH_CHECK_VALUE(softmax_layout.empty() || softmax_layout == "SBH" || softmax_layout == "TND", op,
                    ": input_softmax_layout only supports '', 'SBH' or 'TND', but got '", softmax_layout, "'");
  TORCH_CHECK_VALUE(prev_out.sizes() == cur_out.sizes() && prev_out.dim() == 3, op,
                    ": prev_attn_out and cur_attn_out must be 3-D of one shape, got ", prev_out.sizes(), " and ",
                    cur_out.sizes());
  TORCH_CHECK_TYPE(isAttnFloat(prev_out.scalar_type()) && cur_out.scalar_type() == prev_out.scalar_type(), op,
                   ": attn_out dtype only supports float16, float32 or bfloat16 (both the same), got ",
                   prev_out.scalar_type(), " and ", cur_out.scalar_type());
  TORCH_CHECK_VALUE(prev_max.sizes() == prev_sum.sizes() && prev_max.sizes() == cur_max.sizes() &&
                        prev_max.sizes() == cur_sum.sizes(),
                    op, ": softmax tensors must keep the same shape");
  for (const at::Tensor* t : {&prev_max, &prev_sum, &cur_max, &cur_sum}) {
    TORCH_CHECK_TYPE(t->scalar_type() == at::kFloat, op, ": softmax tensors must use float32, got ", t->scalar_type());
  }
  TORCH_CHECK_VALUE(prev_max.dim() > 0 && prev_max.size(-1) == kStatsLanes, op,
                    ": softmax tensors require the last dimension to be 8, got ", prev_max.sizes());
  const bool has_qlen = actual_seq_qlen.has_value() && actual_seq_qlen->defined();
  if (layout == "SBH") {
    TORCH_CHECK_VALUE(prev_max.dim() == 4 && prev_max.size(0) == prev_out.size(1) &&
                          prev_max.size(2) == prev_out.size(0) && prev_out.size(2) % prev_max.size(1) == 0,
                      op, ": with SBH, attn_out (S, B, H) ", prev_out.sizes(), " needs softmax tensors (B, N, S, 8) "
                      "with N dividing H, got ", prev_max.sizes());
  } else {
    TORCH_CHECK_VALUE(has_qlen, op, ": actual_seq_qlen is required when input_layout is 'TND'");
    TORCH_CHECK_VALUE(prev_max.dim() == 3 && prev_max.size(0) == prev_out.size(0) &&
                          prev_max.size(1) == prev_out.size(1),
                      op, ": with TND, attn_out (T, N, D) ", prev_out.sizes(), " needs softmax tensors (T, N, 8), got ",
                      prev_max.sizes());
  }
  if (has_qlen) {
    TORCH_CHECK_TYPE(actual_seq_qlen->scalar_type() == at::kLong, op, ": actual_seq_qlen must use int64 dtype, got ",
                     actual_seq_qlen->scalar_type());
    TORCH_CHECK_VALUE(actual_seq_qlen->dim() == 1, op, ": actual_seq_qlen must be 1-D (cumulative sequence ends), got ",
                      actual_seq_qlen->sizes());
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> ringOutputs(const at::Tensor& prev_out, const at::Tensor& prev_max) {
  return {at::empty(prev_out.sizes(), prev_out.options()), at::empty(prev_max.sizes(), prev_max.options()),
          at::empty(prev_max.sizes(), prev_max.options())};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_ring_attention_update(
    const at::Tensor& prev_attn_out, const at::Tensor& prev_softmax_max, const at::Tensor& prev_softmax_sum,
    const at::Tensor& cur_attn_out, const at::Tensor& cur_softmax_max, const at::Tensor& cur_softmax_sum,
    const std::optional<at::Tensor>& actual_seq_qlen, c10::string_view input_layout,
    c10::string_view input_softmax_layout) {
  const std::string layout(input_layout), softmax_layout(input_softmax_layout);
  checkRingAttentionUpdate(prev_attn_out, prev_softmax_max, prev_softmax_sum, cur_attn_out, cur_softmax_max,
                           cur_softmax_sum, actual_seq_qlen, layout, softmax_layout);
  auto [attn_out, softmax_max, softmax_sum] = ringOutputs(prev_attn_out, prev_softmax_max);
  EXEC_NPU_CMD(aclnnRingAttentionUpdateV2, prev_attn_out, prev_softmax_max, prev_softmax_sum, cur_attn_out,
               cur_softmax_max, cur_softmax_sum, actual_seq_qlen, layout, softmax_layout, attn_out, softmax_max,
               softmax_sum);
  return {attn_out, softmax_max, softmax_sum};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_ring_attention_update_meta(
    const at::Tensor& prev_attn_out, const at::Tensor& prev_softmax_max, const at::Tensor& prev_softmax_sum,
    const at::Tensor& cur_attn_out, const at::Tensor& cur_softmax_max, const at::Tensor& cur_softmax_sum,
    const std::optional<at::Tensor>& actual_seq_qlen, c10::string_view input_layout,
    c10::string_view input_softmax_layout) {
  checkRingAttentionUpdate(prev_attn_out, prev_softmax_max, prev_softmax_sum, cur_attn_out, cur_softmax_max,
                           cur_softmax_sum, actual_seq_qlen, std::string(input_layout),
                           std::string(input_softmax_layout));
  return ringOutputs(prev_attn_out, prev_softmax_max);
}

}  // namespace at_npu::native
