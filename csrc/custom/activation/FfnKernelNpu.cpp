// FfnKernelNpu.cpp - npu_ffn: a transformer feed-forward block (act(x W1 + b1) W2 + b2), per expert with
// expert_tokens (counts) or expert_tokens_index (cumulative ends), on the aclnnFFNV2 device op.
#include <ATen/ops/empty.h>

#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

std::vector<int64_t> outputShape(const at::Tensor& x, const at::Tensor& weight1, const at::Tensor& weight2) {
  TORCH_CHECK_VALUE(x.dim() >= 2 && x.dim() <= 8, "npu_ffn: x must have 2 to 8 dimensions, got ", x.sizes());
  TORCH_CHECK_VALUE(weight1.dim() >= 2 && x.size(-1) == weight1.size(-2), "npu_ffn: the k of x (", x.size(-1),
                    ") and weight1 (", weight1.sizes(), ") must be equal");
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight2.size(-1);
  return shape;
}

}  // namespace

at::Tensor npu_ffn(const at::Tensor& x, const at::Tensor& weight1, const at::Tensor& weight2,
                   c10::string_view activation, at::OptionalIntArrayRef expert_tokens,
                   at::OptionalIntArrayRef expert_tokens_index, const std::optional<at::Tensor>& bias1,
                   const std::optional<at::Tensor>& bias2, const std::optional<at::Tensor>& scale,
                   const std::optional<at::Tensor>& offset, const std::optional<at::Tensor>& deq_scale1,
                   const std::optional<at::Tensor>& deq_scale2, const std::optional<at::Tensor>& antiquant_scale1,
                   const std::optional<at::Tensor>& antiquant_scale2, const std::optional<at::Tensor>& antiquant_offset1,
                   const std::optional<at::Tensor>& antiquant_offset2, std::optional<int64_t> inner_precise,
                   std::optional<at::ScalarType> output_dtype) {
  TORCH_CHECK_VALUE(!(expert_tokens.has_value() && expert_tokens_index.has_value()),
                    "npu_ffn: give expert_tokens or expert_tokens_index, not both");
  at::Tensor out = at::empty(outputShape(x, weight1, weight2), x.options());
  const std::vector<int64_t> tokens = expert_tokens.has_value()         ? expert_tokens->vec()
                                      : expert_tokens_index.has_value() ? expert_tokens_index->vec()
                                                                        : std::vector<int64_t>{};
  const std::string act(activation);
  const int64_t precise = inner_precise.value_or(0);
  const bool index_flag = expert_tokens_index.has_value();
  EXEC_NPU_CMD(aclnnFFNV2, x, weight1, weight2, at::IntArrayRef(tokens), bias1, bias2, scale, offset, deq_scale1,
               deq_scale2, antiquant_scale1, antiquant_scale2, antiquant_offset1, antiquant_offset2, act, precise,
               index_flag, out);
  return out;
}

at::Tensor npu_ffn_meta(const at::Tensor& x, const at::Tensor& weight1, const at::Tensor& weight2,
                        c10::string_view activation, at::OptionalIntArrayRef expert_tokens,
                        at::OptionalIntArrayRef expert_tokens_index, const std::optional<at::Tensor>& bias1,
                        const std::optional<at::Tensor>& bias2, const std::optional<at::Tensor>& scale,
                        const std::optional<at::Tensor>& offset, const std::optional<at::Tensor>& deq_scale1,
                        const std::optional<at::Tensor>& deq_scale2, const std::optional<at::Tensor>& antiquant_scale1,
                        const std::optional<at::Tensor>& antiquant_scale2,
                        const std::optional<at::Tensor>& antiquant_offset1,
                        const std::optional<at::Tensor>& antiquant_offset2, std::optional<int64_t> inner_precise,
                        std::optional<at::ScalarType> output_dtype) {
  return at::empty(outputShape(x, weight1, weight2), x.options());
}

}  // namespace at_npu::native
