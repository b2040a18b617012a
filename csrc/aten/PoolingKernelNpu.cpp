// PoolingKernelNpu.cpp - max_pool2d (with indices), avg_pool2d and adaptive avg pooling, forward and
// backward, on device ops.
#include <ATen/native/Pool.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {
// N, C (if present), then the two pooled sizes, as the CPU kernels compute them.
std::vector<int64_t> pooledShape(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, "pooling expects a 3D or 4D input, got ",
              self.dim(), "D");
  TORCH_CHECK(kernel.size() == 1 || kernel.size() == 2,
              "kernel_size must either be a single int, or a tuple of two ints");
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - 2);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t k = perDim(kernel, i, 1);
    const int64_t s = perDim(stride, i, k);
    const int64_t p = perDim(padding, i, 0);
    const int64_t d = perDim(dilation, i, 1);
    TORCH_CHECK(k > 0 && s > 0 && d > 0, "kernel size, stride and dilation must be greater than zero");
    TORCH_CHECK(p <= k / 2, "pad should be at most half of effective kernel size, but got pad=", p,
                ", kernel_size=", k);
    shape.push_back(at::native::pooling_output_shape<int64_t>(self.size(self.dim() - 2 + i), k, p, s,
                                                              d, ceil_mode));
  }
  TORCH_CHECK(shape[shape.size() - 1] > 0 && shape[shape.size() - 2] > 0,
              "Given input size: ", self.sizes(), ". Calculated output size is too small");
  return shape;
}

}  // namespace

std::tuple<at::Tensor&, at::Tensor&> max_pool2d_with_indices_out(
    const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out,
    at::Tensor& indices) {
  if (!onDevice({self, out, indices}, out.device()) || !at::isFloatingType(self.scalar_type())) {
    runGeneric("aten::max_pool2d_with_indices", "out", self, kernel_size, stride, padding, dilation,
               ceil_mode, out, indices);
    return {out, indices};
  }
  const auto shape = pooledShape(self, kernel_size, stride, padding, dilation, ceil_mode);
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, shape);
  at::native::resize_output(indices, shape);
  EXEC_NPU_CMD(aclnnMaxPool2dWithIndices, self, kernel_size, stride, padding, dilation, ceil_mode,
               out, indices);
  return {out, indices};
}

at::Tensor& max_pool2d_with_indices_backward_out(const at::Tensor& grad_output,
                                                 const at::Tensor& self, at::IntArrayRef kernel_size,
                                                 at::IntArrayRef stride, at::IntArrayRef padding,
                                                 at::IntArrayRef dilation, bool ceil_mode,
                                                 const at::Tensor& indices, at::Tensor& grad_input) {
  if (!onDevice({grad_output, self, indices, grad_input}, grad_input.device())) {
    runGeneric("aten::max_pool2d_with_indices_backward", "grad_input", grad_output, self,
               kernel_size, stride, padding, dilation, ceil_mode, indices, grad_input);
    return grad_input;
  }
  c10::DeviceGuard guard(grad_input.device());
  at::native::resize_output(grad_input, self.sizes());
  EXEC_NPU_CMD(aclnnMaxPool2dWithIndicesBackward, grad_output, self, kernel_size, stride, padding,
               dilation, ceil_mode, indices, grad_input);
  return grad_input;
}

at::Tensor& avg_pool2d_out(const at::Tensor& self, at::IntArrayRef kernel_size,
                           at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                           bool count_include_pad, std::optional<int64_t> divisor_override,
                           at::Tensor& out) {
  if (!onDevice({self, out}, out.device()) || !at::isFloatingType(self.scalar_type()) ||
      (divisor_override && *divisor_override == 0)) {
    runGeneric("aten::avg_pool2d", "out", self, kernel_size, stride, padding, ceil_mode,
               count_include_pad, divisor_override, out);
    return out;
  }
  const auto shape = pooledShape(self, kernel_size, stride, padding, {}, ceil_mode);
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, shape);
  EXEC_NPU_CMD(aclnnAvgPool2d, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
               divisor_override.value_or(0), out);
  return out;
}

at::Tensor& avg_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                    at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                    at::IntArrayRef padding, bool ceil_mode,
                                    bool count_include_pad, std::optional<int64_t> divisor_override,
                                    at::Tensor& grad_input) {
  if (!onDevice({grad_output, self, grad_input}, grad_input.device()) ||
      (divisor_override && *divisor_override == 0)) {
    runGeneric("aten::avg_pool2d_backward", "grad_input", grad_output, self, kernel_size, stride,
               padding, ceil_mode, count_include_pad, divisor_override, grad_input);
    return grad_input;
  }
  c10::DeviceGuard guard(grad_input.device());
  at::native::resize_output(grad_input, self.sizes());
  EXEC_NPU_CMD(aclnnAvgPool2dBackward, grad_output, self, kernel_size, stride, padding, ceil_mode,
               count_include_pad, divisor_override.value_or(0), grad_input);
  return grad_input;
}

at::Tensor _adaptive_avg_pool2d(const at::Tensor& self, at::IntArrayRef output_size) {
  if (!onDevice({self}, self.device()) || !at::isFloatingType(self.scalar_type())) {
    return runGeneric("aten::_adaptive_avg_pool2d", "", self, output_size)[0].toTensor();
  }
  TORCH_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4,
              "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got ", self.sizes());
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - 2);
  shape.insert(shape.end(), output_size.begin(), output_size.end());
  c10::DeviceGuard guard(self.device());
  at::Tensor out = at::empty(shape, self.options().memory_format(self.suggest_memory_format()));
  EXEC_NPU_CMD(aclnnAdaptiveAvgPool2d, self, output_size, out);
  return out;
}

at::Tensor _adaptive_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  if (!onDevice({grad_output, self}, self.device())) {
    return runGeneric("aten::_adaptive_avg_pool2d_backward", "", grad_output, self)[0].toTensor();
  }
  c10::DeviceGuard guard(self.device());
  at::Tensor grad_input =
      at::empty(self.sizes(), self.options().memory_format(self.suggest_memory_format()));
  EXEC_NPU_CMD(aclnnAdaptiveAvgPool2dBackward, grad_output, self, grad_input);
  return grad_input;
}

}  // namespace at_npu::native
