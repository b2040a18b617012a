// SwigluQuantKernelNpu.cpp - swiglu activations quantized in the same pass: npu_swiglu_quant (float input,
// static or dynamic int8 / int4 quantization per MoE group, on aclnnSwiGluQuantV2) and npu_dequant_swiglu_quant
// (int32 matmul output dequantized first, three swiglu variants, int8 or float8 output, on aclnnDequantSwigluQuantV2).
// Inference ops: no gradient upstream.
#include <ATen/ops/empty.h>

#include <cmath>
#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

// --- npu_swiglu_quant ------------------------------------------------------------------------------------------

namespace {

struct SwigluQuantOutputs {
  at::Tensor y, scale;
  int64_t dst_code = 0;  // 2: int8; 29: int4 packed two to an int8 (upstream's int4 output of this op)
};

SwigluQuantOutputs swigluQuantOutputs(const at::Tensor& x, const std::optional<at::Tensor>& smooth_scales,
                                      const std::optional<at::Tensor>& offsets, int64_t quant_mode,
                                      int64_t group_list_type, std::optional<at::ScalarType> dst_type) {
  const char* op = "npu_swiglu_quant";
  quant::checkFloatInput(op, "x", x);
  TORCH_CHECK_VALUE(quant_mode == 0 || quant_mode == 1, op, ": quant_mode must be 0 (static) or 1 (dynamic), got ",
                    quant_mode);
  TORCH_CHECK_VALUE(group_list_type == 0 || group_list_type == 1, op,
                    ": group_list_type must be 0 (cumsum) or 1 (count), got ", group_list_type);
  TORCH_CHECK_VALUE(x.dim() >= 2 && x.size(-1) % 2 == 0, op, ": x must have 2 or more dimensions and an even last ",
                    "dimension, got ", x.sizes());
  TORCH_CHECK_VALUE(quant_mode == 1 || !smooth_scales.has_value() || !offsets.has_value() ||
                        smooth_scales->sizes() == offsets->sizes(),
                    op, ": static quantization takes smooth_scales and offsets of one shape, got ",
                    smooth_scales->sizes(), " and ", offsets->sizes());
  const std::optional<int64_t> code =
      dst_type.has_value() ? std::optional<int64_t>(static_cast<int64_t>(*dst_type)) : std::nullopt;
  const bool int4 = quant::int8OrInt4(op, "dst_type", code) == quant::Target::kInt4;
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() /= 2;
  SwigluQuantOutputs out;
  out.scale = at::empty(at::IntArrayRef(shape).slice(0, shape.size() - 1), x.options().dtype(at::kFloat));
  out.y = at::empty(int4 ? quant::packedShape(op, "half of x", shape, 2) : shape, x.options().dtype(at::kChar));
  out.dst_code = int4 ? quant::kAclInt4 : quant::aclCode(at::kChar);
  return out;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_swiglu_quant(const at::Tensor& x, const std::optional<at::Tensor>& smooth_scales,
                                                    const std::optional<at::Tensor>& offsets,
                                                    const std::optional<at::Tensor>& group_index, bool activate_left,
                                                    int64_t quant_mode, int64_t group_list_type,
                                                    std::optional<at::ScalarType> dst_type) {
  SwigluQuantOutputs out = swigluQuantOutputs(x, smooth_scales, offsets, quant_mode, group_list_type, dst_type);
  const std::string mode = quant_mode == 0 ? "static" : "dynamic";
  EXEC_NPU_CMD(aclnnSwiGluQuantV2, x, smooth_scales, offsets, group_index, activate_left, mode, group_list_type,
               out.dst_code, out.y, out.scale);
  return {out.y, out.scale};
}

std::tuple<at::Tensor, at::Tensor> npu_swiglu_quant_meta(const at::Tensor& x,
                                                         const std::optional<at::Tensor>& smooth_scales,
                                                         const std::optional<at::Tensor>& offsets,
                                                         const std::optional<at::Tensor>& group_index,
                                                         bool activate_left, int64_t quant_mode,
                                                         int64_t group_list_type,
                                                         std::optional<at::ScalarType> dst_type) {
  SwigluQuantOutputs out = swigluQuantOutputs(x, smooth_scales, offsets, quant_mode, group_list_type, dst_type);
  return {out.y, out.scale};
}

// --- npu_dequant_swiglu_quant ----------------------------------------------------------------------------------

namespace {

// round_mode's codes, as torch_npu numbers them.
constexpr const char* kRoundModes[] = {"rint", "round", "floor", "ceil", "trunc"};

struct DequantSwigluPlan {
  std::vector<int64_t> y_shape, scale_shape;
  int64_t activate_dim = -1;  // wrapped to [0, x.dim())
  std::string round_mode;
  at::ScalarType y_type = at::kChar;  // int8, or a float8 dtype
};

DequantSwigluPlan planDequantSwiglu(const at::Tensor& x, int64_t quant_mode, std::optional<int64_t> dst_type,
                                    std::optional<int64_t> round_mode, std::optional<int64_t> activate_dim,
                                    int64_t swiglu_mode, double clamp_limit, double glu_alpha, double glu_bias) {
  const char* op = "npu_dequant_swiglu_quant";
  TORCH_CHECK_VALUE(x.dim() >= 2, op, ": x must have 2 or more dimensions, got ", x.sizes());
  TORCH_CHECK_TYPE(x.scalar_type() == at::kInt || x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16 ||
                       x.scalar_type() == at::kFloat,
                   op, ": x must be int32 (a matmul's accumulator), float16, bfloat16 or float32, got ",
                   x.scalar_type());
  TORCH_CHECK_VALUE(quant_mode == 0 || quant_mode == 1, op, ": quant_mode must be 0 (static) or 1 (dynamic), got ",
                    quant_mode);
  TORCH_CHECK_VALUE(swiglu_mode >= 0 && swiglu_mode <= 2, op, ": swiglu_mode must be 0, 1 or 2, got ", swiglu_mode);
  TORCH_CHECK_VALUE(std::isfinite(clamp_limit) && clamp_limit > 0.0, op,
                    ": clamp_limit must be positive and finite, got ", clamp_limit);
  TORCH_CHECK_VALUE(std::isfinite(glu_alpha) && std::isfinite(glu_bias), op, ": glu_alpha and glu_bias must be finite");
  DequantSwigluPlan plan;
  if (dst_type.has_value()) {
    const std::optional<at::ScalarType> holder = quant::floatTargetHolder(*dst_type);
    TORCH_CHECK_VALUE((holder.has_value() && holder != at::kByte) ||
                          quant::targetOf(op, "dst_type", *dst_type) == quant::Target::kInt8,
                      op, ": dst_type must be torch.int8, torch_npu.float8_e5m2 or torch_npu.float8_e4m3fn, got ",
                      *dst_type);
    if (holder.has_value()) plan.y_type = *holder;
  }
  const int64_t mode = round_mode.value_or(0);
  TORCH_CHECK_VALUE(mode >= 0 && mode <= 4, op, ": round_mode must be 0 (rint), 1 (round), 2 (floor), 3 (ceil) or ",
                    "4 (trunc), got ", mode);
  TORCH_CHECK_VALUE(mode == 0, op, ": round_mode ", mode, " ('", kRoundModes[mode], "') applies to hifloat8 / float4 ",
                    "outputs; int8 and float8 outputs are rounded with 0 ('rint')");
  plan.round_mode = kRoundModes[mode];
  const int64_t dim = activate_dim.value_or(-1);
  TORCH_CHECK_VALUE(dim >= -x.dim() && dim < x.dim(), op, ": activate_dim ", dim, " is out of range for a ", x.dim(),
                    "-d x");
  plan.activate_dim = dim < 0 ? dim + x.dim() : dim;
  TORCH_CHECK_VALUE(x.size(plan.activate_dim) % 2 == 0, op, ": x's dimension ", plan.activate_dim,
                    " (the one split in halves) must be even, got ", x.sizes());
  plan.y_shape = x.sizes().vec();
  plan.y_shape[static_cast<size_t>(plan.activate_dim)] /= 2;
  plan.scale_shape.assign(plan.y_shape.begin(), plan.y_shape.end() - 1);
  return plan;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_dequant_swiglu_quant(
    const at::Tensor& x, const std::optional<at::Tensor>& weight_scale,
    const std::optional<at::Tensor>& activation_scale, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& quant_scale, const std::optional<at::Tensor>& quant_offset,
    const std::optional<at::Tensor>& group_index, bool activate_left, int64_t quant_mode,
    std::optional<int64_t> dst_type, std::optional<int64_t> round_mode, std::optional<int64_t> activate_dim,
    int64_t swiglu_mode, double clamp_limit, double glu_alpha, double glu_bias) {
  const DequantSwigluPlan plan = planDequantSwiglu(x, quant_mode, dst_type, round_mode, activate_dim, swiglu_mode,
                                                   clamp_limit, glu_alpha, glu_bias);
  at::Tensor y = at::empty(plan.y_shape, x.options().dtype(plan.y_type));
  at::Tensor scale = at::empty(plan.scale_shape, x.options().dtype(at::kFloat));
  const std::string mode = quant_mode == 0 ? "static" : "dynamic";
  const AclTensorAs y_out = quant::quantizedOutput(y);
  const int64_t dst_code = y_out.dtype;
  EXEC_NPU_CMD(aclnnDequantSwigluQuantV2, x, weight_scale, activation_scale, bias, quant_scale, quant_offset,
               group_index, activate_left, mode, dst_code, plan.round_mode, plan.activate_dim, swiglu_mode, clamp_limit,
               glu_alpha, glu_bias, y_out, scale);
  return {y, scale};
}

std::tuple<at::Tensor, at::Tensor> npu_dequant_swiglu_quant_meta(
    const at::Tensor& x, const std::optional<at::Tensor>& weight_scale,
    const std::optional<at::Tensor>& activation_scale, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& quant_scale, const std::optional<at::Tensor>& quant_offset,
    const std::optional<at::Tensor>& group_index, bool activate_left, int64_t quant_mode,
    std::optional<int64_t> dst_type, std::optional<int64_t> round_mode, std::optional<int64_t> activate_dim,
    int64_t swiglu_mode, double clamp_limit, double glu_alpha, double glu_bias) {
  const DequantSwigluPlan plan = planDequantSwiglu(x, quant_mode, dst_type, round_mode, activate_dim, swiglu_mode,
                                                   clamp_limit, glu_alpha, glu_bias);
  return {at::empty(plan.y_shape, x.options().dtype(plan.y_type)),
          at::empty(plan.scale_shape, x.options().dtype(at::kFloat))};
}

}  // namespace at_npu::native
