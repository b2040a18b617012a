// OutVariants.h - finds the out= overload of a functional op (add.Tensor -> add.out), so a CPU kernel
// can write straight into device-allocated outputs.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>

namespace at_npu::native {

// The overload with the same non-out arguments and one out argument per return, if any.
std::optional<c10::OperatorHandle> findOutVariant(const c10::OperatorHandle& op);

}  // namespace at_npu::native
