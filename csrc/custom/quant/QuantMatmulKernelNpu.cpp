// QuantMatmulKernelNpu.cpp - quantized inference matmuls: npu_quant_matmul (int8 x int8, on
// aclnnQuantMatmulV4), npu_weight_quant_batchmatmul (float activations x int8 / int4 weights, on
// aclnnWeightQuantBatchMatmulV2) and npu_trans_quant_param (their int64 scale form, on
// aclnnTransQuantParamV2). Inference ops: upstream defines no gradient for them.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/NpuDtypeCodes.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

// The k x n product's output shape: x1's and x2's batch dimensions broadcast, then (m, n).
std::vector<int64_t> quantMatmulShape(const at::Tensor& x1, const at::Tensor& x2) {
  TORCH_CHECK_VALUE(x1.dim() >= 2 && x1.dim() <= 6 && x2.dim() >= 2 && x2.dim() <= 6,
                    "npu_quant_matmul: x1 and x2 must have 2 to 6 dimensions, got ", x1.sizes(), " and ", x2.sizes());
  TORCH_CHECK_TYPE(x1.scalar_type() == x2.scalar_type() &&
                       (x1.scalar_type() == at::kChar || x1.scalar_type() == at::kInt),
                   "npu_quant_matmul: x1 and x2 must both be int8 (or int32 carrying 8 int4 values each), got ",
                   x1.scalar_type(), " and ", x2.scalar_type());
  const int64_t pack = x1.scalar_type() == at::kInt ? 8 : 1;
  TORCH_CHECK_VALUE(x1.size(-1) * pack == x2.size(-2), "npu_quant_matmul: x1 ", x1.sizes(), " and x2 ", x2.sizes(),
                    " do not multiply: x1's last dimension (k) must equal x2's second-to-last");
  std::vector<int64_t> batch = at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
  batch.push_back(x1.size(-2));
  batch.push_back(x2.size(-1) * pack);
  return batch;
}

at::ScalarType quantOutputType(std::optional<int64_t> output_dtype) {
  if (!output_dtype.has_value()) return at::kChar;
  const auto type = dtype_codes::scalarTypeOfCode("npu_quant_matmul", "output_dtype", *output_dtype, "output");
  TORCH_CHECK_VALUE(type == at::kChar || type == at::kHalf || type == at::kBFloat16 || type == at::kInt,
                    "npu_quant_matmul: output_dtype must be torch.int8, torch.float16, torch.bfloat16 or torch.int32, "
                    "got ", type);
  return type;
}

// The chip-specific input forms (float8 / hifloat8 / float4 carriers, block-wise groups, output
// scales) have no meaning without those number formats: a clear error names the argument.
void checkPlainForms(std::initializer_list<std::pair<const char*, bool>> given) {
  for (const auto& [name, present] : given) {
    TORCH_CHECK_VALUE(!present, "npu_quant_matmul: ", name,
                      " selects a chip number format (float8 / hifloat8 / float4) or block-wise quantization, "
                      "which the software NPU does not have; leave it None");
  }
}

}  // namespace

at::Tensor npu_quant_matmul(const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& scale,
                            const std::optional<at::Tensor>& offset, const std::optional<at::Tensor>& pertoken_scale,
                            const std::optional<at::Tensor>& bias, std::optional<int64_t> output_dtype,
                            std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype,
                            std::optional<int64_t> pertoken_scale_dtype, std::optional<int64_t> scale_dtype,
                            at::OptionalIntArrayRef group_sizes, const std::optional<at::Tensor>& y_scale) {
  const bool trivial_groups = !group_sizes.has_value() ||
                              std::all_of(group_sizes->begin(), group_sizes->end(), [](int64_t g) { return g == 0; });
  checkPlainForms({{"x1_dtype", x1_dtype.has_value()}, {"x2_dtype", x2_dtype.has_value()},
                   {"pertoken_scale_dtype", pertoken_scale_dtype.has_value()},
                   {"scale_dtype", scale_dtype.has_value()}, {"group_sizes", !trivial_groups},
                   {"y_scale", y_scale.has_value()}});
  at::Tensor out = at::empty(quantMatmulShape(x1, x2), x1.options().dtype(quantOutputType(output_dtype)));
  const bool transpose = false;
  EXEC_NPU_CMD(aclnnQuantMatmulV4, x1, x2, scale, offset, pertoken_scale, bias, transpose, transpose, out);
  return out;
}

at::Tensor npu_quant_matmul_meta(const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& scale,
                                 const std::optional<at::Tensor>& offset,
                                 const std::optional<at::Tensor>& pertoken_scale,
                                 const std::optional<at::Tensor>& bias, std::optional<int64_t> output_dtype,
                                 std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype,
                                 std::optional<int64_t> pertoken_scale_dtype, std::optional<int64_t> scale_dtype,
                                 at::OptionalIntArrayRef group_sizes, const std::optional<at::Tensor>& y_scale) {
  return at::empty(quantMatmulShape(x1, x2), x1.options().dtype(quantOutputType(output_dtype)));
}

namespace {

std::vector<int64_t> weightQuantShape(const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK_VALUE(x.dim() >= 2 && weight.dim() == 2, "npu_weight_quant_batchmatmul: x must be (..., M, K) and "
                    "weight (K, N), got ", x.sizes(), " and ", weight.sizes());
  TORCH_CHECK_TYPE(weight.scalar_type() == at::kChar || weight.scalar_type() == at::kInt,
                   "npu_weight_quant_batchmatmul: weight must be int8 (or int32 carrying 8 int4 values each), got ",
                   weight.scalar_type());
  TORCH_CHECK_VALUE(x.size(-1) == weight.size(0), "npu_weight_quant_batchmatmul: x ", x.sizes(), " and weight ",
                    weight.sizes(), " do not multiply: x's last dimension (K) must equal weight's first");
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(1) * (weight.scalar_type() == at::kInt ? 8 : 1);
  return shape;
}

at::ScalarType weightQuantOutputType(const at::Tensor& x, const std::optional<at::Tensor>& quant_scale,
                                     std::optional<int64_t> weight_dtype) {
  TORCH_CHECK_VALUE(!weight_dtype.has_value(), "npu_weight_quant_batchmatmul: weight_dtype selects a chip number "
                    "format (float8 / hifloat8 / float4 weights), which the software NPU does not have; leave it None "
                    "(int8 weights, or int32 carrying int4)");
  return quant_scale.has_value() ? at::kChar : x.scalar_type();
}

}  // namespace

at::Tensor npu_weight_quant_batchmatmul(const at::Tensor& x, const at::Tensor& weight,
                                        const at::Tensor& antiquant_scale,
                                        const std::optional<at::Tensor>& antiquant_offset,
                                        const std::optional<at::Tensor>& quant_scale,
                                        const std::optional<at::Tensor>& quant_offset,
                                        const std::optional<at::Tensor>& bias, int64_t antiquant_group_size,
                                        int64_t inner_precise, std::optional<int64_t> weight_dtype) {
  at::Tensor out = at::empty(weightQuantShape(x, weight), x.options().dtype(weightQuantOutputType(x, quant_scale,
                                                                                                  weight_dtype)));
  EXEC_NPU_CMD(aclnnWeightQuantBatchMatmulV2, x, weight, antiquant_scale, antiquant_offset, quant_scale, quant_offset,
               bias, antiquant_group_size, inner_precise, out);
  return out;
}

at::Tensor npu_weight_quant_batchmatmul_meta(const at::Tensor& x, const at::Tensor& weight,
                                             const at::Tensor& antiquant_scale,
                                             const std::optional<at::Tensor>& antiquant_offset,
                                             const std::optional<at::Tensor>& quant_scale,
                                             const std::optional<at::Tensor>& quant_offset,
                                             const std::optional<at::Tensor>& bias, int64_t antiquant_group_size,
                                             int64_t inner_precise, std::optional<int64_t> weight_dtype) {
  return at::empty(weightQuantShape(x, weight),
                   x.options().dtype(weightQuantOutputType(x, quant_scale, weight_dtype)));
}

namespace {

std::vector<int64_t> transQuantShape(const at::Tensor& scale, const std::optional<at::Tensor>& offset) {
  TORCH_CHECK_TYPE(scale.scalar_type() == at::kFloat && (!offset.has_value() || offset->scalar_type() == at::kFloat),
                   "npu_trans_quant_param: scale and offset must be float32");
  TORCH_CHECK_VALUE(scale.dim() >= 1 && scale.dim() <= 2 && scale.numel() > 0,
                    "npu_trans_quant_param: scale must be a non-empty 1-d or 2-d tensor, got ", scale.sizes());
  if (!offset.has_value() || scale.dim() == 2) return scale.sizes().vec();
  TORCH_CHECK_VALUE(offset->dim() == 1 && (offset->size(0) == scale.size(0) || offset->size(0) == 1 ||
                                           scale.size(0) == 1),
                    "npu_trans_quant_param: offset ", offset->sizes(), " must be 1-d and match scale ", scale.sizes(),
                    " (or have one element)");
  return {std::max(scale.size(0), offset->size(0))};
}

}  // namespace

at::Tensor npu_trans_quant_param(const at::Tensor& scale, const std::optional<at::Tensor>& offset,
                                 std::optional<int64_t> round_mode) {
  at::Tensor out = at::empty(transQuantShape(scale, offset), scale.options().dtype(at::kLong));
  const int64_t mode = round_mode.value_or(0);
  EXEC_NPU_CMD(aclnnTransQuantParamV2, scale, offset, mode, out);
  return out;
}

at::Tensor npu_trans_quant_param_meta(const at::Tensor& scale, const std::optional<at::Tensor>& offset,
                                      std::optional<int64_t> round_mode) {
  return at::empty(transQuantShape(scale, offset), scale.options().dtype(at::kLong));
}

}  // namespace at_npu::native
