// CpuFallback.h - running an op on the CPU with copies: the strict-mode fallback, and the synchronous
// path of the generic executor.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace at_npu::native {

// Copies npu inputs to the host, runs the CPU kernel (random ops draw from the npu generator; npu
// device arguments become cpu), copies results and mutated inputs back.
void runOnCpuWithCopies(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Strict mode: warns once per op ("aten::xxx is not supported on npu; it ran on the CPU") and runs
// it with copies; with NPU_SIM_FALLBACK=0 raises NotImplementedError naming the op instead.
void npuCpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace at_npu::native
