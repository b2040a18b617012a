// TransposeBatchMatmulKernelNpu.cpp - npu_transpose_batchmatmul: a batched product with its operands and result
// permuted ((M, B, K) or (B, M, K) times (B, K, N) or (B, N, K), result (M, B, N)), optionally quantised to int8
// by per-column scales or split along N, on the aclnnTransposeBatchMatMul device op. Inference only (no backward).
#include <ATen/ops/empty.h>

#include <string>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

const std::vector<int64_t> kIdentityPerm{0, 1, 2};
const std::vector<int64_t> kSwapFirstPerm{1, 0, 2};
const std::vector<int64_t> kSwapLastPerm{0, 2, 1};

std::vector<int64_t> permOr(at::OptionalIntArrayRef perm, const std::vector<int64_t>& fallback) {
  return perm.has_value() ? perm->vec() : fallback;
}

struct TransposeBmmPlan {
  std::vector<int64_t> perm_x1, perm_x2, perm_y;
  int64_t split = 1;
  std::vector<int64_t> out_shape;
  at::ScalarType out_type;
};

bool isMatmulFloat(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat; }

// Validates the arguments as the device op takes them and works out the result's shape and dtype.
TransposeBmmPlan planTransposeBmm(const at::Tensor& input, const at::Tensor& weight,
                                  const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& scale,
                                  at::OptionalIntArrayRef perm_x1, at::OptionalIntArrayRef perm_x2,
                                  at::OptionalIntArrayRef perm_y, std::optional<int64_t> batch_split_factor) {
  const char* op = "npu_transpose_batchmatmul";
  TransposeBmmPlan plan;
  plan.perm_x1 = permOr(perm_x1, kIdentityPerm);
  plan.perm_x2 = permOr(perm_x2, kIdentityPerm);
  plan.perm_y = permOr(perm_y, kSwapFirstPerm);
  plan.split = batch_split_factor.value_or(1);
  TORCH_CHECK_VALUE(plan.perm_x1 == kIdentityPerm || plan.perm_x1 == kSwapFirstPerm, op,
                    ": perm_x1 should be [0, 1, 2] or [1, 0, 2], got ", at::IntArrayRef(plan.perm_x1));
  TORCH_CHECK_VALUE(plan.perm_x2 == kIdentityPerm || plan.perm_x2 == kSwapLastPerm, op,
                    ": perm_x2 should be [0, 1, 2] or [0, 2, 1], got ", at::IntArrayRef(plan.perm_x2));
  TORCH_CHECK_VALUE(plan.perm_y == kSwapFirstPerm, op, ": perm_y should be [1, 0, 2], got ",
                    at::IntArrayRef(plan.perm_y));
  TORCH_CHECK_TYPE(isMatmulFloat(input.scalar_type()), op,
                   ": input's type supported for float16, float32 and bfloat16, but now is ", input.scalar_type());
  TORCH_CHECK_TYPE(isMatmulFloat(weight.scalar_type()), op,
                   ": weight's type supported for float16, float32 and bfloat16, but now is ", weight.scalar_type());
  // Upstream defines no bias form (its documentation: "not supported in the current version").
  TORCH_CHECK_VALUE(!(bias.has_value() && bias->defined()), op,
                    ": the bias is not supported in TransposeBatchMatMul (as in torch_npu); add it to the result");
  TORCH_CHECK_VALUE(input.dim() == 3 && weight.dim() == 3, op, ": input and weight must be 3-D, got ", input.sizes(),
                    " and ", weight.sizes());
  const int64_t batch = input.size(plan.perm_x1[0]), m = input.size(plan.perm_x1[1]), k = input.size(2);
  const int64_t n = weight.size(plan.perm_x2[2]), weight_k = weight.size(plan.perm_x2[1]);
  TORCH_CHECK_VALUE(weight.size(0) == batch && weight_k == k, op, ": input ", input.sizes(), " (perm_x1 ",
                    at::IntArrayRef(plan.perm_x1), ") and weight ", weight.sizes(), " (perm_x2 ",
                    at::IntArrayRef(plan.perm_x2), ") do not multiply: the batch and reduce (K) sizes must agree");
  TORCH_CHECK_VALUE(plan.split >= 1 && (batch * n) % plan.split == 0, op, ": batch_split_factor must be >= 1 and "
                    "divide B * N = ", batch * n, ", got ", plan.split);
  const bool quantised = scale.has_value() && scale->defined();
  if (quantised) {
    TORCH_CHECK_TYPE(scale->scalar_type() == at::kLong || scale->scalar_type() == at::kFloat, op,
                     ": scale must be int64 (npu_trans_quant_param) or float32, got ", scale->scalar_type());
    TORCH_CHECK_VALUE(scale->numel() == batch * n, op, ": scale must hold B * N = ", batch * n, " values, got ",
                      scale->sizes());
    TORCH_CHECK_VALUE(plan.split == 1, op, ": batch_split_factor must be 1 when scale is given, got ", plan.split);
    plan.out_shape = {m, 1, batch * n};
    plan.out_type = at::kChar;
  } else if (plan.split > 1) {
    plan.out_shape = {plan.split, m, batch * n / plan.split};
    plan.out_type = input.scalar_type();
  } else {
    plan.out_shape = {m, batch, n};
    plan.out_type = input.scalar_type();
  }
  return plan;
}

}  // namespace

at::Tensor npu_transpose_batchmatmul(const at::Tensor& input, const at::Tensor& weight,
                                     const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& scale,
                                     at::OptionalIntArrayRef perm_x1, at::OptionalIntArrayRef perm_x2,
                                     at::OptionalIntArrayRef perm_y, std::optional<int64_t> batch_split_factor) {
  const TransposeBmmPlan plan =
      planTransposeBmm(input, weight, bias, scale, perm_x1, perm_x2, perm_y, batch_split_factor);
  at::Tensor out = at::empty(plan.out_shape, input.options().dtype(plan.out_type));
  const int8_t cube_math_type = 0;  // the software NPU always accumulates in float32
  EXEC_NPU_CMD(aclnnTransposeBatchMatMul, input, weight, bias, scale, at::IntArrayRef(plan.perm_x1),
               at::IntArrayRef(plan.perm_x2), at::IntArrayRef(plan.perm_y), cube_math_type, plan.split, out);
  return out;
}

at::Tensor npu_transpose_batchmatmul_meta(const at::Tensor& input, const at::Tensor& weight,
                                          const std::optional<at::Tensor>& bias,
                                          const std::optional<at::Tensor>& scale, at::OptionalIntArrayRef perm_x1,
                                          at::OptionalIntArrayRef perm_x2, at::OptionalIntArrayRef perm_y,
                                          std::optional<int64_t> batch_split_factor) {
  const TransposeBmmPlan plan =
      planTransposeBmm(input, weight, bias, scale, perm_x1, perm_x2, perm_y, batch_split_factor);
  return at::empty(plan.out_shape, input.options().dtype(plan.out_type));
}

}  // namespace at_npu::native
