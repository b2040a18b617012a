// DequantBiasKernelNpu.cpp - npu_dequant_bias: int32 matmul accumulators dequantised by per-channel weight scales,
// optional per-token activation scales and an optional bias, to float16 / bfloat16, on aclnnDequantBias.
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kDequantBiasOp = "npu_dequant_bias";
// aclDataType codes the device op takes for its output type.
constexpr int64_t kAclFloat16 = 1;
constexpr int64_t kAclBFloat16 = 27;

at::ScalarType dequantOutputType(std::optional<at::ScalarType> output_dtype) {
  const at::ScalarType type = output_dtype.value_or(at::kHalf);
  TORCH_CHECK_VALUE(type == at::kHalf || type == at::kBFloat16, kDequantBiasOp,
                    ": output_dtype must be torch.float16 or torch.bfloat16, got ", type);
  return type;
}

at::Tensor dequantBiasOutput(const at::Tensor& x, const at::Tensor& weight_scale,
                             std::optional<at::ScalarType> output_dtype) {
  TORCH_CHECK_TYPE(x.scalar_type() == at::kInt, kDequantBiasOp, ": x must be int32 (matmul accumulators), got ",
                   x.scalar_type());
  TORCH_CHECK_VALUE(x.dim() == 2, kDequantBiasOp, ": x must be 2-D (m, n), got ", x.sizes());
  TORCH_CHECK_VALUE(weight_scale.dim() == 1 && weight_scale.size(0) == x.size(1), kDequantBiasOp,
                    ": weight_scale must have shape (n,) = (", x.size(1), ",), got ", weight_scale.sizes());
  return at::empty(x.sizes(), x.options().dtype(dequantOutputType(output_dtype)));
}

}  // namespace

at::Tensor npu_dequant_bias(const at::Tensor& x, const at::Tensor& weight_scale,
                            const std::optional<at::Tensor>& activation_scale, const std::optional<at::Tensor>& bias,
                            std::optional<at::ScalarType> output_dtype) {
  at::Tensor out = dequantBiasOutput(x, weight_scale, output_dtype);
  const int64_t out_code = out.scalar_type() == at::kBFloat16 ? kAclBFloat16 : kAclFloat16;
  EXEC_NPU_CMD(aclnnDequantBias, x, weight_scale, activation_scale, bias, out_code, out);
  return out;
}

at::Tensor npu_dequant_bias_meta(const at::Tensor& x, const at::Tensor& weight_scale,
                                 const std::optional<at::Tensor>& activation_scale,
                                 const std::optional<at::Tensor>& bias, std::optional<at::ScalarType> output_dtype) {
  return dequantBiasOutput(x, weight_scale, output_dtype);
}

}  // namespace at_npu::native
