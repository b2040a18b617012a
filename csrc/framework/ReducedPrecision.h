// ReducedPrecision.h - running float16 / bfloat16 ops whose CPU kernel lacks that dtype in float32,
// as an NPU computes them natively: inputs upcast, results and in-place arguments cast back.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <functional>
#include <string>

namespace at_npu::native {

// True for errors of CPU kernels that lack float16 / bfloat16 ("xxx" not implemented for 'Half',
// "Unsupported datatype for add_relu", "linalg.inv: Low precision dtypes not supported").
bool isMissingReducedPrecisionKernel(const std::string& message);

// Ops that accumulate over many elements (reductions, matmul, convolution, normalisation,
// interpolation and pooling, sampling, losses, linear algebra). NPUs accumulate float16 / bfloat16
// in float32, so these run in float32 with the results rounded once. `name` is "aten::sum.dim_IntList".
bool accumulatesInFloat32(const std::string& name);

// True when the floating tensor arguments (and list elements) are float16 / bfloat16 and none is
// float32 or float64 (mixed dtypes keep the kernel's own promotion rules and errors).
bool hasReducedPrecisionTensor(c10::ArrayRef<c10::IValue> args);

// Runs `run` on the last `nargs` values of `stack` with every float16 / bfloat16 tensor upcast to
// float32, then writes mutated arguments back and casts float32 results to the reduced dtype.
void runUpcast(const c10::OperatorHandle& op, torch::jit::Stack* stack,
               const std::function<void(torch::jit::Stack*)>& run);

}  // namespace at_npu::native
