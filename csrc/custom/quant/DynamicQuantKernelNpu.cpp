// DynamicQuantKernelNpu.cpp - npu_dynamic_quant (symmetric) and npu_dynamic_quant_asymmetric (with an offset):
// per-token, per-tensor or per-channel dynamic quantization to int8 or int4 (packed eight to an int32), with
// smoothing scales (one row, or one per MoE group), on aclnnDynamicQuantV4. Inference ops: no gradient upstream.
#include <ATen/ops/empty.h>

#include <string>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/quant/QuantizeUtils.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

struct DynamicQuantOutputs {
  at::Tensor y, scale, offset;  // offset: asymmetric only
  int64_t dst_code = 0;         // y as the device op reads it: int8, or int32 carrying eight int4 values
  std::string mode;
};

std::vector<int64_t> scaleShape(const char* op, const at::Tensor& input, const std::string& mode) {
  std::vector<int64_t> shape = input.sizes().vec();
  if (mode == "pertensor") return {1};
  if (mode == "pertoken") {
    shape.pop_back();
    return shape;
  }
  TORCH_CHECK_VALUE(mode == "perchannel", op, ": quant_mode must be 'pertoken', 'pertensor' or 'perchannel', got '",
                    mode, "'");
  shape.erase(shape.end() - 2);  // the scale of each column of each matrix
  return shape;
}

DynamicQuantOutputs dynamicQuantOutputs(const char* op, const at::Tensor& input, std::optional<int64_t> dst_type,
                                        c10::string_view quant_mode, bool asymmetric) {
  TORCH_CHECK_VALUE(input.dim() >= 2 && input.dim() <= 8, op, ": input must have 2 to 8 dimensions, got ",
                    input.sizes());
  quant::checkFloatInput(op, "input", input);
  DynamicQuantOutputs out;
  out.mode = std::string(quant_mode);
  const std::vector<int64_t> scale_shape = scaleShape(op, input, out.mode);
  if (quant::int8OrInt4(op, "dst_type", dst_type) == quant::Target::kInt4) {
    out.y = at::empty(quant::packedShape(op, "input", input.sizes(), 8), input.options().dtype(at::kInt));
  } else {
    out.y = at::empty(input.sizes(), input.options().dtype(at::kChar));
  }
  out.dst_code = quant::aclCode(out.y.scalar_type());
  out.scale = at::empty(scale_shape, input.options().dtype(at::kFloat));
  if (asymmetric) out.offset = at::empty(scale_shape, input.options().dtype(at::kFloat));
  return out;
}

void launchDynamicQuant(const at::Tensor& input, const std::optional<at::Tensor>& smooth_scales,
                        const std::optional<at::Tensor>& group_index, double dst_type_max, bool symmetric,
                        DynamicQuantOutputs& out) {
  // dst_type_max only tunes hifloat8 outputs (refused above); the device op takes it as a float.
  const float type_max = static_cast<float>(dst_type_max);
  EXEC_NPU_CMD(aclnnDynamicQuantV4, input, smooth_scales, group_index, out.dst_code, symmetric, out.mode, type_max,
               out.y, out.scale, out.offset);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_dynamic_quant(const at::Tensor& input,
                                                     const std::optional<at::Tensor>& smooth_scales,
                                                     const std::optional<at::Tensor>& group_index,
                                                     std::optional<int64_t> dst_type, c10::string_view quant_mode,
                                                     double dst_type_max) {
  DynamicQuantOutputs out = dynamicQuantOutputs("npu_dynamic_quant", input, dst_type, quant_mode, false);
  launchDynamicQuant(input, smooth_scales, group_index, dst_type_max, /*symmetric=*/true, out);
  return {out.y, out.scale};
}

std::tuple<at::Tensor, at::Tensor> npu_dynamic_quant_meta(const at::Tensor& input,
                                                          const std::optional<at::Tensor>& smooth_scales,
                                                          const std::optional<at::Tensor>& group_index,
                                                          std::optional<int64_t> dst_type,
                                                          c10::string_view quant_mode, double dst_type_max) {
  DynamicQuantOutputs out = dynamicQuantOutputs("npu_dynamic_quant", input, dst_type, quant_mode, false);
  return {out.y, out.scale};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_dynamic_quant_asymmetric(
    const at::Tensor& input, const std::optional<at::Tensor>& smooth_scales,
    const std::optional<at::Tensor>& group_index, std::optional<int64_t> dst_type, c10::string_view quant_mode,
    double dst_type_max) {
  DynamicQuantOutputs out = dynamicQuantOutputs("npu_dynamic_quant_asymmetric", input, dst_type, quant_mode, true);
  launchDynamicQuant(input, smooth_scales, group_index, dst_type_max, /*symmetric=*/false, out);
  return {out.y, out.scale, out.offset};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_dynamic_quant_asymmetric_meta(
    const at::Tensor& input, const std::optional<at::Tensor>& smooth_scales,
    const std::optional<at::Tensor>& group_index, std::optional<int64_t> dst_type, c10::string_view quant_mode,
    double dst_type_max) {
  DynamicQuantOutputs out = dynamicQuantOutputs("npu_dynamic_quant_asymmetric", input, dst_type, quant_mode, true);
  return {out.y, out.scale, out.offset};
}

}  // namespace at_npu::native
