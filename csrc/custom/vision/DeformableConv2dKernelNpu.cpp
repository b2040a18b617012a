// DeformableConv2dKernelNpu.cpp - npu_deformable_conv2d: (modulated) deformable convolution, on
// aclnnDeformableConv2d, which also returns the sampled input its convolution read; npu_deformable_conv2dbk, its
// backward (torch_npu's name), on aclnnDeformableConv2dBackward. As in torch_npu every input is used as float32
// and both forward outputs are float32.
#include <ATen/ops/empty.h>

#include <tuple>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

// The sizes one deformable convolution works with, from its arguments.
struct DeformShape {
  int64_t batch, in_channels, out_channels, out_h, out_w, kernel_h, kernel_w;
};

bool isDeformType(at::ScalarType type) {
  return type == at::kFloat || type == at::kHalf || type == at::kBFloat16;
}

// stride / padding / dilation: 4 values, N, C, H, W order for stride and dilation, top, bottom, left, right for
// padding. offset: (N, deformable_groups * kH * kW * (3 if modulated else 2), Ho, Wo), x offsets first, then y
// offsets, then masks.
DeformShape deformShape(const char* op, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& offset,
                        at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                        at::IntArrayRef dilation, int64_t groups, int64_t deformable_groups, bool modulated) {
  TORCH_CHECK_TYPE(isDeformType(input.scalar_type()) && isDeformType(weight.scalar_type()) &&
                       isDeformType(offset.scalar_type()),
                   op, ": input, weight and offset must be float32, float16 or bfloat16, got ", input.scalar_type(),
                   ", ", weight.scalar_type(), " and ", offset.scalar_type());
  TORCH_CHECK_VALUE(input.dim() == 4 && weight.dim() == 4 && offset.dim() == 4, op,
                    ": input (N, C, H, W), weight (Co, C / groups, kH, kW) and offset must be 4-D, got ", input.sizes(),
                    ", ", weight.sizes(), " and ", offset.sizes());
  TORCH_CHECK_VALUE(kernel_size.size() == 2 && kernel_size[0] == weight.size(2) && kernel_size[1] == weight.size(3) &&
                        kernel_size[0] > 0 && kernel_size[1] > 0,
                    op, ": kernel_size must be weight's (kH, kW) = (", weight.size(2), ", ", weight.size(3), "), got ",
                    kernel_size);
  TORCH_CHECK_VALUE(stride.size() == 4 && padding.size() == 4 && dilation.size() == 4, op,
                    ": stride, padding and dilation need 4 values each, got ", stride, ", ", padding, " and ",
                    dilation);
  TORCH_CHECK_VALUE(stride[2] > 0 && stride[3] > 0 && dilation[2] > 0 && dilation[3] > 0, op,
                    ": strides and dilations must be positive, got ", stride, " and ", dilation);
  TORCH_CHECK_VALUE(padding[0] >= 0 && padding[1] >= 0 && padding[2] >= 0 && padding[3] >= 0, op,
                    ": padding must be >= 0, got ", padding);
  const int64_t channels = input.size(1), out_channels = weight.size(0);
  TORCH_CHECK_VALUE(groups > 0 && channels % groups == 0 && out_channels % groups == 0 &&
                        weight.size(1) * groups == channels,
                    op, ": groups (", groups, ") must divide the ", channels, " input and ", out_channels,
                    " output channels, weight being (Co, C / groups, kH, kW), got ", weight.sizes());
  TORCH_CHECK_VALUE(deformable_groups > 0 && channels % deformable_groups == 0, op, ": deformable_groups (",
                    deformable_groups, ") must divide the ", channels, " input channels");
  const int64_t taps = kernel_size[0] * kernel_size[1];
  const int64_t offset_channels = deformable_groups * taps * (modulated ? 3 : 2);
  TORCH_CHECK_VALUE(offset.size(0) == input.size(0) && offset.size(1) == offset_channels, op, ": offset must be (",
                    input.size(0), ", ", offset_channels, ", Ho, Wo) (deformable_groups * kH * kW * ",
                    modulated ? "3 with modulated" : "2 without modulation", "), got ", offset.sizes());
  // How far the dilated kernel can slide over the padded input.
  const int64_t span_h = input.size(2) + padding[0] + padding[1] - ((kernel_size[0] - 1) * dilation[2] + 1);
  const int64_t span_w = input.size(3) + padding[2] + padding[3] - ((kernel_size[1] - 1) * dilation[3] + 1);
  TORCH_CHECK_VALUE(span_h >= 0 && span_w >= 0, op, ": the dilated kernel does not fit the padded input ",
                    input.sizes());
  const int64_t out_h = span_h / stride[2] + 1, out_w = span_w / stride[3] + 1;
  TORCH_CHECK_VALUE(offset.size(2) == out_h && offset.size(3) == out_w, op,
                    ": offset's spatial size must be the output's (", out_h, ", ", out_w, "), got (", offset.size(2),
                    ", ", offset.size(3), ")");
  return {input.size(0), channels, out_channels, out_h, out_w, kernel_size[0], kernel_size[1]};
}

void checkBias(const std::optional<at::Tensor>& bias, int64_t out_channels) {
  if (!bias.has_value() || !bias->defined()) return;
  TORCH_CHECK_VALUE(bias->dim() == 1 && bias->size(0) == out_channels, "npu_deformable_conv2d: bias must be (",
                    out_channels, "), got ", bias->sizes());
  TORCH_CHECK_TYPE(isDeformType(bias->scalar_type()), "npu_deformable_conv2d: bias must be floating point, got ",
                   bias->scalar_type());
}

std::tuple<at::Tensor, at::Tensor> forwardOutputs(const DeformShape& s, const at::Tensor& input) {
  const at::TensorOptions options = input.options().dtype(at::kFloat);
  return {at::empty({s.batch, s.out_channels, s.out_h, s.out_w}, options),
          at::empty({s.batch, s.in_channels, s.out_h * s.kernel_h, s.out_w * s.kernel_w}, options)};
}

void checkBackward(const DeformShape& s, const at::Tensor& grad_output, const at::Tensor& offset_out) {
  const char* op = "npu_deformable_conv2dbk";
  TORCH_CHECK_VALUE(grad_output.dim() == 4 && grad_output.size(0) == s.batch &&
                        grad_output.size(1) == s.out_channels && grad_output.size(2) == s.out_h &&
                        grad_output.size(3) == s.out_w,
                    op, ": grad_output must be the output's shape (", s.batch, ", ", s.out_channels, ", ", s.out_h,
                    ", ", s.out_w, "), got ", grad_output.sizes());
  TORCH_CHECK_VALUE(offset_out.dim() == 4 && offset_out.size(0) == s.batch && offset_out.size(1) == s.in_channels &&
                        offset_out.size(2) == s.out_h * s.kernel_h && offset_out.size(3) == s.out_w * s.kernel_w,
                    op, ": offset_out must be the forward's second output (", s.batch, ", ", s.in_channels, ", ",
                    s.out_h * s.kernel_h, ", ", s.out_w * s.kernel_w, "), got ", offset_out.sizes());
  TORCH_CHECK_TYPE(isDeformType(grad_output.scalar_type()) && isDeformType(offset_out.scalar_type()), op,
                   ": grad_output and offset_out must be floating point");
}

// Gradients in their inputs' dtypes; the bias gradient in grad_output's.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> backwardOutputs(const at::Tensor& input,
                                                                           const at::Tensor& grad_output,
                                                                           const at::Tensor& weight,
                                                                           const at::Tensor& offset) {
  return {at::empty(input.sizes(), input.options()), at::empty(weight.sizes(), weight.options()),
          at::empty(offset.sizes(), offset.options()), at::empty({weight.size(0)}, grad_output.options())};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> npu_deformable_conv2d(const at::Tensor& input, const at::Tensor& weight,
                                                         const at::Tensor& offset,
                                                         const std::optional<at::Tensor>& bias,
                                                         at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                                         at::IntArrayRef padding, at::IntArrayRef dilation,
                                                         int64_t groups, int64_t deformable_groups, bool modulated) {
  const DeformShape s = deformShape("npu_deformable_conv2d", input, weight, offset, kernel_size, stride, padding,
                                    dilation, groups, deformable_groups, modulated);
  checkBias(bias, s.out_channels);
  auto [out, deform_out] = forwardOutputs(s, input);
  EXEC_NPU_CMD(aclnnDeformableConv2d, input, weight, offset, bias, kernel_size, stride, padding, dilation, groups,
               deformable_groups, modulated, out, deform_out);
  return {out, deform_out};
}

std::tuple<at::Tensor, at::Tensor> npu_deformable_conv2d_meta(const at::Tensor& input, const at::Tensor& weight,
                                                              const at::Tensor& offset,
                                                              const std::optional<at::Tensor>& bias,
                                                              at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                                              at::IntArrayRef padding, at::IntArrayRef dilation,
                                                              int64_t groups, int64_t deformable_groups,
                                                              bool modulated) {
  const DeformShape s = deformShape("npu_deformable_conv2d", input, weight, offset, kernel_size, stride, padding,
                                    dilation, groups, deformable_groups, modulated);
  checkBias(bias, s.out_channels);
  return forwardOutputs(s, input);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_deformable_conv2dbk(
    const at::Tensor& input, const at::Tensor& grad_output, const at::Tensor& offset_out, const at::Tensor& weight,
    const at::Tensor& offset, at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, int64_t groups, int64_t deformable_groups, bool modulated) {
  const DeformShape s = deformShape("npu_deformable_conv2dbk", input, weight, offset, kernel_size, stride, padding,
                                    dilation, groups, deformable_groups, modulated);
  checkBackward(s, grad_output, offset_out);
  auto [grad_input, grad_weight, grad_offset, grad_bias] = backwardOutputs(input, grad_output, weight, offset);
  EXEC_NPU_CMD(aclnnDeformableConv2dBackward, input, grad_output, offset_out, weight, offset, kernel_size, stride,
               padding, dilation, groups, deformable_groups, modulated, grad_input, grad_weight, grad_offset,
               grad_bias);
  return {grad_input, grad_weight, grad_offset, grad_bias};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_deformable_conv2dbk_meta(
    const at::Tensor& input, const at::Tensor& grad_output, const at::Tensor& offset_out, const at::Tensor& weight,
    const at::Tensor& offset, at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, int64_t groups, int64_t deformable_groups, bool modulated) {
  const DeformShape s = deformShape("npu_deformable_conv2dbk", input, weight, offset, kernel_size, stride, padding,
                                    dilation, groups, deformable_groups, modulated);
  checkBackward(s, grad_output, offset_out);
  return backwardOutputs(input, grad_output, weight, offset);
}

}  // namespace at_npu::native
