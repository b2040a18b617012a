// AttentionUpdateKernelNpu.cpp - npu_attention_update: merges the partial attention outputs of SP (sequence
// parallel) ranks through their log-sum-exps, O = sum_i O_i exp(lse_i - lse_m), on the aclnnAttentionUpdate device
// op; lse_m is the second output (meaningful with update_type 1, as in torch_npu). Inference only.
#include <ATen/ops/empty.h>

#include <tuple>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

void checkAttentionUpdate(at::TensorList lse, at::TensorList local_out, int64_t update_type) {
  const char* op = "npu_attention_update";
  TORCH_CHECK_VALUE(update_type == 0 || update_type == 1, op, ": update_type must be 0 (out only) or 1 (out and "
                    "lse_out), got ", update_type);
  TORCH_CHECK_VALUE(!lse.empty() && lse.size() == local_out.size(), op, ": lse and local_out must be non-empty lists "
                    "of one length (the SP degree), got ", lse.size(), " and ", local_out.size());
  const at::Tensor& lse0 = lse[0];
  const at::Tensor& out0 = local_out[0];
  TORCH_CHECK_VALUE(out0.dim() == lse0.dim() + 1 && out0.sizes().slice(0, lse0.dim()) == lse0.sizes(), op,
                    ": local_out entries must be lse's shape plus head_dim, e.g. (N,) and (N, head_dim), got ",
                    lse0.sizes(), " and ", out0.sizes());
  TORCH_CHECK_TYPE(out0.scalar_type() == at::kFloat || out0.scalar_type() == at::kHalf ||
                       out0.scalar_type() == at::kBFloat16,
                   op, ": local_out must be float32, float16 or bfloat16, got ", out0.scalar_type());
  for (size_t i = 0; i < lse.size(); ++i) {
    TORCH_CHECK_TYPE(lse[i].scalar_type() == at::kFloat, op, ": lse[", i, "] must be float32, got ",
                     lse[i].scalar_type());
    TORCH_CHECK_TYPE(local_out[i].scalar_type() == out0.scalar_type(), op, ": local_out entries must share one dtype");
    TORCH_CHECK_VALUE(lse[i].sizes() == lse0.sizes() && local_out[i].sizes() == out0.sizes(), op, ": entry ", i,
                      " has shapes ", lse[i].sizes(), " and ", local_out[i].sizes(), "; expected ", lse0.sizes(),
                      " and ", out0.sizes());
  }
}

std::tuple<at::Tensor, at::Tensor> attentionUpdateOutputs(at::TensorList lse, at::TensorList local_out) {
  return {at::empty(local_out[0].sizes(), local_out[0].options()), at::empty(lse[0].sizes(), lse[0].options())};
}

}  // namespace

// lse_out is always allocated and filled (torch_npu leaves it undefined with update_type 0; its Meta kernel
// promises a tensor of lse's shape, which is what both forms return here).
std::tuple<at::Tensor, at::Tensor> npu_attention_update(at::TensorList lse, at::TensorList local_out,
                                                        int64_t update_type) {
  checkAttentionUpdate(lse, local_out, update_type);
  auto [out, lse_out] = attentionUpdateOutputs(lse, local_out);
  EXEC_NPU_CMD(aclnnAttentionUpdate, lse, local_out, update_type, out, lse_out);
  return {out, lse_out};
}

std::tuple<at::Tensor, at::Tensor> npu_attention_update_meta(at::TensorList lse, at::TensorList local_out,
                                                             int64_t update_type) {
  checkAttentionUpdate(lse, local_out, update_type);
  return attentionUpdateOutputs(lse, local_out);
}

}  // namespace at_npu::native
