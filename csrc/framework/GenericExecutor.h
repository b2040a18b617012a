// GenericExecutor.h - runs any ATen op on npu without a hand-written kernel: outputs inferred by the
// op's Meta kernel and allocated on the device, the CPU kernel queued on the current stream over
// zero-copy host views. Ops with no Meta kernel, data-dependent outputs, non-tensor results or a
// random generator run synchronously instead.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace at_npu::native {

void genericExecute(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The boxed PrivateUse1 fallback: the generic executor, or under NPU_SIM_STRICT=1 the copying CPU
// fallback (see ExecutionPolicy.h).
void npuBoxedFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace at_npu::native
