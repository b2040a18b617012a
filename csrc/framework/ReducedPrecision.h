// ReducedPrecision.h - running float16 / bfloat16 ops whose CPU kernel lacks that dtype in float32,
// as an NPU computes them natively: inputs upcast, results and in-place arguments cast back.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <functional>
#include <string>

namespace at_npu::native {

// True for PyTorch's dispatch error "xxx" not implemented for 'Half' (or 'BFloat16').
bool isMissingReducedPrecisionKernel(const std::string& message);

// Runs `run` on the last `nargs` values of `stack` with every float16 / bfloat16 tensor upcast to
// float32, then writes mutated arguments back and casts float32 results to the reduced dtype.
void runUpcast(const c10::OperatorHandle& op, torch::jit::Stack* stack,
               const std::function<void(torch::jit::Stack*)>& run);

}  // namespace at_npu::native
