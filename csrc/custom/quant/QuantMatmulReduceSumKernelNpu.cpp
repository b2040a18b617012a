// QuantMatmulReduceSumKernelNpu.cpp - npu_quant_matmul_reduce_sum: batched int8 matmuls dequantised per token
// (x1_scale) and per channel (x2_scale), summed over the batch, on aclnnQuantMatmulReduceSumWeightNz. Inference only.
#include <ATen/ops/empty.h>

#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kReduceSumOp = "npu_quant_matmul_reduce_sum";

// The scales are optional in the schema but the formula needs both: a clear error names the missing one.
const at::Tensor& requiredScale(const std::optional<at::Tensor>& scale, const char* name) {
  TORCH_CHECK_VALUE(scale.has_value() && scale->defined(), kReduceSumOp, ": ", name, " is required");
  return *scale;
}

// (batch, m, k) x (batch, k, n) with x1_scale (batch, m) and x2_scale (n,) -> bfloat16 (m, n).
at::Tensor reduceSumOutput(const at::Tensor& x1, const at::Tensor& x2, const std::optional<at::Tensor>& x1_scale,
                           const std::optional<at::Tensor>& x2_scale) {
  TORCH_CHECK_TYPE(x1.scalar_type() == at::kChar && x2.scalar_type() == at::kChar, kReduceSumOp,
                   ": x1 and x2 must be int8, got ", x1.scalar_type(), " and ", x2.scalar_type());
  TORCH_CHECK_VALUE(x1.dim() == 3 && x2.dim() == 3, kReduceSumOp, ": x1 must be (batch, m, k) and x2 (batch, k, n), "
                    "got ", x1.sizes(), " and ", x2.sizes());
  TORCH_CHECK_VALUE(x1.size(0) == x2.size(0) && x1.size(2) == x2.size(1), kReduceSumOp, ": x1 ", x1.sizes(),
                    " and x2 ", x2.sizes(), " must share batch and k");
  const at::Tensor& s1 = requiredScale(x1_scale, "x1_scale");
  const at::Tensor& s2 = requiredScale(x2_scale, "x2_scale");
  TORCH_CHECK_TYPE(s1.scalar_type() == at::kFloat && s2.scalar_type() == at::kBFloat16, kReduceSumOp,
                   ": x1_scale must be float32 and x2_scale bfloat16, got ", s1.scalar_type(), " and ",
                   s2.scalar_type());
  TORCH_CHECK_VALUE(s1.dim() == 2 && s1.size(0) == x1.size(0) && s1.size(1) == x1.size(1), kReduceSumOp,
                    ": x1_scale must have shape (batch, m) = (", x1.size(0), ", ", x1.size(1), "), got ", s1.sizes());
  TORCH_CHECK_VALUE(s2.dim() == 1 && s2.size(0) == x2.size(2), kReduceSumOp, ": x2_scale must have shape (n,) = (",
                    x2.size(2), ",), got ", s2.sizes());
  return at::empty({x1.size(1), x2.size(2)}, x1.options().dtype(at::kBFloat16));
}

}  // namespace

at::Tensor npu_quant_matmul_reduce_sum(const at::Tensor& x1, const at::Tensor& x2,
                                       const std::optional<at::Tensor>& x1_scale,
                                       const std::optional<at::Tensor>& x2_scale) {
  at::Tensor out = reduceSumOutput(x1, x2, x1_scale, x2_scale);
  // Output scale, offsets and bias are not part of this op: passed absent. The sum runs over dimension 0.
  const std::optional<at::Tensor> absent;
  const bool no_transpose = false;
  const int64_t group_size = -1;
  const std::vector<int64_t> reduce_dims = {0};
  const bool keep_dims = false;
  EXEC_NPU_CMD(aclnnQuantMatmulReduceSumWeightNz, x1, x2, x1_scale, x2_scale, absent, absent, absent, absent, absent,
               no_transpose, no_transpose, group_size, at::IntArrayRef(reduce_dims), keep_dims, out);
  return out;
}

at::Tensor npu_quant_matmul_reduce_sum_meta(const at::Tensor& x1, const at::Tensor& x2,
                                            const std::optional<at::Tensor>& x1_scale,
                                            const std::optional<at::Tensor>& x2_scale) {
  return reduceSumOutput(x1, x2, x1_scale, x2_scale);
}

}  // namespace at_npu::native
