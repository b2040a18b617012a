// AddQuantMatmulKernelNpu.cpp - npu_add_quant_matmul_ / npu_add_quant_matmul: self (M, N) float32 += the quantised
// product x1 (M, K) @ x2 (K, N) dequantised by x2_scale and x1_scale (micro-batch gradient accumulation), in place or
// on a copy of self, on aclnnQuantBatchMatmulInplaceAdd. Upstream's operands are hifloat8 / float8 with per-tensor or
// mx scales; the software NPU has neither number format, so int8 operands with float32 scales take their part.
// torch_npu defines no gradient for them.
#include <ATen/ops/empty_like.h>

#include <algorithm>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_add_quant_matmul";

void refuseChipCode(const char* arg, std::optional<int64_t> code) {
  if (!code.has_value()) return;
  const char* chip = quant::chipFormatName(*code);
  TORCH_CHECK_VALUE(chip == nullptr, kOp, ": ", arg, " selects ", chip, ", a chip number format the software NPU ",
                    "does not have; pass int8 operands with float32 scales and leave ", arg, " None");
  TORCH_CHECK_VALUE(false, kOp, ": ", arg, " only names chip number formats (hifloat8 / float8_e8m0) upstream; leave ",
                    "it None, got ", *code);
}

void checkNotChip(const char* what, const at::Tensor& t) {
  const char* chip = quant::chipFormatName(static_cast<int64_t>(t.scalar_type()));
  TORCH_CHECK_TYPE(chip == nullptr, kOp, ": ", what, " is ", chip, ", a chip number format the software NPU does not ",
                   "have; quantise to int8 with float32 scales instead");
}

void checkScale(const char* what, const at::Tensor& s, int64_t len) {
  checkNotChip(what, s);
  TORCH_CHECK_VALUE(s.dim() == 1, kOp, ": ", what, " ", s.sizes(), " is an mx block scale (3-D, float8_e8m0), a chip ",
                    "number format the software NPU does not have; pass a float32 scale of shape (1,) or (", len,
                    ",)");
  TORCH_CHECK_TYPE(s.scalar_type() == at::kFloat, kOp, ": ", what, " must be float32, got ", s.scalar_type());
  TORCH_CHECK_VALUE(s.size(0) == 1 || s.size(0) == len, kOp, ": ", what, " must have shape (1,) or (", len,
                    ",), got ", s.sizes());
}

void checkAddQuantMatmul(const at::Tensor& self, const at::Tensor& x1, const at::Tensor& x2,
                         const at::Tensor& x2_scale, const std::optional<at::Tensor>& x1_scale,
                         at::OptionalIntArrayRef group_sizes, std::optional<int64_t> x1_dtype,
                         std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype,
                         std::optional<int64_t> x2_scale_dtype) {
  refuseChipCode("x1_dtype", x1_dtype);
  refuseChipCode("x2_dtype", x2_dtype);
  refuseChipCode("x1_scale_dtype", x1_scale_dtype);
  refuseChipCode("x2_scale_dtype", x2_scale_dtype);
  if (group_sizes.has_value() && !group_sizes->empty()) {
    TORCH_CHECK_VALUE(group_sizes->size() == 3, kOp, ": group_sizes must be [group_m, group_n, group_k], got ",
                      *group_sizes);
    TORCH_CHECK_VALUE(std::all_of(group_sizes->begin(), group_sizes->end(), [](int64_t g) { return g == 0; }), kOp,
                      ": group_sizes ", *group_sizes, " selects mx block quantisation, a chip number format the "
                      "software NPU does not have; leave it None (or [0, 0, 0])");
  }
  checkNotChip("x1", x1);
  checkNotChip("x2", x2);
  TORCH_CHECK_TYPE(x1.scalar_type() == at::kChar && x2.scalar_type() == at::kChar, kOp,
                   ": x1 and x2 must be int8, got ", x1.scalar_type(), " and ", x2.scalar_type());
  TORCH_CHECK_VALUE(x1.dim() == 2 && x2.dim() == 2, kOp, ": x1 (M, K) and x2 (K, N) must be 2-D, got ", x1.sizes(),
                    " and ", x2.sizes());
  TORCH_CHECK_VALUE(x1.size(1) == x2.size(0), kOp, ": x1 ", x1.sizes(), " and x2 ", x2.sizes(),
                    " do not multiply: x1's last dimension (K) must equal x2's first");
  const int64_t m = x1.size(0), n = x2.size(1);
  TORCH_CHECK_TYPE(self.scalar_type() == at::kFloat, kOp, ": self accumulates in float32, got ", self.scalar_type());
  TORCH_CHECK_VALUE(self.dim() == 2 && self.size(0) == m && self.size(1) == n, kOp, ": self must be (M, N) = (", m,
                    ", ", n, "), got ", self.sizes());
  checkScale("x2_scale", x2_scale, n);
  if (x1_scale.has_value() && x1_scale->defined()) checkScale("x1_scale", *x1_scale, m);
}

}  // namespace

at::Tensor& npu_add_quant_matmul_(at::Tensor& self, const at::Tensor& x1, const at::Tensor& x2,
                                  const at::Tensor& x2_scale, const std::optional<at::Tensor>& x1_scale,
                                  at::OptionalIntArrayRef group_sizes, std::optional<int64_t> x1_dtype,
                                  std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype,
                                  std::optional<int64_t> x2_scale_dtype) {
  checkAddQuantMatmul(self, x1, x2, x2_scale, x1_scale, group_sizes, x1_dtype, x2_dtype, x1_scale_dtype,
                      x2_scale_dtype);
  const bool transpose = false;  // x1 / x2 arrive as (M, K) / (K, N) views; their strides carry any transpose
  const int64_t group_size = 0;  // no mx blocks
  EXEC_NPU_CMD(aclnnQuantBatchMatmulInplaceAdd, x1, x2, x1_scale, x2_scale, self, transpose, transpose, group_size);
  return self;
}

at::Tensor& npu_add_quant_matmul_inplace_meta(at::Tensor& self, const at::Tensor& x1, const at::Tensor& x2,
                                              const at::Tensor& x2_scale, const std::optional<at::Tensor>& x1_scale,
                                              at::OptionalIntArrayRef group_sizes, std::optional<int64_t> x1_dtype,
                                              std::optional<int64_t> x2_dtype,
                                              std::optional<int64_t> x1_scale_dtype,
                                              std::optional<int64_t> x2_scale_dtype) {
  checkAddQuantMatmul(self, x1, x2, x2_scale, x1_scale, group_sizes, x1_dtype, x2_dtype, x1_scale_dtype,
                      x2_scale_dtype);
  return self;
}

// The functional form accumulates into a copy and leaves self untouched.
at::Tensor npu_add_quant_matmul(const at::Tensor& self, const at::Tensor& x1, const at::Tensor& x2,
                                const at::Tensor& x2_scale, const std::optional<at::Tensor>& x1_scale,
                                at::OptionalIntArrayRef group_sizes, std::optional<int64_t> x1_dtype,
                                std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype,
                                std::optional<int64_t> x2_scale_dtype) {
  at::Tensor out = self.clone();
  return npu_add_quant_matmul_(out, x1, x2, x2_scale, x1_scale, group_sizes, x1_dtype, x2_dtype, x1_scale_dtype,
                               x2_scale_dtype);
}

at::Tensor npu_add_quant_matmul_meta(const at::Tensor& self, const at::Tensor& x1, const at::Tensor& x2,
                                     const at::Tensor& x2_scale, const std::optional<at::Tensor>& x1_scale,
                                     at::OptionalIntArrayRef group_sizes, std::optional<int64_t> x1_dtype,
                                     std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype,
                                     std::optional<int64_t> x2_scale_dtype) {
  checkAddQuantMatmul(self, x1, x2, x2_scale, x1_scale, group_sizes, x1_dtype, x2_dtype, x1_scale_dtype,
                      x2_scale_dtype);
  return at::empty_like(self);
}

}  // namespace at_npu::native
