// AddQuantGroupedMatmulKernelNpu.cpp - npu_add_quant_gmm_ / npu_add_quant_gmm: for the k groups of group_list,
// self[g] (M, N) float32 += (x1[:, k_g] @ x2[k_g, :]) * x2_scale[g] * x1_scale[g] (MoE weight gradients of quantised
// micro-batches, accumulated), in place or on a copy of self, on aclnnQuantGroupedMatmulInplaceAdd. Upstream's
// operands are hifloat8 / float8 (T-C or mx quantisation); the software NPU has neither number format, so int8
// operands with float32 scales take their part. torch_npu defines no gradient for them.
#include <ATen/ops/empty_like.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kOp = "npu_add_quant_gmm";

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

void checkAddQuantGmm(const at::Tensor& self, const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& x2_scale,
                      const at::Tensor& group_list, const std::optional<at::Tensor>& x1_scale,
                      int64_t group_list_type, at::OptionalIntArrayRef group_sizes, std::optional<int64_t> x1_dtype,
                      std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype,
                      std::optional<int64_t> x2_scale_dtype) {
  refuseChipCode("x1_dtype", x1_dtype);
  refuseChipCode("x2_dtype", x2_dtype);
  refuseChipCode("x1_scale_dtype", x1_scale_dtype);
  refuseChipCode("x2_scale_dtype", x2_scale_dtype);
  // As upstream: the groups are whole k ranges, never blocks.
  TORCH_CHECK_VALUE(!group_sizes.has_value(), kOp, ": group_sizes is not supported (as in torch_npu); leave it None");
  TORCH_CHECK_VALUE(group_list_type == 0 || group_list_type == 1, kOp, ": group_list_type must be 0 (cumulative k ",
                    "ends) or 1 (k sizes), got ", group_list_type);
  checkNotChip("x1", x1);
  checkNotChip("x2", x2);
  TORCH_CHECK_TYPE(x1.scalar_type() == at::kChar && x2.scalar_type() == at::kChar, kOp,
                   ": x1 and x2 must be int8, got ", x1.scalar_type(), " and ", x2.scalar_type());
  TORCH_CHECK_VALUE(x1.dim() == 2 && x2.dim() == 2, kOp, ": x1 (M, K) and x2 (K, N) must be 2-D, got ", x1.sizes(),
                    " and ", x2.sizes());
  TORCH_CHECK_VALUE(x1.size(1) == x2.size(0), kOp, ": x1 ", x1.sizes(), " and x2 ", x2.sizes(),
                    " split different k: x1's last dimension must equal x2's first");
  TORCH_CHECK_TYPE(group_list.scalar_type() == at::kLong, kOp, ": group_list must be int64, got ",
                   group_list.scalar_type());
  TORCH_CHECK_VALUE(group_list.dim() == 1 && group_list.numel() > 0, kOp,
                    ": group_list must be a non-empty 1-D tensor, got ", group_list.sizes());
  const int64_t groups = group_list.size(0), m = x1.size(0), n = x2.size(1);
  TORCH_CHECK_TYPE(self.scalar_type() == at::kFloat, kOp, ": self accumulates in float32, got ", self.scalar_type());
  TORCH_CHECK_VALUE(self.dim() >= 2 && self.size(-1) == n && self.numel() == groups * m * n, kOp,
                    ": self must hold ", groups, " groups of (", m, ", ", n, ") ((", groups, ", ", m, ", ", n,
                    ") or (", groups * m, ", ", n, ")), got ", self.sizes());
  checkNotChip("x2_scale", x2_scale);
  TORCH_CHECK_TYPE(x2_scale.scalar_type() == at::kFloat, kOp, ": x2_scale must be float32, got ",
                   x2_scale.scalar_type());
  TORCH_CHECK_VALUE(x2_scale.dim() >= 1 && x2_scale.size(0) == groups &&
                        ((x2_scale.dim() == 2 && (x2_scale.size(1) == n || x2_scale.size(1) == 1)) ||
                         x2_scale.dim() == 1),
                    kOp, ": x2_scale must be (", groups, ", ", n, ") per channel, or (", groups, ", 1) / (", groups,
                    ",) per group (3-D mx scales are a chip number format the software NPU does not have), got ",
                    x2_scale.sizes());
  if (x1_scale.has_value() && x1_scale->defined()) {
    checkNotChip("x1_scale", *x1_scale);
    TORCH_CHECK_TYPE(x1_scale->scalar_type() == at::kFloat, kOp, ": x1_scale must be float32, got ",
                     x1_scale->scalar_type());
    TORCH_CHECK_VALUE(x1_scale->dim() == 1 && x1_scale->size(0) == groups, kOp, ": x1_scale must be (", groups,
                      ",), one per group (mx block scales are a chip number format the software NPU does not ",
                      "have), got ", x1_scale->sizes());
  }
}

}  // namespace

at::Tensor& npu_add_quant_gmm_(at::Tensor& self, const at::Tensor& x1, const at::Tensor& x2,
                               const at::Tensor& x2_scale, const at::Tensor& group_list,
                               const std::optional<at::Tensor>& x1_scale, std::optional<int64_t> group_list_type,
                               at::OptionalIntArrayRef group_sizes, std::optional<int64_t> x1_dtype,
                               std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype,
                               std::optional<int64_t> x2_scale_dtype) {
  const int64_t list_type = group_list_type.value_or(0);
  checkAddQuantGmm(self, x1, x2, x2_scale, group_list, x1_scale, list_type, group_sizes, x1_dtype, x2_dtype,
                   x1_scale_dtype, x2_scale_dtype);
  const int64_t group_size = 0;  // no mx blocks
  EXEC_NPU_CMD(aclnnQuantGroupedMatmulInplaceAdd, x1, x2, x1_scale, x2_scale, group_list, self, list_type,
               group_size);
  return self;
}

at::Tensor& npu_add_quant_gmm_inplace_meta(at::Tensor& self, const at::Tensor& x1, const at::Tensor& x2,
                                           const at::Tensor& x2_scale, const at::Tensor& group_list,
                                           const std::optional<at::Tensor>& x1_scale,
                                           std::optional<int64_t> group_list_type,
                                           at::OptionalIntArrayRef group_sizes, std::optional<int64_t> x1_dtype,
                                           std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype,
                                           std::optional<int64_t> x2_scale_dtype) {
  checkAddQuantGmm(self, x1, x2, x2_scale, group_list, x1_scale, group_list_type.value_or(0), group_sizes, x1_dtype,
                   x2_dtype, x1_scale_dtype, x2_scale_dtype);
  return self;
}

// The functional form accumulates into a copy and leaves self untouched.
at::Tensor npu_add_quant_gmm(const at::Tensor& self, const at::Tensor& x1, const at::Tensor& x2,
                             const at::Tensor& x2_scale, const at::Tensor& group_list,
                             const std::optional<at::Tensor>& x1_scale, std::optional<int64_t> group_list_type,
                             at::OptionalIntArrayRef group_sizes, std::optional<int64_t> x1_dtype,
                             std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype,
                             std::optional<int64_t> x2_scale_dtype) {
  at::Tensor out = self.clone();
  return npu_add_quant_gmm_(out, x1, x2, x2_scale, group_list, x1_scale, group_list_type, group_sizes, x1_dtype,
                            x2_dtype, x1_scale_dtype, x2_scale_dtype);
}

at::Tensor npu_add_quant_gmm_meta(const at::Tensor& self, const at::Tensor& x1, const at::Tensor& x2,
                                  const at::Tensor& x2_scale, const at::Tensor& group_list,
                                  const std::optional<at::Tensor>& x1_scale, std::optional<int64_t> group_list_type,
                                  at::OptionalIntArrayRef group_sizes, std::optional<int64_t> x1_dtype,
                                  std::optional<int64_t> x2_dtype, std::optional<int64_t> x1_scale_dtype,
                                  std::optional<int64_t> x2_scale_dtype) {
  checkAddQuantGmm(self, x1, x2, x2_scale, group_list, x1_scale, group_list_type.value_or(0), group_sizes, x1_dtype,
                   x2_dtype, x1_scale_dtype, x2_scale_dtype);
  return at::empty_like(self);
}

}  // namespace at_npu::native
