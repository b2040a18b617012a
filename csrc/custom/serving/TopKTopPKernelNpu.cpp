// TopKTopPKernelNpu.cpp - npu_top_k_top_p: sampling logits filtered by top-k then top-p (filtered values
// become -inf) on the aclnnApplyTopKTopP device op.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

at::Tensor npu_top_k_top_p(const at::Tensor& logits, const std::optional<at::Tensor>& p,
                           const std::optional<at::Tensor>& k) {
  TORCH_CHECK_VALUE(logits.dim() == 2, "npu_top_k_top_p: logits must be 2-D [batch, vocabulary], got ", logits.sizes());
  at::Tensor out = at::empty(logits.sizes(), logits.options());
  EXEC_NPU_CMD(aclnnApplyTopKTopP, logits, p, k, out);
  return out;
}

at::Tensor npu_top_k_top_p_meta(const at::Tensor& logits, const std::optional<at::Tensor>& p,
                                const std::optional<at::Tensor>& k) {
  TORCH_CHECK_VALUE(logits.dim() == 2, "npu_top_k_top_p: logits must be 2-D [batch, vocabulary], got ", logits.sizes());
  return at::empty(logits.sizes(), logits.options());
}

}  // namespace at_npu::native
