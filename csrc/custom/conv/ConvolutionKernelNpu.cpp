// ConvolutionKernelNpu.cpp - torch_npu's convolution entry points (npu_convolution, npu_conv2d, npu_conv3d,
// npu_convolution_transpose, npu_conv_transpose2d): argument checks, then the aclnnConvolution device op
// through ATen's convolution (whose npu adapter launches it, and which computes Meta shapes on meta tensors).
#include <ATen/ops/convolution.h>

#include "csrc/custom/NpuCustomFunctions.h"

namespace at_npu::native {
namespace {

// The spatial dimensions a convolution entry takes (npu_conv2d: 2, npu_conv3d: 3; 0 = 1 to 3).
void checkConvolution(const char* op, const at::Tensor& input, const at::Tensor& weight,
                      const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                      at::IntArrayRef dilation, int64_t groups, int64_t spatial, bool transposed) {
  const int64_t dims = input.dim() - 2;
  TORCH_CHECK_VALUE(spatial == 0 ? dims >= 1 && dims <= 3 : dims == spatial, op, ": input must be (N, C, ",
                    spatial == 2 ? "H, W" : spatial == 3 ? "D, H, W" : "spatial...", "), got ", input.sizes());
  TORCH_CHECK_VALUE(weight.dim() == input.dim(), op, ": weight must have input's ", input.dim(),
                    " dimensions, got ", weight.sizes());
  TORCH_CHECK_VALUE(groups >= 1, op, ": groups must be at least 1, got ", groups);
  for (const auto& [name, values] : {std::pair<const char*, at::IntArrayRef>{"stride", stride},
                                     {"padding", padding}, {"dilation", dilation}}) {
    TORCH_CHECK_VALUE(values.size() == 1 || static_cast<int64_t>(values.size()) == dims, op, ": ", name,
                      " must have 1 or ", dims, " values, got ", values);
  }
  const int64_t in_channels = transposed ? weight.size(0) : weight.size(1) * groups;
  TORCH_CHECK_VALUE(input.size(1) == in_channels, op, ": input has ", input.size(1), " channels but weight ",
                    weight.sizes(), " with groups=", groups, " expects ", in_channels);
  const int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  TORCH_CHECK_VALUE(!bias.has_value() || !bias->defined() || (bias->dim() == 1 && bias->size(0) == out_channels),
                    op, ": bias must be (", out_channels, ",), got ", bias.has_value() ? bias->sizes() : at::IntArrayRef());
}

at::Tensor forward(const char* op, const at::Tensor& input, const at::Tensor& weight,
                   const std::optional<at::Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                   at::IntArrayRef dilation, int64_t groups, int64_t spatial) {
  checkConvolution(op, input, weight, bias, stride, padding, dilation, groups, spatial, false);
  const std::vector<int64_t> no_output_padding(input.dim() - 2, 0);
  return at::convolution(input, weight, bias, stride, padding, dilation, false, no_output_padding, groups);
}

at::Tensor transpose(const char* op, const at::Tensor& input, const at::Tensor& weight,
                     const std::optional<at::Tensor>& bias, at::IntArrayRef padding, at::IntArrayRef output_padding,
                     at::IntArrayRef stride, at::IntArrayRef dilation, int64_t groups, int64_t spatial) {
  checkConvolution(op, input, weight, bias, stride, padding, dilation, groups, spatial, true);
  return at::convolution(input, weight, bias, stride, padding, dilation, true, output_padding, groups);
}

}  // namespace

at::Tensor npu_convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  return forward("npu_convolution", input, weight, bias, stride, padding, dilation, groups, 0);
}

at::Tensor npu_conv2d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                      at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  return forward("npu_conv2d", input, weight, bias, stride, padding, dilation, groups, 2);
}

at::Tensor npu_conv3d(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                      at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  return forward("npu_conv3d", input, weight, bias, stride, padding, dilation, groups, 3);
}

at::Tensor npu_convolution_transpose(const at::Tensor& input, const at::Tensor& weight,
                                     const std::optional<at::Tensor>& bias, at::IntArrayRef padding,
                                     at::IntArrayRef output_padding, at::IntArrayRef stride,
                                     at::IntArrayRef dilation, int64_t groups) {
  return transpose("npu_convolution_transpose", input, weight, bias, padding, output_padding, stride, dilation,
                   groups, 0);
}

at::Tensor npu_conv_transpose2d(const at::Tensor& input, const at::Tensor& weight,
                                const std::optional<at::Tensor>& bias, at::IntArrayRef padding,
                                at::IntArrayRef output_padding, at::IntArrayRef stride, at::IntArrayRef dilation,
                                int64_t groups) {
  return transpose("npu_conv_transpose2d", input, weight, bias, padding, output_padding, stride, dilation, groups,
                   2);
}

}  // namespace at_npu::native
