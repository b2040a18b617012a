// RegisterNpu.cpp - hand-written registrations: the generic executor as PrivateUse1 boxed fallback and the
// Conjugate/Negative fallthroughs. Per-op kernels are registered from config/npu_native_functions.yaml.
#include <torch/library.h>

#include "csrc/framework/GenericExecutor.h"

namespace at_npu::native {

// copy_ handles conjugate / negative views itself (host views keep the bits); materialising them
// first would call _copy_from again, endlessly.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&npuBoxedFallback>());
}

}  // namespace at_npu::native
