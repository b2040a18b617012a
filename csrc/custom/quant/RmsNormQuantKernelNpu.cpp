// RmsNormQuantKernelNpu.cpp - rms norm with the quantization of its output fused in: npu_rms_norm_quant (static,
// int8, int4, hifloat8 or float8, on aclnnRmsNormQuant), npu_add_rms_norm_quant (residual add, two static int8 /
// hifloat8 / float8 outputs, on aclnnAddRmsNormQuantV2) and npu_add_rms_norm_dynamic_quant (residual add, one or two dynamic int8 / int4
// outputs with smoothing, on aclnnAddRmsNormDynamicQuantV2). Inference ops: no gradient upstream.
#include <ATen/ops/empty.h>

#include <array>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

struct QuantizedLayout {
  std::vector<int64_t> shape;
  at::ScalarType type = at::kChar;
};

// int8 y of x's shape, or int4 packed eight to an int32 (torch.quint4x2); with `floats`, also hifloat8 (codes in
// uint8) or float8 of x's shape.
QuantizedLayout quantizedLayout(const char* op, const char* arg, const at::Tensor& x, std::optional<int64_t> dst,
                                bool floats = false) {
  if (floats && dst.has_value()) {
    if (const auto holder = quant::floatTargetHolder(*dst)) return {x.sizes().vec(), *holder};
  }
  if (quant::int8OrInt4(op, arg, dst) == quant::Target::kInt4) {
    return {quant::packedShape(op, "x", x.sizes(), 8), at::kInt};
  }
  return {x.sizes().vec(), at::kChar};
}

at::Tensor quantizedLike(const char* op, const char* arg, const at::Tensor& x, std::optional<int64_t> dst,
                         bool floats = false) {
  const QuantizedLayout layout = quantizedLayout(op, arg, x, dst, floats);
  return at::empty(layout.shape, x.options().dtype(layout.type));
}


void checkAddInputs(const char* op, const at::Tensor& x1, const at::Tensor& x2) {
  quant::checkFloatInput(op, "x1", x1);
  TORCH_CHECK_VALUE(x1.sizes() == x2.sizes() && x1.scalar_type() == x2.scalar_type(), op,
                    ": x1 and x2 must have one shape and dtype, got ", x1.sizes(), " ", x1.scalar_type(), " and ",
                    x2.sizes(), " ", x2.scalar_type());
}

}  // namespace

// --- npu_rms_norm_quant ----------------------------------------------------------------------------------------

at::Tensor npu_rms_norm_quant(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                              const at::Tensor& scale, const at::Tensor& offset, double epsilon,
                              std::optional<int64_t> dst_dtype) {
  quant::checkFloatInput("npu_rms_norm_quant", "x", x);
  at::Tensor y = quantizedLike("npu_rms_norm_quant", "dst_dtype", x, dst_dtype, /*floats=*/true);
  const AclTensorAs y_out = quant::quantizedOutput(y);
  EXEC_NPU_CMD(aclnnRmsNormQuant, x, gamma, beta, scale, offset, epsilon, y_out);
  return y;
}

at::Tensor npu_rms_norm_quant_meta(const at::Tensor& x, const at::Tensor& gamma, const at::Tensor& beta,
                                   const at::Tensor& scale, const at::Tensor& offset, double epsilon,
                                   std::optional<int64_t> dst_dtype) {
  quant::checkFloatInput("npu_rms_norm_quant", "x", x);
  return quantizedLike("npu_rms_norm_quant", "dst_dtype", x, dst_dtype, /*floats=*/true);
}

// --- npu_add_rms_norm_quant ------------------------------------------------------------------------------------

namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> addRmsNormQuantOutputs(const at::Tensor& x1, const at::Tensor& x2,
                                                                      int64_t axis, std::optional<int64_t> dst_type) {
  const char* op = "npu_add_rms_norm_quant";
  checkAddInputs(op, x1, x2);
  TORCH_CHECK_VALUE(axis == -1, op, ": axis must be -1 (the only one torch_npu supports), got ", axis);
  std::optional<at::ScalarType> holder = dst_type.has_value() ? quant::floatTargetHolder(*dst_type) : std::nullopt;
  TORCH_CHECK_VALUE(holder.has_value() || !dst_type.has_value() ||
                        quant::targetOf(op, "dst_type", *dst_type) == quant::Target::kInt8,
                    op, ": dst_type must be torch.int8, torch_npu.hifloat8, torch_npu.float8_e5m2 or ",
                    "torch_npu.float8_e4m3fn, got ", dst_type.value_or(0));
  const at::ScalarType y_type = holder.value_or(at::kChar);
  return {at::empty(x1.sizes(), x1.options().dtype(y_type)), at::empty(x1.sizes(), x1.options().dtype(y_type)),
          at::empty(x1.sizes(), x1.options())};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_add_rms_norm_quant(
    const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& gamma, const at::Tensor& scales1,
    const std::optional<at::Tensor>& zero_points1, const std::optional<at::Tensor>& beta,
    const std::optional<at::Tensor>& scales2, const std::optional<at::Tensor>& zero_points2, int64_t axis,
    double epsilon, bool div_mode, std::optional<int64_t> dst_type) {
  auto [y1, y2, x] = addRmsNormQuantOutputs(x1, x2, axis, dst_type);
  const at::Tensor rms_norm_out;  // the device op's optional fourth output: not returned by torch_npu
  const AclTensorAs y1_out = quant::quantizedOutput(y1), y2_out = quant::quantizedOutput(y2);
  EXEC_NPU_CMD(aclnnAddRmsNormQuantV2, x1, x2, gamma, scales1, scales2, zero_points1, zero_points2, beta, axis,
               epsilon, div_mode, y1_out, y2_out, x, rms_norm_out);
  return {y1, y2, x};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_add_rms_norm_quant_meta(
    const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& gamma, const at::Tensor& scales1,
    const std::optional<at::Tensor>& zero_points1, const std::optional<at::Tensor>& beta,
    const std::optional<at::Tensor>& scales2, const std::optional<at::Tensor>& zero_points2, int64_t axis,
    double epsilon, bool div_mode, std::optional<int64_t> dst_type) {
  return addRmsNormQuantOutputs(x1, x2, axis, dst_type);
}

// --- npu_add_rms_norm_dynamic_quant ----------------------------------------------------------------------------

namespace {

struct AddRmsNormDynamicQuantOutputs {
  at::Tensor y1, y2, x, scale1, scale2;
  std::vector<int64_t> mask;  // empty: no output_mask given
};

// Which branches run: output_mask when given (smooth scales need their branch on), else branch 1 always and branch
// 2 when both smooth scales are given. A branch that does not run returns 0-d tensors, as torch_npu does.
AddRmsNormDynamicQuantOutputs addRmsNormDynamicQuantOutputs(const at::Tensor& x1, const at::Tensor& x2,
                                                            const std::optional<at::Tensor>& smooth_scale1,
                                                            const std::optional<at::Tensor>& smooth_scale2,
                                                            std::optional<std::array<bool, 2>> output_mask,
                                                            std::optional<int64_t> y_dtype) {
  const char* op = "npu_add_rms_norm_dynamic_quant";
  checkAddInputs(op, x1, x2);
  TORCH_CHECK_VALUE(x1.dim() >= 2 && x1.dim() <= 8, op, ": x1 must have 2 to 8 dimensions, got ", x1.sizes());
  bool on1 = true, on2 = smooth_scale1.has_value() && smooth_scale2.has_value();
  AddRmsNormDynamicQuantOutputs out;
  if (output_mask.has_value()) {
    on1 = (*output_mask)[0];
    on2 = (*output_mask)[1];
    TORCH_CHECK_VALUE(on1 || on2, op, ": output_mask must enable at least one of y1 and y2");
    TORCH_CHECK_VALUE((on1 || !smooth_scale1.has_value()) && (on2 || !smooth_scale2.has_value()), op,
                      ": smooth_scale1 / smooth_scale2 need their output (output_mask[0] / [1]) enabled");
    out.mask = {on1 ? 1 : 0, on2 ? 1 : 0};
  }
  const QuantizedLayout y = quantizedLayout(op, "y_dtype", x1, y_dtype);
  std::vector<int64_t> rows = x1.sizes().vec();
  rows.pop_back();
  const std::vector<int64_t> none;  // the 0-d shape of a branch that does not run
  const at::TensorOptions y_options = x1.options().dtype(y.type), scale_options = x1.options().dtype(at::kFloat);
  out.y1 = at::empty(on1 ? at::IntArrayRef(y.shape) : at::IntArrayRef(none), y_options);
  out.y2 = at::empty(on2 ? at::IntArrayRef(y.shape) : at::IntArrayRef(none), y_options);
  out.scale1 = at::empty(on1 ? at::IntArrayRef(rows) : at::IntArrayRef(none), scale_options);
  out.scale2 = at::empty(on2 ? at::IntArrayRef(rows) : at::IntArrayRef(none), scale_options);
  out.x = at::empty(x1.sizes(), x1.options());
  return out;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_add_rms_norm_dynamic_quant(
    const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& gamma, const std::optional<at::Tensor>& smooth_scale1,
    const std::optional<at::Tensor>& smooth_scale2, const std::optional<at::Tensor>& beta, double epsilon,
    std::optional<std::array<bool, 2>> output_mask, std::optional<int64_t> y_dtype) {
  AddRmsNormDynamicQuantOutputs out =
      addRmsNormDynamicQuantOutputs(x1, x2, smooth_scale1, smooth_scale2, output_mask, y_dtype);
  // No mask: the device op applies the same default rule.
  const at::OptionalIntArrayRef mask =
      out.mask.empty() ? at::OptionalIntArrayRef() : at::OptionalIntArrayRef(at::IntArrayRef(out.mask));
  EXEC_NPU_CMD(aclnnAddRmsNormDynamicQuantV2, x1, x2, gamma, smooth_scale1, smooth_scale2, beta, epsilon, mask,
               out.y1, out.y2, out.x, out.scale1, out.scale2);
  return {out.y1, out.y2, out.x, out.scale1, out.scale2};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_add_rms_norm_dynamic_quant_meta(
    const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& gamma, const std::optional<at::Tensor>& smooth_scale1,
    const std::optional<at::Tensor>& smooth_scale2, const std::optional<at::Tensor>& beta, double epsilon,
    std::optional<std::array<bool, 2>> output_mask, std::optional<int64_t> y_dtype) {
  AddRmsNormDynamicQuantOutputs out =
      addRmsNormDynamicQuantOutputs(x1, x2, smooth_scale1, smooth_scale2, output_mask, y_dtype);
  return {out.y1, out.y2, out.x, out.scale1, out.scale2};
}

}  // namespace at_npu::native
