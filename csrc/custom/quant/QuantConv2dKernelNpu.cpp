// QuantConv2dKernelNpu.cpp - npu_quant_conv2d: int8 NCHW convolution, int32 bias, per-channel dequantisation to
// float16 / bfloat16 / float32, on aclnnQuantConvolution. Inference only: no gradient upstream.
#include <ATen/ops/empty.h>

#include <string>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr const char* kQuantConvOp = "npu_quant_conv2d";

// output_dtype is an int carrying a torch dtype (ScalarType code), as upstream takes it; it is required.
at::ScalarType quantConvOutputType(std::optional<int64_t> output_dtype) {
  TORCH_CHECK_VALUE(output_dtype.has_value(), kQuantConvOp,
                    ": output_dtype can not be None; pass torch.float16, torch.bfloat16 or torch.float32");
  const int64_t code = *output_dtype;
  TORCH_CHECK_TYPE(code == static_cast<int64_t>(at::kHalf) || code == static_cast<int64_t>(at::kBFloat16) ||
                       code == static_cast<int64_t>(at::kFloat),
                   kQuantConvOp, ": output_dtype must be torch.float16, torch.bfloat16 or torch.float32 (hifloat8 is a "
                   "chip number format the software NPU does not have), got code ", code);
  return static_cast<at::ScalarType>(code);
}

// Checks the arguments and returns the empty (n, c_out, h_out, w_out) output.
at::Tensor quantConvOutput(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& scale,
                           at::IntArrayRef strides, at::IntArrayRef pads, at::IntArrayRef dilations, int64_t groups,
                           int64_t offset_x, c10::string_view round_mode, std::optional<int64_t> output_dtype,
                           const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& offset,
                           std::optional<int64_t> input_dtype, std::optional<int64_t> weight_dtype) {
  TORCH_CHECK_TYPE(!input_dtype.has_value() && !weight_dtype.has_value(), kQuantConvOp,
                   ": input_dtype / weight_dtype only select hifloat8, a chip number format the software NPU does not "
                   "have; leave them None and pass int8 tensors");
  TORCH_CHECK_TYPE(input.scalar_type() == at::kChar && weight.scalar_type() == at::kChar, kQuantConvOp,
                   ": input and weight must be int8, got ", input.scalar_type(), " and ", weight.scalar_type());
  TORCH_CHECK_VALUE(input.dim() == 4 && weight.dim() == 4, kQuantConvOp,
                    ": input (N, C, H, W) and weight (C_out, C/groups, kH, kW) must be 4-D, got ", input.sizes(),
                    " and ", weight.sizes());
  TORCH_CHECK_VALUE(strides.size() == 2 && pads.size() == 2 && dilations.size() == 2, kQuantConvOp,
                    ": strides, pads and dilations must have 2 elements each");
  TORCH_CHECK_VALUE(strides[0] > 0 && strides[1] > 0 && dilations[0] > 0 && dilations[1] > 0 && pads[0] >= 0 &&
                        pads[1] >= 0,
                    kQuantConvOp, ": strides and dilations must be positive and pads non-negative, got strides ",
                    strides, ", pads ", pads, ", dilations ", dilations);
  TORCH_CHECK_VALUE(groups > 0 && input.size(1) % groups == 0 && weight.size(0) % groups == 0 &&
                        weight.size(1) * groups == input.size(1),
                    kQuantConvOp, ": groups ", groups, " must divide input channels ", input.size(1),
                    " and output channels ", weight.size(0), ", and weight.size(1) must be C / groups");
  // offset_x fills the padding ring in the int8 input's place, so it must be an int8 value.
  TORCH_CHECK_VALUE(offset_x >= -128 && offset_x <= 127, kQuantConvOp, ": offset_x must be in [-128, 127], got ",
                    offset_x);
  TORCH_CHECK_VALUE(round_mode == "rint", kQuantConvOp, ": round_mode must be 'rint', got '", round_mode, "'");
  TORCH_CHECK_VALUE(!(offset.has_value() && offset->defined()), kQuantConvOp, ": offset must be None");
  const at::ScalarType out_type = quantConvOutputType(output_dtype);
  const int64_t c_out = weight.size(0);
  TORCH_CHECK_TYPE(scale.scalar_type() == at::kFloat || scale.scalar_type() == at::kLong, kQuantConvOp,
                   ": scale must be float32 or int64 (packed), got ", scale.scalar_type());
  TORCH_CHECK_VALUE(scale.dim() == 1 && (scale.size(0) == c_out || scale.size(0) == 1), kQuantConvOp,
                    ": scale must have shape (", c_out, ",) (weight's out_channels) or (1,), got ", scale.sizes());
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK_TYPE(bias->scalar_type() == at::kInt, kQuantConvOp, ": bias must be int32, got ", bias->scalar_type());
    TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == c_out, kQuantConvOp, ": bias must have shape (", c_out,
                      ",), got ", bias->sizes());
  }
  const int64_t ho = (input.size(2) + 2 * pads[0] - dilations[0] * (weight.size(2) - 1) - 1) / strides[0] + 1;
  const int64_t wo = (input.size(3) + 2 * pads[1] - dilations[1] * (weight.size(3) - 1) - 1) / strides[1] + 1;
  TORCH_CHECK_VALUE(ho > 0 && wo > 0, kQuantConvOp, ": the output would be empty (h_out ", ho, ", w_out ", wo,
                    "); the kernel is larger than the padded input");
  return at::empty({input.size(0), c_out, ho, wo}, input.options().dtype(out_type));
}

}  // namespace

at::Tensor npu_quant_conv2d(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& scale,
                            at::IntArrayRef strides, at::IntArrayRef pads, at::IntArrayRef dilations, int64_t groups,
                            int64_t offset_x, c10::string_view round_mode, std::optional<int64_t> output_dtype,
                            const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& offset,
                            std::optional<int64_t> input_dtype, std::optional<int64_t> weight_dtype) {
  at::Tensor output = quantConvOutput(input, weight, scale, strides, pads, dilations, groups, offset_x,
                                      round_mode, output_dtype, bias, offset, input_dtype, weight_dtype);
  const bool transposed = false;  // the quantized convolution is never transposed
  const std::vector<int64_t> output_padding;
  const std::string round_str(round_mode);
  EXEC_NPU_CMD(aclnnQuantConvolution, input, weight, bias, scale, offset, strides, pads, dilations, transposed,
               at::IntArrayRef(output_padding), groups, offset_x, round_str, output);
  return output;
}

at::Tensor npu_quant_conv2d_meta(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& scale,
                                 at::IntArrayRef strides, at::IntArrayRef pads, at::IntArrayRef dilations,
                                 int64_t groups, int64_t offset_x, c10::string_view round_mode,
                                 std::optional<int64_t> output_dtype, const std::optional<at::Tensor>& bias,
                                 const std::optional<at::Tensor>& offset, std::optional<int64_t> input_dtype,
                                 std::optional<int64_t> weight_dtype) {
  return quantConvOutput(input, weight, scale, strides, pads, dilations, groups, offset_x, round_mode, output_dtype,
                         bias, offset, input_dtype, weight_dtype);
}

}  // namespace at_npu::native
