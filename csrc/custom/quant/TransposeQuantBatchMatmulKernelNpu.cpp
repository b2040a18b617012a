// TransposeQuantBatchMatmulKernelNpu.cpp - npu_transpose_quant_batchmatmul: x1 (M, B, K) seen as (B, M, K) times x2
// (B, K, N) or (B, N, K), dequantised per token (x1_scale) and per channel (x2_scale), result (M, B, N), on the
// aclnnTransposeQuantBatchMatMul device op. Operands are torch's float8_e4m3fn / float8_e5m2 (as upstream; widened
// exactly to float16 for the device op) or int8 / int32 carrying eight int4; hifloat8 and mx block scales are chip
// number formats the software NPU does not have. Inference only.
#include <ATen/ops/empty.h>

#include <algorithm>
#include <string>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_transpose_quant_batchmatmul";
const std::vector<int64_t> kIdentityPerm{0, 1, 2};
const std::vector<int64_t> kSwapFirstPerm{1, 0, 2};
const std::vector<int64_t> kSwapLastPerm{0, 2, 1};

// A dtype code naming float8 / hifloat8 / float4 / e8m0 cannot be honoured: the error names the argument.
void refuseChipCode(const char* arg, std::optional<int64_t> code) {
  if (!code.has_value()) return;
  const char* chip = quant::chipFormatName(*code);
  TORCH_CHECK_VALUE(chip == nullptr, kOp, ": ", arg, " selects ", chip, ", a chip number format the software NPU ",
                    "does not have; pass int8 operands (or int32 carrying eight int4 values) and leave ", arg,
                    " None");
}

bool isFloat8(at::ScalarType t) { return t == at::kFloat8_e4m3fn || t == at::kFloat8_e5m2; }

void checkOperand(const char* what, const at::Tensor& t, std::optional<int64_t> code) {
  TORCH_CHECK_TYPE(isFloat8(t.scalar_type()) || t.scalar_type() == at::kChar || t.scalar_type() == at::kInt, kOp,
                   ": ", what, " must be float8_e4m3fn, float8_e5m2, int8 (or int32 carrying eight int4 values), got ",
                   t.scalar_type());
  TORCH_CHECK_VALUE(!code.has_value() || *code == static_cast<int64_t>(t.scalar_type()), kOp, ": ", what,
                    "_dtype ", *code, " does not name ", what, "'s dtype ", t.scalar_type(),
                    " (hifloat8 is a chip number format the software NPU does not have); leave it None");
}

// A 1-D float32 (or int64, npu_trans_quant_param) scale of one value or `len` values.
void checkScale(const char* what, const std::optional<at::Tensor>& scale, int64_t len) {
  if (!scale.has_value() || !scale->defined()) return;
  const char* chip = quant::chipFormatName(static_cast<int64_t>(scale->scalar_type()));
  TORCH_CHECK_TYPE(chip == nullptr && scale->dim() != 4, kOp, ": ", what, " in mx form (float8_e8m0 / 4-D block ",
                   "scales) is a chip number format the software NPU does not have; pass a float32 1-D scale");
  TORCH_CHECK_TYPE(scale->scalar_type() == at::kFloat || scale->scalar_type() == at::kLong, kOp, ": ", what,
                   " must be float32 (or int64 from npu_trans_quant_param), got ", scale->scalar_type());
  TORCH_CHECK_VALUE(scale->dim() == 1 && (scale->size(0) == len || scale->size(0) == 1), kOp, ": ", what,
                    " must have shape (", len, ",) or (1,), got ", scale->sizes());
}

struct TransposeQuantPlan {
  std::vector<int64_t> perm_x1, perm_x2, perm_y, out_shape;
  int64_t split = 1;
  int64_t group_size = 0;
  at::ScalarType out_type = at::kHalf;
};

TransposeQuantPlan planTransposeQuant(const at::Tensor& x1, const at::Tensor& x2, int64_t dtype,
                                      const std::optional<at::Tensor>& bias,
                                      const std::optional<at::Tensor>& x1_scale,
                                      const std::optional<at::Tensor>& x2_scale, at::OptionalIntArrayRef group_sizes,
                                      at::OptionalIntArrayRef perm_x1, at::OptionalIntArrayRef perm_x2,
                                      at::OptionalIntArrayRef perm_y, std::optional<int64_t> batch_split_factor,
                                      std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype) {
  TransposeQuantPlan plan;
  refuseChipCode("dtype", dtype);
  TORCH_CHECK_VALUE(dtype == static_cast<int64_t>(at::kHalf) || dtype == static_cast<int64_t>(at::kBFloat16), kOp,
                    ": dtype must be torch.float16 or torch.bfloat16, got ", dtype);
  plan.out_type = static_cast<at::ScalarType>(dtype);
  plan.perm_x1 = perm_x1.has_value() ? perm_x1->vec() : kSwapFirstPerm;
  plan.perm_x2 = perm_x2.has_value() ? perm_x2->vec() : kIdentityPerm;
  plan.perm_y = perm_y.has_value() ? perm_y->vec() : kSwapFirstPerm;
  TORCH_CHECK_VALUE(plan.perm_x1 == kSwapFirstPerm, kOp, ": perm_x1 should be [1, 0, 2], got ",
                    at::IntArrayRef(plan.perm_x1));
  TORCH_CHECK_VALUE(plan.perm_x2 == kIdentityPerm || plan.perm_x2 == kSwapLastPerm, kOp,
                    ": perm_x2 should be [0, 1, 2] or [0, 2, 1], got ", at::IntArrayRef(plan.perm_x2));
  TORCH_CHECK_VALUE(plan.perm_y == kSwapFirstPerm, kOp, ": perm_y should be [1, 0, 2], got ",
                    at::IntArrayRef(plan.perm_y));
  // Non-zero group sizes only describe mx block quantisation, whose float8_e8m0 scales are chip-only.
  if (group_sizes.has_value()) {
    TORCH_CHECK_VALUE(group_sizes->size() == 3, kOp, ": group_sizes must be [group_m, group_n, group_k], got ",
                      *group_sizes);
    TORCH_CHECK_VALUE(std::all_of(group_sizes->begin(), group_sizes->end(), [](int64_t g) { return g == 0; }), kOp,
                      ": group_sizes ", *group_sizes, " selects mx block quantisation, a chip number format the "
                      "software NPU does not have; leave it None (or [0, 0, 0])");
  }
  TORCH_CHECK_VALUE(!(bias.has_value() && bias->defined()), kOp,
                    ": bias is not supported (as in torch_npu); add it to the result");
  checkOperand("x1", x1, x1_dtype);
  checkOperand("x2", x2, x2_dtype);
  TORCH_CHECK_TYPE(x1.scalar_type() == x2.scalar_type(), kOp, ": x1 and x2 must have one dtype, got ",
                   x1.scalar_type(), " and ", x2.scalar_type());
  TORCH_CHECK_VALUE(x1.dim() == 3 && x2.dim() == 3, kOp, ": x1 and x2 must be 3-D, got ", x1.sizes(), " and ",
                    x2.sizes());
  const int64_t pack = x1.scalar_type() == at::kInt ? 8 : 1;  // int4 values per stored element, last dimension
  const int64_t m = x1.size(0), batch = x1.size(1), k = x1.size(2) * pack;
  const bool x2_nk = plan.perm_x2 == kSwapLastPerm;
  const int64_t x2_k = x2_nk ? x2.size(2) * pack : x2.size(1);
  const int64_t n = x2_nk ? x2.size(1) : x2.size(2) * pack;
  TORCH_CHECK_VALUE(x2.size(0) == batch && x2_k == k, kOp, ": x1 ", x1.sizes(), " (M, B, K) and x2 ", x2.sizes(),
                    x2_nk ? " (B, N, K)" : " (B, K, N)", " do not multiply: the batch and K sizes must agree");
  checkScale("x1_scale", x1_scale, m);
  checkScale("x2_scale", x2_scale, n);
  plan.split = batch_split_factor.value_or(1);
  TORCH_CHECK_VALUE(plan.split >= 1 && (batch * n) % plan.split == 0, kOp,
                    ": batch_split_factor must be >= 1 and divide B * N = ", batch * n, ", got ", plan.split);
  plan.out_shape = plan.split > 1 ? std::vector<int64_t>{plan.split, m, batch * n / plan.split}
                                  : std::vector<int64_t>{m, batch, n};
  return plan;
}

}  // namespace

at::Tensor npu_transpose_quant_batchmatmul(const at::Tensor& x1, const at::Tensor& x2, int64_t dtype,
                                           const std::optional<at::Tensor>& bias,
                                           const std::optional<at::Tensor>& x1_scale,
                                           const std::optional<at::Tensor>& x2_scale,
                                           at::OptionalIntArrayRef group_sizes, at::OptionalIntArrayRef perm_x1,
                                           at::OptionalIntArrayRef perm_x2, at::OptionalIntArrayRef perm_y,
                                           std::optional<int64_t> batch_split_factor,
                                           std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype) {
  const TransposeQuantPlan plan = planTransposeQuant(x1, x2, dtype, bias, x1_scale, x2_scale, group_sizes, perm_x1,
                                                     perm_x2, perm_y, batch_split_factor, x1_dtype, x2_dtype);
  at::Tensor out = at::empty(plan.out_shape, x1.options().dtype(plan.out_type));
  // The device op takes the output dtype as an aclDataType code, as upstream passes it.
  const int64_t dtype_code = quant::aclCode(plan.out_type);
  // float8 values are exact in float16: the device op computes on them widened.
  const bool fp8 = isFloat8(x1.scalar_type());
  const at::Tensor a = fp8 ? x1.to(at::kHalf) : x1;
  const at::Tensor b = fp8 ? x2.to(at::kHalf) : x2;
  EXEC_NPU_CMD(aclnnTransposeQuantBatchMatMul, a, b, bias, x1_scale, x2_scale, dtype_code, plan.group_size,
               at::IntArrayRef(plan.perm_x1), at::IntArrayRef(plan.perm_x2), at::IntArrayRef(plan.perm_y), plan.split,
               out);
  return out;
}

at::Tensor npu_transpose_quant_batchmatmul_meta(const at::Tensor& x1, const at::Tensor& x2, int64_t dtype,
                                                const std::optional<at::Tensor>& bias,
                                                const std::optional<at::Tensor>& x1_scale,
                                                const std::optional<at::Tensor>& x2_scale,
                                                at::OptionalIntArrayRef group_sizes, at::OptionalIntArrayRef perm_x1,
                                                at::OptionalIntArrayRef perm_x2, at::OptionalIntArrayRef perm_y,
                                                std::optional<int64_t> batch_split_factor,
                                                std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype) {
  const TransposeQuantPlan plan = planTransposeQuant(x1, x2, dtype, bias, x1_scale, x2_scale, group_sizes, perm_x1,
                                                     perm_x2, perm_y, batch_split_factor, x1_dtype, x2_dtype);
  return at::empty(plan.out_shape, x1.options().dtype(plan.out_type));
}

}  // namespace at_npu::native
