// RegisterNpu.cpp - registers the hand-written npu kernels and the boxed fallback for PrivateUse1.
#include <torch/library.h>

#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/GenericExecutor.h"

namespace at_npu::native {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(_reshape_alias));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_", TORCH_FN(set_));
  m.impl("set_.source_Storage", TORCH_FN(set_source_Storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_source_Storage_storage_offset));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_Tensor));
  m.impl("_copy_from", TORCH_FN(_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(_copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(_local_scalar_dense));
  m.impl("fill_.Scalar", TORCH_FN(fill_));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor_));
  m.impl("zero_", TORCH_FN(zero_));
  m.impl("record_stream", TORCH_FN(record_stream));
  // Named device ops; the functional and in-place forms reach these through their structured
  // out= kernels.
  m.impl("add.out", TORCH_FN(add_out));
  m.impl("sub.out", TORCH_FN(sub_out));
  m.impl("mul.out", TORCH_FN(mul_out));
  m.impl("div.out", TORCH_FN(div_out));
  m.impl("neg.out", TORCH_FN(neg_out));
  m.impl("abs.out", TORCH_FN(abs_out));
  m.impl("exp.out", TORCH_FN(exp_out));
  m.impl("sqrt.out", TORCH_FN(sqrt_out));
  m.impl("sigmoid.out", TORCH_FN(sigmoid_out));
  m.impl("tanh.out", TORCH_FN(tanh_out));
  m.impl("relu", TORCH_FN(relu));
  m.impl("relu_", TORCH_FN(relu_));
  m.impl("native_batch_norm", TORCH_FN(native_batch_norm));
  m.impl("native_dropout", TORCH_FN(native_dropout));
  // Their default (CompositeExplicitAutograd) kernels lead to the *_overrideable ops, which only
  // throw; the generic executor runs the CPU convolution instead.
  m.impl("convolution", torch::CppFunction::makeFromBoxedFunction<&npuBoxedFallback>());
  m.impl("convolution_backward", torch::CppFunction::makeFromBoxedFunction<&npuBoxedFallback>());
}

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
