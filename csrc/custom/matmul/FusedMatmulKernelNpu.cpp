// FusedMatmulKernelNpu.cpp - npu_fused_matmul: y = OP(x1 @ x2 + bias, x3) with OP add / mul (x3), gelu_erf /
// gelu_tanh, none (''), or '16cast32' (float16 / bfloat16 operands, float32 result), on the aclnnFusedMatmul
// device op. Batch dimensions broadcast as in torch.matmul. Inference only (no backward upstream).
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <string>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool isFusedMatmulFloat(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat; }

// x1's and x2's batch dimensions broadcast against each other, as in torch.matmul.
std::vector<int64_t> broadcastBatch(const char* op, at::IntArrayRef a, at::IntArrayRef b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i >= rank - a.size() ? a[i - (rank - a.size())] : 1;
    const int64_t db = i >= rank - b.size() ? b[i - (rank - b.size())] : 1;
    TORCH_CHECK_VALUE(da == db || da == 1 || db == 1, op, ": the batch dimensions ", a, " and ", b,
                      " cannot be broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

struct FusedMatmulPlan {
  std::vector<int64_t> out_shape;
  at::ScalarType out_type;
};

FusedMatmulPlan planFusedMatmul(const at::Tensor& x1, const at::Tensor& x2, const std::optional<at::Tensor>& bias,
                                const std::optional<at::Tensor>& x3, const std::string& type) {
  const char* op = "npu_fused_matmul";
  TORCH_CHECK_VALUE(type.empty() || type == "add" || type == "mul" || type == "gelu_erf" || type == "gelu_tanh" ||
                        type == "16cast32",
                    op, ": fused_op_type must be '', 'add', 'mul', 'gelu_erf', 'gelu_tanh' or '16cast32', got '", type,
                    "'");
  TORCH_CHECK_VALUE(x1.dim() >= 2 && x2.dim() >= 2, op, ": x1 and x2 must have at least 2 dimensions, got ",
                    x1.sizes(), " and ", x2.sizes());
  TORCH_CHECK_TYPE(isFusedMatmulFloat(x1.scalar_type()) && x1.scalar_type() == x2.scalar_type(), op,
                   ": x1 and x2 must share one dtype of float16, bfloat16 or float32, got ", x1.scalar_type(), " and ",
                   x2.scalar_type());
  TORCH_CHECK_VALUE(x1.size(-1) == x2.size(-2), op, ": x1 ", x1.sizes(), " and x2 ", x2.sizes(),
                    " do not multiply: x1's last dimension (k) must equal x2's second-to-last");
  const bool has_x3 = x3.has_value() && x3->defined();
  const bool needs_x3 = type == "add" || type == "mul";
  TORCH_CHECK_VALUE(has_x3 || !needs_x3, op, ": there must be an x3 for add and mul");
  TORCH_CHECK_VALUE(!has_x3 || needs_x3, op, ": there is no x3 for fused_op_type '", type,
                    "' (only 'add' and 'mul' take one)");
  std::vector<int64_t> shape =
      broadcastBatch(op, x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
  shape.push_back(x1.size(-2));
  shape.push_back(x2.size(-1));
  if (has_x3) {
    TORCH_CHECK_TYPE(isFusedMatmulFloat(x3->scalar_type()), op, ": x3 must be float16, bfloat16 or float32, got ",
                     x3->scalar_type());
    TORCH_CHECK_VALUE(at::is_expandable_to(x3->sizes(), shape), op, ": x3 ", x3->sizes(),
                      " must broadcast to the product's shape ", at::IntArrayRef(shape));
  }
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK_VALUE(bias->numel() == x2.size(-1) && (bias->dim() == 1 || (bias->dim() == 2 && bias->size(0) == 1)),
                      op, ": bias must be (n,) or (1, n) with n = ", x2.size(-1), ", got ", bias->sizes());
  }
  return {shape, type == "16cast32" ? at::kFloat : x1.scalar_type()};
}

}  // namespace

at::Tensor npu_fused_matmul(const at::Tensor& x1, const at::Tensor& x2, const std::optional<at::Tensor>& bias,
                            const std::optional<at::Tensor>& x3, c10::string_view fused_op_type) {
  const std::string type(fused_op_type);
  const FusedMatmulPlan plan = planFusedMatmul(x1, x2, bias, x3, type);
  at::Tensor out = at::empty(plan.out_shape, x1.options().dtype(plan.out_type));
  const int8_t cube_math_type = 0;  // the software NPU always accumulates in float32
  EXEC_NPU_CMD(aclnnFusedMatmul, x1, x2, bias, x3, type, cube_math_type, out);
  return out;
}

at::Tensor npu_fused_matmul_meta(const at::Tensor& x1, const at::Tensor& x2, const std::optional<at::Tensor>& bias,
                                 const std::optional<at::Tensor>& x3, c10::string_view fused_op_type) {
  const FusedMatmulPlan plan = planFusedMatmul(x1, x2, bias, x3, std::string(fused_op_type));
  return at::empty(plan.out_shape, x1.options().dtype(plan.out_type));
}

}  // namespace at_npu::native
