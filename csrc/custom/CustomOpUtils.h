// CustomOpUtils.h - helpers shared by torch_npu's custom op adapters (csrc/custom/).
#pragma once

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <functional>
#include <vector>

namespace at_npu::native::custom {

// A custom op's output must not alias its inputs (the schema says it is fresh; torch.compile and
// functionalization rely on it): copies `out` when it shares storage with `input`.
at::Tensor fresh(const at::Tensor& out, const at::Tensor& input);

// Gradients of `forward(inputs)` against `inputs`, for `grad_outputs`: backward kernels of composite
// ops are the derivative of the same composition (undefined where an input gets no gradient).
std::vector<at::Tensor> compositeGrads(
    const std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>& forward,
    const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& grad_outputs);

}  // namespace at_npu::native::custom
