// add_custom.cpp - myops::add_custom for npu as a C++ extension: the forward calls the custom op
// package's two-phase aclnnAddCustom through EXEC_NPU_CMD, the backward passes the gradient through,
// Meta kernels give shapes to torch.compile, and an autograd Function binds the two.
#include <torch/extension.h>

#include "torch_npu/csrc/framework/utils/OpAdapter.h"

using torch::autograd::AutogradContext;
using torch::autograd::Function;
using variable_list = std::vector<at::Tensor>;

// Forward on npu: allocate the output, then let the op package compute into it.
at::Tensor add_custom_impl_npu(const at::Tensor& self, const at::Tensor& other) {
  at::Tensor result = at::empty_like(self);
  EXEC_NPU_CMD(aclnnAddCustom, self, other, result);
  return result;
}

// Backward on npu: d(x + y)/dx = d(x + y)/dy = 1.
std::tuple<at::Tensor, at::Tensor> add_custom_backward_impl_npu(const at::Tensor& grad) {
  at::Tensor result = grad;
  return {result, result};
}

// Meta: shapes and dtypes only.
at::Tensor add_custom_impl_meta(const at::Tensor& self, const at::Tensor& other) {
  return at::empty_like(self);
}

std::tuple<at::Tensor, at::Tensor> add_custom_backward_impl_meta(const at::Tensor& self) {
  auto result = at::empty_like(self);
  return std::make_tuple(result, result);
}

// Dispatches to the implementation registered for the inputs' device.
at::Tensor add_custom_impl(const at::Tensor& self, const at::Tensor& other) {
  static auto op = torch::Dispatcher::singleton()
                       .findSchemaOrThrow("myops::add_custom", "")
                       .typed<decltype(add_custom_impl)>();
  return op.call(self, other);
}

class AddCustomFunction : public torch::autograd::Function<AddCustomFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, at::Tensor self, at::Tensor other) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return add_custom_impl(self, other);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto grad_output = grad_outputs[0];
    static auto op = torch::Dispatcher::singleton()
                         .findSchemaOrThrow("myops::add_custom_backward", "")
                         .typed<decltype(add_custom_backward_impl_npu)>();
    auto result = op.call(grad_output);
    return {std::get<0>(result), std::get<1>(result)};
  }
};

at::Tensor add_custom_autograd(const at::Tensor& self, const at::Tensor& other) {
  return AddCustomFunction::apply(self, other);
}

TORCH_LIBRARY(myops, m) {
  m.def("add_custom(Tensor self, Tensor other) -> Tensor");
  m.def("add_custom_backward(Tensor self) -> (Tensor, Tensor)");
}

// npu is PyTorch's PrivateUse1 device.
TORCH_LIBRARY_IMPL(myops, PrivateUse1, m) {
  m.impl("add_custom", &add_custom_impl_npu);
  m.impl("add_custom_backward", &add_custom_backward_impl_npu);
}

TORCH_LIBRARY_IMPL(myops, AutogradPrivateUse1, m) {
  m.impl("add_custom", &add_custom_autograd);
}

TORCH_LIBRARY_IMPL(myops, Meta, m) {
  m.impl("add_custom", &add_custom_impl_meta);
  m.impl("add_custom_backward", &add_custom_backward_impl_meta);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("add_custom", &add_custom_autograd, "x + y");
}
