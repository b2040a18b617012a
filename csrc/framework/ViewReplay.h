// ViewReplay.h - view ops without an npu kernel: run the CPU view kernel on a host view (metadata
// only) and rebuild the result as a view of the npu tensor, so aliasing is preserved.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace at_npu::native {

// A view op: one Tensor return aliasing (not writing) its first argument, which is an npu tensor.
bool isNpuViewOp(const c10::OperatorHandle& op, const torch::jit::Stack& stack);
void replayViewOp(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace at_npu::native
