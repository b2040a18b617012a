// QuantMaxKernelNpu.cpp - npu_quant_max: static quantization y = round(x * scale) together with amax = max |x|, for
// all of x (aclnnQuantMax) or per row group along x's first dimension (aclnnGroupedQuantMax). Targets: float8_e5m2
// (upstream's default, 291), float8_e4m3fn, hifloat8 (codes in a uint8 tensor, as upstream holds them) and int8.
// Inference op: no gradient upstream.
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

// y's dtype for dst_dtype: float8_e5m2 / float8_e4m3fn (torch dtypes or torch_npu codes), hifloat8 (uint8 codes)
// or int8.
at::ScalarType quantMaxTarget(int64_t dst_dtype) {
  if (const auto holder = quant::floatTargetHolder(dst_dtype)) return *holder;
  const bool int8 = dst_dtype == static_cast<int64_t>(at::kChar) || dst_dtype == static_cast<int64_t>(at::kQInt8) ||
                    dst_dtype == dtype_codes::kNpuDtypeOffset + 2;
  TORCH_CHECK_VALUE(int8, kQuantMaxOp, ": dst_dtype must be torch_npu.float8_e5m2, torch_npu.float8_e4m3fn, ",
                    "torch_npu.hifloat8 or torch.int8 (torch's float8 dtypes work too), got ", dst_dtype);
  return at::kChar;
}

std::tuple<at::Tensor, at::Tensor> quantMaxOutputs(const at::Tensor& x, const at::Tensor& scale,
                                                   c10::string_view round_mode, int64_t dst_dtype,
                                                   const std::optional<at::Tensor>& group_list) {
  const char* op = kQuantMaxOp;
  quant::checkFloatInput(op, "x", x);
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.dim() <= 8, op, ": x must have 1 to 8 dimensions, got ", x.sizes());
  const at::ScalarType y_type = quantMaxTarget(dst_dtype);
  TORCH_CHECK_VALUE(round_mode != "hybrid", op, ": round_mode 'hybrid' (one of the chip's hifloat8 roundings) is not ",
                    "provided; use 'round' for hifloat8");
  TORCH_CHECK_VALUE(round_mode == "rint" || round_mode == "round" || round_mode == "floor" || round_mode == "ceil" ||
                        round_mode == "trunc",
                    op, ": round_mode must be 'rint', 'round', 'floor', 'ceil' or 'trunc', got '",
                    std::string(round_mode), "'");
  if (dst_dtype == dtype_codes::kHiFloat8Code) {
    TORCH_CHECK_VALUE(round_mode == "round", op, ": hifloat8 rounds half away from zero: round_mode must be 'round', ",
                      "got '", std::string(round_mode), "'");
  } else if (y_type != at::kChar) {
    TORCH_CHECK_VALUE(round_mode == "rint", op, ": float8 rounds to nearest even: round_mode must be 'rint', got '",
                      std::string(round_mode), "'");
  }
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
  return {at::empty(x.sizes(), x.options().dtype(y_type)), at::empty({groups}, x.options())};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_quant_max(const at::Tensor& x, const at::Tensor& scale,
                                                 c10::string_view round_mode, int64_t dst_dtype,
                                                 const std::optional<at::Tensor>& group_list) {
  auto [y, amax] = quantMaxOutputs(x, scale, round_mode, dst_dtype, group_list);
  const std::string mode(round_mode);
  // The device op's dstType is the target's aclDataType; a float target's bytes travel in a uint8 view of y.
  int64_t dst_code = quant::aclCode(at::kChar);
  at::Tensor y_bytes = y;
  if (y.scalar_type() != at::kChar) {
    dst_code = y.scalar_type() == at::kByte ? 34 : (y.scalar_type() == at::ScalarType::Float8_e5m2 ? 35 : 36);
    y_bytes = y.view(at::kByte);
  }
  if (grouped(group_list)) {
    const at::Tensor& groups = *group_list;
    EXEC_NPU_CMD(aclnnGroupedQuantMax, x, scale, groups, mode, dst_code, y_bytes, amax);
  } else {
    EXEC_NPU_CMD(aclnnQuantMax, x, scale, mode, dst_code, y_bytes, amax);
  }
  return {y, amax};
}

std::tuple<at::Tensor, at::Tensor> npu_quant_max_meta(const at::Tensor& x, const at::Tensor& scale,
                                                      c10::string_view round_mode, int64_t dst_dtype,
                                                      const std::optional<at::Tensor>& group_list) {
  return quantMaxOutputs(x, scale, round_mode, dst_dtype, group_list);
}

}  // namespace at_npu::native
