// QuantMatmulGeluKernelNpu.cpp - npu_quant_matmul_gelu: int8 (or int4-in-int32) matmul, per-token x per-channel
// dequantisation, optional bias, then GELU (erf or tanh), on aclnnFusedQuantMatmul. Inference only: no gradient.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>

#include <string>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kGeluOp = "npu_quant_matmul_gelu";
constexpr int64_t kInt4PerInt32 = 8;

// The device op names its fused activation with the same strings the Python API takes.
std::string fusedGeluMode(const std::optional<c10::string_view>& approximate) {
  const c10::string_view mode = approximate.value_or("gelu_erf");
  TORCH_CHECK_VALUE(mode == "gelu_erf" || mode == "gelu_tanh", kGeluOp,
                    ": approximate must be 'gelu_erf' or 'gelu_tanh', got '", mode, "'");
  return std::string(mode);
}

// Broadcast batch dimensions, then (m, n); n counts int4 values when x2 is int32-packed.
std::vector<int64_t> geluMatmulShape(const at::Tensor& x1, const at::Tensor& x2) {
  TORCH_CHECK_TYPE(x1.scalar_type() == x2.scalar_type() &&
                       (x1.scalar_type() == at::kChar || x1.scalar_type() == at::kInt),
                   kGeluOp, ": x1 and x2 must both be int8 (A8W8) or both int32 carrying 8 int4 values each (A4W4), "
                   "got ", x1.scalar_type(), " and ", x2.scalar_type());
  TORCH_CHECK_VALUE(x1.dim() >= 2 && x1.dim() <= 6 && x2.dim() >= 2 && x2.dim() <= 6, kGeluOp,
                    ": x1 and x2 must have 2 to 6 dimensions, got ", x1.sizes(), " and ", x2.sizes());
  const int64_t pack = x1.scalar_type() == at::kInt ? kInt4PerInt32 : 1;
  TORCH_CHECK_VALUE(x1.size(-1) * pack == x2.size(-2), kGeluOp, ": x1 ", x1.sizes(), " and x2 ", x2.sizes(),
                    " do not multiply: x1's last dimension (k) must equal x2's second-to-last");
  std::vector<int64_t> shape =
      at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
  shape.push_back(x1.size(-2));
  shape.push_back(x2.size(-1) * pack);
  return shape;
}

// float16 unless the per-channel scale or the bias is bfloat16 (the documented rule).
at::ScalarType geluOutputType(const at::Tensor& x2_scale, const std::optional<at::Tensor>& bias) {
  const bool bf16_bias = bias.has_value() && bias->defined() && bias->scalar_type() == at::kBFloat16;
  return x2_scale.scalar_type() == at::kBFloat16 || bf16_bias ? at::kBFloat16 : at::kHalf;
}

at::Tensor geluMatmulOutput(const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& x2_scale,
                            const std::optional<at::Tensor>& bias) {
  return at::empty(geluMatmulShape(x1, x2), x1.options().dtype(geluOutputType(x2_scale, bias)));
}

}  // namespace

at::Tensor npu_quant_matmul_gelu(const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& x1_scale,
                                 const at::Tensor& x2_scale, const std::optional<at::Tensor>& bias,
                                 std::optional<c10::string_view> approximate) {
  const std::string mode = fusedGeluMode(approximate);
  at::Tensor out = geluMatmulOutput(x1, x2, x2_scale, bias);
  // y_scale, x1/x2/y offsets and the third operand are unused by this fusion: passed as absent tensors.
  const std::optional<at::Tensor> absent;
  const int64_t group_size = 0;
  EXEC_NPU_CMD(aclnnFusedQuantMatmul, x1, x2, x1_scale, x2_scale, absent, absent, absent, absent, bias, absent, mode,
               group_size, out);
  return out;
}

at::Tensor npu_quant_matmul_gelu_meta(const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& x1_scale,
                                      const at::Tensor& x2_scale, const std::optional<at::Tensor>& bias,
                                      std::optional<c10::string_view> approximate) {
  fusedGeluMode(approximate);
  return geluMatmulOutput(x1, x2, x2_scale, bias);
}

}  // namespace at_npu::native
