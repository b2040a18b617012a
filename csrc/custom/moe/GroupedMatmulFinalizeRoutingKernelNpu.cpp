// GroupedMatmulFinalizeRoutingKernelNpu.cpp - npu_grouped_matmul_finalize_routing: MoE's expert matmuls on int8
// token rows (int8 or int4 weights), dequantized, weighted by logit and scatter-added into the tokens' rows (the
// finalize step), plus a shared expert's output, on aclnnGroupedMatmulFinalizeRoutingV3; and its Meta kernel.
// An inference op: torch_npu defines no gradient for it.
#include <ATen/ops/empty.h>

#include <initializer_list>
#include <utility>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_grouped_matmul_finalize_routing";

// The output shape [output_bs or m, n] after the argument checks the shapes allow.
std::vector<int64_t> finalizeShape(const at::Tensor& x, const at::Tensor& w, const at::Tensor& group_list,
                                   const std::optional<at::Tensor>& shared_input,
                                   std::optional<at::ScalarType> dtype, std::optional<int64_t> shared_input_offset,
                                   std::optional<int64_t> output_bs, std::optional<int64_t> group_list_type,
                                   std::initializer_list<std::pair<const char*, bool>> chip_forms) {
  for (const auto& [name, given] : chip_forms) {
    TORCH_CHECK_VALUE(!given, kOp, ": ", name, " selects a chip number format (float4 / hifloat8 / float8_e8m0), ",
                      "which the software NPU does not have; leave it None");
  }
  const int64_t list_type = group_list_type.value_or(1);
  TORCH_CHECK_VALUE(list_type == 0 || list_type == 1, kOp, ": group_list_type must be 0 (cumulative ends) or 1 ",
                    "(sizes), got ", list_type);
  TORCH_CHECK_VALUE(dtype.value_or(at::kFloat) == at::kFloat, kOp, ": dtype must be torch.float32 (the only output ",
                    "dtype), got ", *dtype);
  TORCH_CHECK_TYPE(x.scalar_type() == at::kChar, kOp, ": x must be int8, got ", x.scalar_type());
  TORCH_CHECK_TYPE(w.scalar_type() == at::kChar || w.scalar_type() == at::kInt, kOp, ": w must be int8 or int32 ",
                   "(carrying 8 int4 values each), got ", w.scalar_type());
  TORCH_CHECK_VALUE(x.dim() == 2 && w.dim() == 3, kOp, ": x must be [m, k] and w [e, k, n], got ", x.sizes(), " and ",
                    w.sizes());
  TORCH_CHECK_VALUE(x.size(1) == w.size(1), kOp, ": x ", x.sizes(), " and w ", w.sizes(), " do not multiply (k)");
  TORCH_CHECK_TYPE(!at::isFloatingType(group_list.scalar_type()), kOp, ": group_list must be an integer tensor");
  TORCH_CHECK_VALUE(group_list.dim() == 1 && group_list.size(0) <= w.size(0), kOp, ": group_list must be 1-D with ",
                    "at most e = ", w.size(0), " groups, got ", group_list.sizes());
  const int64_t bs = output_bs.value_or(0), offset = shared_input_offset.value_or(0);
  TORCH_CHECK_VALUE(bs >= 0 && offset >= 0, kOp, ": output_bs and shared_input_offset must not be negative");
  const int64_t rows = bs == 0 ? x.size(0) : bs, n = w.size(2) * (w.scalar_type() == at::kInt ? 8 : 1);
  if (shared_input.has_value()) {
    const at::Tensor& s = *shared_input;
    TORCH_CHECK_VALUE(s.dim() == 2 && s.size(1) == n && offset + s.size(0) <= rows, kOp, ": shared_input must be ",
                      "[r, ", n, "] with shared_input_offset + r <= ", rows, " output rows, got ", s.sizes(),
                      " at offset ", offset);
  }
  return {rows, n};
}

}  // namespace

at::Tensor npu_grouped_matmul_finalize_routing(
    const at::Tensor& x, const at::Tensor& w, const at::Tensor& group_list, const std::optional<at::Tensor>& scale,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& offset,
    const std::optional<at::Tensor>& pertoken_scale, const std::optional<at::Tensor>& shared_input,
    const std::optional<at::Tensor>& logit, const std::optional<at::Tensor>& row_index,
    std::optional<at::ScalarType> dtype, std::optional<double> shared_input_weight,
    std::optional<int64_t> shared_input_offset, std::optional<int64_t> output_bs,
    std::optional<int64_t> group_list_type, at::OptionalIntArrayRef tuning_config, std::optional<int64_t> x_dtype,
    std::optional<int64_t> w_dtype, std::optional<int64_t> scale_dtype, std::optional<int64_t> pertoken_scale_dtype) {
  at::Tensor out = at::empty(
      finalizeShape(x, w, group_list, shared_input, dtype, shared_input_offset, output_bs, group_list_type,
                    {{"x_dtype", x_dtype.has_value()},
                     {"w_dtype", w_dtype.has_value()},
                     {"scale_dtype", scale_dtype.has_value()},
                     {"pertoken_scale_dtype", pertoken_scale_dtype.has_value()}}),
      x.options().dtype(at::kFloat));
  const std::optional<at::Tensor> antiquant;  // reserved by the device op
  const int64_t dtype_code = 0;               // float32
  const double weight = shared_input_weight.value_or(1.0);
  const int64_t row_offset = shared_input_offset.value_or(0), list_type = group_list_type.value_or(1);
  const bool transpose = false;
  EXEC_NPU_CMD(aclnnGroupedMatmulFinalizeRoutingV3, x, w, scale, bias, offset, antiquant, antiquant, pertoken_scale,
               group_list, shared_input, logit, row_index, dtype_code, weight, row_offset, transpose, transpose,
               list_type, tuning_config, out);
  return out;
}

at::Tensor npu_grouped_matmul_finalize_routing_meta(
    const at::Tensor& x, const at::Tensor& w, const at::Tensor& group_list, const std::optional<at::Tensor>& scale,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& offset,
    const std::optional<at::Tensor>& pertoken_scale, const std::optional<at::Tensor>& shared_input,
    const std::optional<at::Tensor>& logit, const std::optional<at::Tensor>& row_index,
    std::optional<at::ScalarType> dtype, std::optional<double> shared_input_weight,
    std::optional<int64_t> shared_input_offset, std::optional<int64_t> output_bs,
    std::optional<int64_t> group_list_type, at::OptionalIntArrayRef tuning_config, std::optional<int64_t> x_dtype,
    std::optional<int64_t> w_dtype, std::optional<int64_t> scale_dtype, std::optional<int64_t> pertoken_scale_dtype) {
  return at::empty(
      finalizeShape(x, w, group_list, shared_input, dtype, shared_input_offset, output_bs, group_list_type,
                    {{"x_dtype", x_dtype.has_value()},
                     {"w_dtype", w_dtype.has_value()},
                     {"scale_dtype", scale_dtype.has_value()},
                     {"pertoken_scale_dtype", pertoken_scale_dtype.has_value()}}),
      x.options().dtype(at::kFloat));
}

}  // namespace at_npu::native
