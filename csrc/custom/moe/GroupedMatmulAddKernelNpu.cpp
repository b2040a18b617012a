// GroupedMatmulAddKernelNpu.cpp - npu_grouped_matmul_add_ / npu_grouped_matmul_add: y[i] += x_i^T @ weight_i for the
// k groups of group_list (MoE weight gradients accumulated in float32), in place or on a copy of y, on
// aclnnGroupedMatmulAddV2; and their Meta kernels. torch_npu defines no gradient for them.
#include <ATen/ops/empty_like.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_grouped_matmul_add";

void checkGroupedMatmulAdd(const at::Tensor& y, const at::Tensor& x, const at::Tensor& weight,
                           const at::Tensor& group_list, bool transpose_x, bool transpose_weight, int64_t group_type,
                           int64_t group_list_type) {
  TORCH_CHECK_VALUE(group_type == 2, kOp, ": only group_type 2 (groups split k) is supported, as in torch_npu; got ",
                    group_type);
  TORCH_CHECK_VALUE(group_list_type == 0 || group_list_type == 1, kOp, ": group_list_type must be 0 (cumulative ",
                    "ends) or 1 (sizes), got ", group_list_type);
  const auto plain = [](at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat; };
  TORCH_CHECK_TYPE(plain(x.scalar_type()) && weight.scalar_type() == x.scalar_type(), kOp, ": x and weight must be ",
                   "float16, bfloat16 or float32 of one dtype, got ", x.scalar_type(), " and ", weight.scalar_type());
  TORCH_CHECK_TYPE(y.scalar_type() == at::kFloat, kOp, ": y (self) accumulates in float32, got ", y.scalar_type());
  TORCH_CHECK_TYPE(!at::isFloatingType(group_list.scalar_type()), kOp, ": group_list must be an integer tensor");
  TORCH_CHECK_VALUE(x.dim() == 2 && weight.dim() == 2 && group_list.dim() == 1, kOp, ": x and weight must be 2-D and ",
                    "group_list 1-D, got ", x.sizes(), ", ", weight.sizes(), " and ", group_list.sizes());
  const int64_t k = transpose_x ? x.size(0) : x.size(1), m = transpose_x ? x.size(1) : x.size(0);
  const int64_t wk = transpose_weight ? weight.size(1) : weight.size(0);
  const int64_t n = transpose_weight ? weight.size(0) : weight.size(1);
  TORCH_CHECK_VALUE(k == wk, kOp, ": x ", x.sizes(), " (transpose_x=", transpose_x, ") and weight ", weight.sizes(),
                    " (transpose_weight=", transpose_weight, ") split different k: ", k, " and ", wk);
  const int64_t groups = group_list.size(0);
  TORCH_CHECK_VALUE(y.dim() >= 2 && y.size(-1) == n && y.numel() == groups * m * n, kOp, ": y (self) must hold ",
                    groups, " groups of [", m, ", ", n, "] ([", groups * m, ", ", n, "] or [", groups, ", ", m, ", ",
                    n, "]), got ", y.sizes());
}

}  // namespace

at::Tensor& npu_grouped_matmul_add_(at::Tensor& self, const at::Tensor& x, const at::Tensor& weight,
                                    const at::Tensor& group_list, bool transpose_x, bool transpose_weight,
                                    int64_t group_type, std::optional<int64_t> group_list_type) {
  const int64_t list_type = group_list_type.value_or(0);
  checkGroupedMatmulAdd(self, x, weight, group_list, transpose_x, transpose_weight, group_type, list_type);
  EXEC_NPU_CMD(aclnnGroupedMatmulAddV2, x, weight, group_list, self, transpose_x, transpose_weight, group_type,
               list_type);
  return self;
}

at::Tensor& npu_grouped_matmul_add_inplace_meta(at::Tensor& self, const at::Tensor& x, const at::Tensor& weight,
                                                const at::Tensor& group_list, bool transpose_x, bool transpose_weight,
                                                int64_t group_type, std::optional<int64_t> group_list_type) {
  checkGroupedMatmulAdd(self, x, weight, group_list, transpose_x, transpose_weight, group_type,
                        group_list_type.value_or(0));
  return self;
}

// The functional form leaves self untouched (torch_npu's writes into it too, though its schema says it does not).
at::Tensor npu_grouped_matmul_add(const at::Tensor& self, const at::Tensor& x, const at::Tensor& weight,
                                  const at::Tensor& group_list, bool transpose_x, bool transpose_weight,
                                  int64_t group_type, std::optional<int64_t> group_list_type) {
  at::Tensor out = self.clone();
  return npu_grouped_matmul_add_(out, x, weight, group_list, transpose_x, transpose_weight, group_type,
                                 group_list_type);
}

at::Tensor npu_grouped_matmul_add_meta(const at::Tensor& self, const at::Tensor& x, const at::Tensor& weight,
                                       const at::Tensor& group_list, bool transpose_x, bool transpose_weight,
                                       int64_t group_type, std::optional<int64_t> group_list_type) {
  checkGroupedMatmulAdd(self, x, weight, group_list, transpose_x, transpose_weight, group_type,
                        group_list_type.value_or(0));
  return at::empty_like(self);
}

}  // namespace at_npu::native
