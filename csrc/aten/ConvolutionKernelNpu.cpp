// ConvolutionKernelNpu.cpp - convolution and convolution_backward on device ops (conv1d/2d/3d,
// groups, transposed). Output sizes follow PyTorch's formulas; channel mismatches raise at the call.
#include <ATen/ops/empty.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/FormatCast.h"
#include "csrc/framework/FormatHelper.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

constexpr int8_t kKeepPrecision = 0;

bool convOnDevice(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  if (!deviceOpsSupport({input, weight, bias}) || !at::isFloatingType(input.scalar_type())) {
    return false;
  }
  // Empty inputs or weights (zero channels) take PyTorch's own path: a bias-filled or empty result.
  return weight.device() == input.device() && (!bias.defined() || bias.device() == input.device()) &&
         weight.scalar_type() == input.scalar_type() && input.numel() > 0 && weight.numel() > 0;
}

std::vector<int64_t> convOutputShape(const at::Tensor& input, const at::Tensor& weight,
                                     at::IntArrayRef stride, at::IntArrayRef padding,
                                     at::IntArrayRef dilation, bool transposed,
                                     at::IntArrayRef output_padding, int64_t groups) {
  const int64_t dims = input.dim();
  TORCH_CHECK(dims >= 3 && weight.dim() == dims, "Expected ", weight.dim(), "-dimensional input for ",
              weight.dim(), "-dimensional weight ", weight.sizes(), ", but got ", dims,
              "-dimensional input of size ", input.sizes(), " instead");
  TORCH_CHECK(groups > 0, "non-positive groups is not supported");
  if (!transposed) {
    TORCH_CHECK(input.size(1) == weight.size(1) * groups, "Given groups=", groups, ", weight of size ",
                weight.sizes(), ", expected input", input.sizes(), " to have ",
                weight.size(1) * groups, " channels, but got ", input.size(1), " channels instead");
  } else {
    TORCH_CHECK(input.size(1) == weight.size(0), "Given transposed=1, weight of size ",
                weight.sizes(), ", expected input", input.sizes(), " to have ", weight.size(0),
                " channels, but got ", input.size(1), " channels instead");
  }
  std::vector<int64_t> shape{input.size(0), transposed ? weight.size(1) * groups : weight.size(0)};
  for (int64_t d = 2; d < dims; ++d) {
    const size_t i = static_cast<size_t>(d - 2);
    const int64_t s = perDim(stride, i, 1), p = perDim(padding, i, 0);
    const int64_t dil = perDim(dilation, i, 1), k = weight.size(d);
    int64_t size;
    if (transposed) {
      size = (input.size(d) - 1) * s - 2 * p + dil * (k - 1) + perDim(output_padding, i, 0) + 1;
    } else {
      const int64_t span = dil * (k - 1) + 1;
      TORCH_CHECK(input.size(d) + 2 * p >= span, "Calculated padded input size per channel: (",
                  input.size(d) + 2 * p, "). Kernel size: (", span,
                  "). Kernel size can't be greater than actual input size");
      size = (input.size(d) + 2 * p - span) / s + 1;
    }
    shape.push_back(size);
  }
  return shape;
}

// The private layout of activations of `dim` dims on an NPU.
int64_t activationFormat(int64_t dim) {
  return dim == 4 ? ACL_FORMAT_NC1HWC0 : dim == 5 ? ACL_FORMAT_NDC1HWC0 : ACL_FORMAT_ND;
}

}  // namespace

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups) {
  const at::Tensor b = bias.value_or(at::Tensor());
  if (!convOnDevice(input, weight, b)) {
    return runGeneric("aten::convolution", "", input, weight, bias, stride, padding, dilation,
                      transposed, output_padding, groups)[0]
        .toTensor();
  }
  const auto shape =
      convOutputShape(input, weight, stride, padding, dilation, transposed, output_padding, groups);
  c10::DeviceGuard guard(input.device());
  // Under allow_internal_format the result is NC1HWC0 (NDC1HWC0 for 3-d), as on an NPU.
  at::Tensor out = allowInternalFormat()
                       ? emptyPreferringFormat(shape, input.options(), activationFormat(input.dim()))
                       : at::empty(shape, input.options().memory_format(input.suggest_memory_format()));
  EXEC_NPU_CMD(aclnnConvolution, input, weight, b, stride, padding, dilation, transposed,
               output_padding, groups, out, kKeepPrecision);
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::OptionalIntArrayRef bias_sizes, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  if (!convOnDevice(input, weight, at::Tensor()) || !deviceOpsSupport({grad_output}) ||
      grad_output.device() != input.device()) {
    auto results = runGeneric("aten::convolution_backward", "", grad_output, input, weight,
                              bias_sizes, stride, padding, dilation, transposed, output_padding,
                              groups, output_mask);
    return {results[0].toTensor(), results[1].toTensor(), results[2].toTensor()};
  }
  c10::DeviceGuard guard(input.device());
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    grad_input = allowInternalFormat()
                     ? emptyPreferringFormat(input.sizes(), input.options(), activationFormat(input.dim()))
                     : at::empty(input.sizes(), input.options().memory_format(input.suggest_memory_format()));
  }
  // The weight's gradient takes the weight's layout, so that the optimizer step needs no TransData.
  if (output_mask[1]) {
    grad_weight = allowInternalFormat() ? emptyPreferringFormat(weight.sizes(), weight.options(), npuFormatOf(weight))
                                        : at::empty(weight.sizes(), weight.options());
  }
  if (output_mask[2]) {
    const int64_t channels = transposed ? weight.size(1) * groups : weight.size(0);
    grad_bias = at::empty({channels}, grad_output.options());
  }
  if (!output_mask[0] && !output_mask[1] && !output_mask[2]) return {};
  const std::vector<int64_t> bias_shape =
      bias_sizes.has_value() ? bias_sizes->vec() : std::vector<int64_t>{grad_bias.defined() ? grad_bias.size(0) : 0};
  EXEC_NPU_CMD(aclnnConvolutionBackward, grad_output, input, weight, at::IntArrayRef(bias_shape),
               stride, padding, dilation, transposed, output_padding, groups, grad_input,
               grad_weight, grad_bias, kKeepPrecision);
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace at_npu::native
