// QuantMatmulDequantKernelNpu.cpp - npu_quant_matmul_dequant / npu_quant_grouped_matmul_dequant: float activations
// quantized to int8 (per token, dynamically or with a given scale; or per tensor), multiplied by an int8 (n, k)
// weight (one per row group for the grouped op) and dequantised back to the activations' dtype, on
// aclnnQuantMatmulDequant / aclnnQuantGroupedMatmulDequant. Inference only.
#include <ATen/ops/empty.h>

#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kQmmDequantOp = "npu_quant_matmul_dequant";

std::string activationQuantMode(const std::optional<c10::string_view>& quant_mode) {
  const c10::string_view mode = quant_mode.value_or("pertoken");
  TORCH_CHECK_VALUE(mode == "pertoken" || mode == "pertensor", kQmmDequantOp,
                    ": quant_mode must be 'pertoken' or 'pertensor', got '", mode, "'");
  return std::string(mode);
}

// x (m, k) float16 / bfloat16 / float32 and quantized_weight int8 (n, k) -> (m, n) in x's dtype.
at::Tensor qmmDequantOutput(const at::Tensor& x, const at::Tensor& quantized_weight, const at::Tensor& weight_scale) {
  TORCH_CHECK_TYPE(x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kFloat,
                   kQmmDequantOp, ": x must be float16, bfloat16 or float32, got ", x.scalar_type());
  TORCH_CHECK_TYPE(quantized_weight.scalar_type() == at::kChar, kQmmDequantOp, ": quantized_weight must be int8, got ",
                   quantized_weight.scalar_type());
  TORCH_CHECK_VALUE(x.dim() == 2 && quantized_weight.dim() == 2 && x.size(1) == quantized_weight.size(1),
                    kQmmDequantOp, ": x must be (m, k) and quantized_weight (n, k), got ", x.sizes(), " and ",
                    quantized_weight.sizes());
  TORCH_CHECK_VALUE(weight_scale.dim() == 1 && weight_scale.size(0) == quantized_weight.size(0), kQmmDequantOp,
                    ": weight_scale must have shape (n,) = (", quantized_weight.size(0), ",), got ",
                    weight_scale.sizes());
  return at::empty({x.size(0), quantized_weight.size(0)}, x.options());
}

// The grouped form: quantized_weight (groups, n, k), weight_scale (groups, n), group_list (groups,).
at::Tensor groupedDequantOutput(const at::Tensor& x, const at::Tensor& quantized_weight,
                                const at::Tensor& weight_scale, const at::Tensor& group_list) {
  const char* op = "npu_quant_grouped_matmul_dequant";
  TORCH_CHECK_TYPE(x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kFloat,
                   op, ": x must be float16, bfloat16 or float32, got ", x.scalar_type());
  TORCH_CHECK_TYPE(quantized_weight.scalar_type() == at::kChar, op, ": quantized_weight must be int8, got ",
                   quantized_weight.scalar_type());
  TORCH_CHECK_TYPE(group_list.scalar_type() == at::kLong || group_list.scalar_type() == at::kInt, op,
                   ": group_list must be int64, got ", group_list.scalar_type());
  TORCH_CHECK_VALUE(x.dim() == 2 && quantized_weight.dim() == 3 && x.size(1) == quantized_weight.size(2), op,
                    ": x must be (m, k) and quantized_weight (groups, n, k), got ", x.sizes(), " and ",
                    quantized_weight.sizes());
  const int64_t groups = quantized_weight.size(0), n = quantized_weight.size(1);
  TORCH_CHECK_VALUE(weight_scale.dim() == 2 && weight_scale.size(0) == groups && weight_scale.size(1) == n, op,
                    ": weight_scale must have shape (groups, n) = (", groups, ", ", n, "), got ",
                    weight_scale.sizes());
  TORCH_CHECK_VALUE(group_list.dim() == 1 && group_list.size(0) == groups, op,
                    ": group_list must have one cumulative end row per group (", groups, "), got ",
                    group_list.sizes());
  return at::empty({x.size(0), n}, x.options());
}

}  // namespace

at::Tensor npu_quant_matmul_dequant(const at::Tensor& x, const at::Tensor& quantized_weight,
                                    const at::Tensor& weight_scale, const std::optional<at::Tensor>& bias,
                                    const std::optional<at::Tensor>& x_scale,
                                    const std::optional<at::Tensor>& x_offset,
                                    const std::optional<at::Tensor>& smooth_scale,
                                    std::optional<c10::string_view> quant_mode) {
  const std::string mode = activationQuantMode(quant_mode);
  at::Tensor out = qmmDequantOutput(x, quantized_weight, weight_scale);
  const bool transpose_weight = true;  // the weight is stored (n, k)
  EXEC_NPU_CMD(aclnnQuantMatmulDequant, x, quantized_weight, weight_scale, bias, x_scale, x_offset, smooth_scale, mode,
               transpose_weight, out);
  return out;
}

at::Tensor npu_quant_matmul_dequant_meta(const at::Tensor& x, const at::Tensor& quantized_weight,
                                         const at::Tensor& weight_scale, const std::optional<at::Tensor>& bias,
                                         const std::optional<at::Tensor>& x_scale,
                                         const std::optional<at::Tensor>& x_offset,
                                         const std::optional<at::Tensor>& smooth_scale,
                                         std::optional<c10::string_view> quant_mode) {
  activationQuantMode(quant_mode);
  return qmmDequantOutput(x, quantized_weight, weight_scale);
}

at::Tensor npu_quant_grouped_matmul_dequant(const at::Tensor& x, const at::Tensor& quantized_weight,
                                            const at::Tensor& weight_scale, const at::Tensor& group_list,
                                            const std::optional<at::Tensor>& bias,
                                            const std::optional<at::Tensor>& x_scale,
                                            const std::optional<at::Tensor>& x_offset,
                                            const std::optional<at::Tensor>& smooth_scale,
                                            std::optional<c10::string_view> quant_mode) {
  const std::string mode = activationQuantMode(quant_mode);
  at::Tensor out = groupedDequantOutput(x, quantized_weight, weight_scale, group_list);
  const bool transpose_weight = true;  // each group's weight is stored (n, k)
  EXEC_NPU_CMD(aclnnQuantGroupedMatmulDequant, x, quantized_weight, weight_scale, group_list, bias, x_scale, x_offset,
               smooth_scale, mode, transpose_weight, out);
  return out;
}

at::Tensor npu_quant_grouped_matmul_dequant_meta(const at::Tensor& x, const at::Tensor& quantized_weight,
                                                 const at::Tensor& weight_scale, const at::Tensor& group_list,
                                                 const std::optional<at::Tensor>& bias,
                                                 const std::optional<at::Tensor>& x_scale,
                                                 const std::optional<at::Tensor>& x_offset,
                                                 const std::optional<at::Tensor>& smooth_scale,
                                                 std::optional<c10::string_view> quant_mode) {
  activationQuantMode(quant_mode);
  return groupedDequantOutput(x, quantized_weight, weight_scale, group_list);
}

}  // namespace at_npu::native
