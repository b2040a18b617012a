// CustomOpUtils.cpp - helpers shared by the custom op adapters.
#include "csrc/custom/CustomOpUtils.h"

#include <ATen/ops/clone.h>
#include <ATen/ops/zeros_like.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>

namespace at_npu::native::custom {

at::Tensor fresh(const at::Tensor& out, const at::Tensor& input) {
  return out.is_alias_of(input) ? at::clone(out, at::MemoryFormat::Contiguous) : out;
}

std::vector<at::Tensor> compositeGrads(
    const std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>& forward,
    const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& grad_outputs) {
  // Called from inside a backward pass (grad mode off) or directly: build a local graph either way.
  at::AutoGradMode enable_grad(true);
  std::vector<at::Tensor> leaves;
  std::vector<size_t> positions;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    leaves.push_back(inputs[i].detach().requires_grad_(true));
    positions.push_back(i);
  }
  std::vector<at::Tensor> local_inputs(inputs.size());
  for (size_t k = 0; k < positions.size(); ++k) local_inputs[positions[k]] = leaves[k];
  std::vector<at::Tensor> outputs = forward(local_inputs);
  std::vector<at::Tensor> outs, grads;
  for (size_t i = 0; i < outputs.size() && i < grad_outputs.size(); ++i) {
    if (outputs[i].defined() && outputs[i].requires_grad() && grad_outputs[i].defined()) {
      outs.push_back(outputs[i]);
      grads.push_back(grad_outputs[i]);
    }
  }
  std::vector<at::Tensor> result(inputs.size());
  if (outs.empty()) return result;
  auto g = torch::autograd::grad(outs, leaves, grads, /*retain_graph=*/false, /*create_graph=*/false,
                                 /*allow_unused=*/true);
  for (size_t k = 0; k < positions.size(); ++k) {
    result[positions[k]] = g[k].defined() ? g[k] : at::zeros_like(inputs[positions[k]]);
  }
  return result;
}

}  // namespace at_npu::native::custom
