// MaskedSoftmaxRelPosBiasKernelNpu.cpp - npu_masked_softmax_with_rel_pos_bias: Swin Transformer's window-attention
// softmax(scale_value * x + atten_mask + relative_pos_bias) over the last dim, on aclnnMaskedSoftmaxWithRelPosBias.
// torch_npu defines no gradient for it.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool isSoftmaxType(at::ScalarType type) {
  return type == at::kFloat || type == at::kHalf || type == at::kBFloat16;
}

// Checks the documented forms: x (B, W, N, S1, S2) or (B * W, N, S1, S2); atten_mask (W, S1, S2), (W, 1, S1, S2) or
// (1, W, 1, S1, S2); relative_pos_bias (N, S1, S2), (1, N, S1, S2) or (1, 1, N, S1, S2).
void checkRelPosBias(const at::Tensor& x, const std::optional<at::Tensor>& atten_mask,
                     const at::Tensor& relative_pos_bias, int64_t inner_precision_mode) {
  const char* op = "npu_masked_softmax_with_rel_pos_bias";
  TORCH_CHECK_TYPE(isSoftmaxType(x.scalar_type()) && isSoftmaxType(relative_pos_bias.scalar_type()), op,
                   ": x and relative_pos_bias must be float32, float16 or bfloat16, got ", x.scalar_type(), " and ",
                   relative_pos_bias.scalar_type());
  TORCH_CHECK_VALUE(x.dim() == 4 || x.dim() == 5, op, ": x must be (B, W, N, S1, S2) or (B * W, N, S1, S2), got ",
                    x.sizes());
  const int64_t heads = x.size(-3), rows = x.size(-2), cols = x.size(-1);
  const at::Tensor& bias = relative_pos_bias;
  bool bias_ok = bias.dim() >= 3 && bias.dim() <= 5 && bias.size(-3) == heads && bias.size(-2) == rows &&
                 bias.size(-1) == cols;
  for (int64_t d = 0; bias_ok && d < bias.dim() - 3; ++d) bias_ok = bias.size(d) == 1;
  TORCH_CHECK_VALUE(bias_ok, op, ": relative_pos_bias must be (N, S1, S2) = (", heads, ", ", rows, ", ", cols,
                    ") with at most two leading 1s, got ", bias.sizes());
  if (atten_mask.has_value() && atten_mask->defined()) {
    const at::Tensor& mask = *atten_mask;
    TORCH_CHECK_TYPE(isSoftmaxType(mask.scalar_type()), op, ": atten_mask must be float32, float16 or bfloat16, got ",
                     mask.scalar_type());
    const bool mask_ok = mask.dim() >= 3 && mask.dim() <= 5 && mask.size(-2) == rows && mask.size(-1) == cols &&
                         (mask.dim() != 4 || mask.size(1) == 1) &&
                         (mask.dim() != 5 || (mask.size(0) == 1 && mask.size(2) == 1));
    TORCH_CHECK_VALUE(mask_ok, op, ": atten_mask must be (W, S1, S2), (W, 1, S1, S2) or (1, W, 1, S1, S2) with ",
                      "(S1, S2) = (", rows, ", ", cols, "), got ", mask.sizes());
    const int64_t windows = mask.dim() == 5 ? mask.size(1) : mask.size(0);
    const bool windows_ok = windows > 0 && (x.dim() == 5 ? x.size(1) == windows : x.size(0) % windows == 0);
    TORCH_CHECK_VALUE(windows_ok, op, ": atten_mask's ", windows, " windows do not match x ", x.sizes(),
                      " (x's W dim, or a multiple of them in its first dim)");
  }
  TORCH_CHECK_VALUE(inner_precision_mode == 0 || inner_precision_mode == 1, op,
                    ": inner_precision_mode must be 0 or 1, got ", inner_precision_mode);
}

}  // namespace

at::Tensor npu_masked_softmax_with_rel_pos_bias(const at::Tensor& x, const std::optional<at::Tensor>& atten_mask,
                                                const at::Tensor& relative_pos_bias, double scale_value,
                                                int64_t inner_precision_mode) {
  checkRelPosBias(x, atten_mask, relative_pos_bias, inner_precision_mode);
  at::Tensor out = at::empty(x.sizes(), x.options());
  EXEC_NPU_CMD(aclnnMaskedSoftmaxWithRelPosBias, x, atten_mask, relative_pos_bias, scale_value, inner_precision_mode,
               out);
  return out;
}

at::Tensor npu_masked_softmax_with_rel_pos_bias_meta(const at::Tensor& x, const std::optional<at::Tensor>& atten_mask,
                                                     const at::Tensor& relative_pos_bias, double scale_value,
                                                     int64_t inner_precision_mode) {
  checkRelPosBias(x, atten_mask, relative_pos_bias, inner_precision_mode);
  return at::empty(x.sizes(), x.options());
}

}  // namespace at_npu::native
