// QuantMaxKernelNpu.cpp - npu_quant_max: static quantization y = round(x * scale) together with amax = max |x|, for
// all of x (aclnnQuantMax) or per row group along x's first dimension (aclnnGroupedQuantMax). Upstream targets
// only the chip formats float8 / hifloat8 (its default, 291, is float8_e5m2); the software NPU stores int8 and
// refuses those by name. Inference op: no gradient upstream.
#include <ATen/ops/empty.h>

#include <string>
#include <tuple>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kQuantMaxOp = "npu_quant_max";

bool present(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

// Upstream takes the plain path for no group_list or a single group.
bool grouped(const std::optional<at::Tensor>& group_list) {
  return present(group_list) && group_list->dim() >= 1 && group_list->size(0) > 1;
}

std::tuple<at::Tensor, at::Tensor> quantMaxOutputs(const at::Tensor& x, const at::Tensor& scale,
                                                   c10::string_view round_mode, int64_t dst_dtype,
                                                   const std::optional<at::Tensor>& group_list) {
  const char* op = kQuantMaxOp;
  quant::checkFloatInput(op, "x", x);
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.dim() <= 8, op, ": x must have 1 to 8 dimensions, got ", x.sizes());
  TORCH_CHECK_VALUE(quant::targetOf(op, "dst_dtype", dst_dtype) == quant::Target::kInt8, op,
                    ": dst_dtype must be torch.int8 (the software NPU's target; upstream's float8 / hifloat8 are ",
                    "chip number formats), got ", dst_dtype);
  TORCH_CHECK_VALUE(round_mode != "hybrid", op, ": round_mode 'hybrid' is for hifloat8, a chip number format the ",
                    "software NPU does not have");
  TORCH_CHECK_VALUE(round_mode == "rint" || round_mode == "round" || round_mode == "floor" || round_mode == "ceil" ||
                        round_mode == "trunc",
                    op, ": round_mode must be 'rint', 'round', 'floor', 'ceil' or 'trunc', got '",
                    std::string(round_mode), "'");
  int64_t groups = 1;
  if (present(group_list)) {
    TORCH_CHECK_TYPE(group_list->scalar_type() == at::kLong || group_list->scalar_type() == at::kInt, op,
                     ": group_list must be int64 (or int32), got ", group_list->scalar_type());
    TORCH_CHECK_VALUE(group_list->dim() == 1 && group_list->size(0) >= 1, op,
                      ": group_list must be a non-empty 1-d tensor of cumulative row ends, got ", group_list->sizes());
    groups = group_list->size(0);
  }
  TORCH_CHECK_TYPE(scale.scalar_type() == at::kFloat, op, ": scale must be float32, got ", scale.scalar_type());
  TORCH_CHECK_VALUE(scale.dim() == 1 && scale.size(0) == groups, op, ": scale must be [", groups,
                    "] (one value per group of group_list, 1 without it), got ", scale.sizes());
  return {at::empty(x.sizes(), x.options().dtype(at::kChar)), at::empty({groups}, x.options())};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_quant_max(const at::Tensor& x, const at::Tensor& scale,
                                                 c10::string_view round_mode, int64_t dst_dtype,
                                                 const std::optional<at::Tensor>& group_list) {
  auto [y, amax] = quantMaxOutputs(x, scale, round_mode, dst_dtype, group_list);
  const std::string mode(round_mode);
  const int64_t dst_code = quant::aclCode(at::kChar);
  if (grouped(group_list)) {
    const at::Tensor& groups = *group_list;
    EXEC_NPU_CMD(aclnnGroupedQuantMax, x, scale, groups, mode, dst_code, y, amax);
  } else {
    EXEC_NPU_CMD(aclnnQuantMax, x, scale, mode, dst_code, y, amax);
  }
  return {y, amax};
}

std::tuple<at::Tensor, at::Tensor> npu_quant_max_meta(const at::Tensor& x, const at::Tensor& scale,
                                                      c10::string_view round_mode, int64_t dst_dtype,
                                                      const std::optional<at::Tensor>& group_list) {
  return quantMaxOutputs(x, scale, round_mode, dst_dtype, group_list);
}

}  // namespace at_npu::native
