// ViewReplay.cpp - npu views from CPU view kernels.
#include "csrc/framework/ViewReplay.h"

#include <ATen/ops/empty.h>

#include "csrc/framework/HostView.h"

namespace at_npu::native {

bool isNpuViewOp(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& schema = op.schema();
  if (schema.returns().size() != 1 || schema.arguments().empty()) return false;
  const auto* ret = schema.returns()[0].alias_info();
  const auto* arg = schema.arguments()[0].alias_info();
  if (!ret || !arg || ret->isWrite() || ret->beforeSets() != arg->beforeSets() ||
      schema.returns()[0].type()->kind() != c10::TypeKind::TensorType) {
    return false;
  }
  const c10::IValue& self = stack[stack.size() - schema.arguments().size()];
  return self.isTensor() && self.toTensor().device().type() == c10::DeviceType::PrivateUse1;
}

void replayViewOp(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t first = stack->size() - op.schema().arguments().size();
  at::Tensor self = (*stack)[first].toTensor();
  (*stack)[first] = hostView(self);
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  at::Tensor host = stack->back().toTensor();
  stack->pop_back();
  const auto byte_offset = static_cast<const char*>(host.data_ptr()) -
                           static_cast<const char*>(self.storage().data());
  at::Tensor result = at::empty({0}, self.options().dtype(host.scalar_type()));
  result.set_(self.storage(), byte_offset / static_cast<int64_t>(host.element_size()), host.sizes(),
              host.strides());
  stack->emplace_back(std::move(result));
}

}  // namespace at_npu::native
