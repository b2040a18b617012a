// CpuFallback.h - the boxed fallback that runs an op without an npu kernel on the CPU.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace at_npu::native {

// Copies npu inputs to the host, runs the CPU kernel, copies results (and mutated inputs) back;
// view ops instead become npu views of their input. Warns once per op; with NPU_SIM_FALLBACK=0 it
// raises NotImplementedError naming the op.
void npuCpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace at_npu::native
