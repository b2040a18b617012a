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
  m.impl("eq.Tensor_out", TORCH_FN(eq_tensor_out));
  m.impl("eq.Scalar_out", TORCH_FN(eq_scalar_out));
  m.impl("ne.Tensor_out", TORCH_FN(ne_tensor_out));
  m.impl("ne.Scalar_out", TORCH_FN(ne_scalar_out));
  m.impl("lt.Tensor_out", TORCH_FN(lt_tensor_out));
  m.impl("lt.Scalar_out", TORCH_FN(lt_scalar_out));
  m.impl("le.Tensor_out", TORCH_FN(le_tensor_out));
  m.impl("le.Scalar_out", TORCH_FN(le_scalar_out));
  m.impl("gt.Tensor_out", TORCH_FN(gt_tensor_out));
  m.impl("gt.Scalar_out", TORCH_FN(gt_scalar_out));
  m.impl("ge.Tensor_out", TORCH_FN(ge_tensor_out));
  m.impl("ge.Scalar_out", TORCH_FN(ge_scalar_out));
  m.impl("logical_and.out", TORCH_FN(logical_and_out));
  m.impl("logical_or.out", TORCH_FN(logical_or_out));
  m.impl("logical_not.out", TORCH_FN(logical_not_out));
  m.impl("sum.IntList_out", TORCH_FN(sum_out));
  m.impl("mean.out", TORCH_FN(mean_out));
  m.impl("max.dim_max", TORCH_FN(max_dim_out));
  m.impl("min.dim_min", TORCH_FN(min_dim_out));
  m.impl("max", TORCH_FN(max_all));
  m.impl("min", TORCH_FN(min_all));
  m.impl("argmax.out", TORCH_FN(argmax_out));
  m.impl("argmin.out", TORCH_FN(argmin_out));
  m.impl("var.correction", TORCH_FN(var_correction));
  m.impl("var.correction_out", TORCH_FN(var_correction_out));
  m.impl("std.correction", TORCH_FN(std_correction));
  m.impl("std.correction_out", TORCH_FN(std_correction_out));
  m.impl("mm.out", TORCH_FN(mm_out));
  m.impl("bmm.out", TORCH_FN(bmm_out));
  m.impl("addmm.out", TORCH_FN(addmm_out));
  m.impl("baddbmm.out", TORCH_FN(baddbmm_out));
  m.impl("convolution", TORCH_FN(convolution));
  m.impl("convolution_backward", TORCH_FN(convolution_backward));
  m.impl("max_pool2d_with_indices.out", TORCH_FN(max_pool2d_with_indices_out));
  m.impl("max_pool2d_with_indices_backward.grad_input", TORCH_FN(max_pool2d_with_indices_backward_out));
  m.impl("avg_pool2d.out", TORCH_FN(avg_pool2d_out));
  m.impl("avg_pool2d_backward.grad_input", TORCH_FN(avg_pool2d_backward_out));
  m.impl("_adaptive_avg_pool2d", TORCH_FN(_adaptive_avg_pool2d));
  m.impl("_adaptive_avg_pool2d_backward", TORCH_FN(_adaptive_avg_pool2d_backward));
  m.impl("native_batch_norm_backward", TORCH_FN(native_batch_norm_backward));
  m.impl("native_layer_norm", TORCH_FN(native_layer_norm));
  m.impl("native_layer_norm_backward", TORCH_FN(native_layer_norm_backward));
  m.impl("_softmax.out", TORCH_FN(_softmax_out));
  m.impl("_log_softmax.out", TORCH_FN(_log_softmax_out));
  m.impl("_softmax_backward_data.out", TORCH_FN(_softmax_backward_data_out));
  m.impl("_log_softmax_backward_data.out", TORCH_FN(_log_softmax_backward_data_out));
  m.impl("nll_loss_forward.output", TORCH_FN(nll_loss_forward_out));
  m.impl("nll_loss_backward.grad_input", TORCH_FN(nll_loss_backward_out));
  m.impl("mse_loss.out", TORCH_FN(mse_loss_out));
  m.impl("mse_loss_backward", TORCH_FN(mse_loss_backward));
  m.impl("mse_loss_backward.grad_input", TORCH_FN(mse_loss_backward_out));
  m.impl("gelu.out", TORCH_FN(gelu_out));
  m.impl("gelu_backward.grad_input", TORCH_FN(gelu_backward_out));
  m.impl("silu.out", TORCH_FN(silu_out));
  m.impl("silu_backward", TORCH_FN(silu_backward));
  m.impl("silu_backward.grad_input", TORCH_FN(silu_backward_out));
  m.impl("sigmoid_backward.grad_input", TORCH_FN(sigmoid_backward_out));
  m.impl("tanh_backward.grad_input", TORCH_FN(tanh_backward_out));
  m.impl("threshold_backward.grad_input", TORCH_FN(threshold_backward_out));
  m.impl("native_dropout_backward", TORCH_FN(native_dropout_backward));
  m.impl("uniform_", TORCH_FN(uniform_));
  m.impl("normal_", TORCH_FN(normal_));
  m.impl("bernoulli_.float", TORCH_FN(bernoulli_float_));
  m.impl("arange.start_out", TORCH_FN(arange_out));
  m.impl("embedding", TORCH_FN(embedding));
  m.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward));
  m.impl("index_select", TORCH_FN(index_select));
  m.impl("index_select.out", TORCH_FN(index_select_out));
  m.impl("gather.out", TORCH_FN(gather_out));
  m.impl("scatter.src_out", TORCH_FN(scatter_src_out));
  m.impl("scatter.value_out", TORCH_FN(scatter_value_out));
  m.impl("scatter_add.out", TORCH_FN(scatter_add_out));
  m.impl("_index_put_impl_", TORCH_FN(_index_put_impl_));
  m.impl("cat.out", TORCH_FN(cat_out));
  m.impl("where.self", TORCH_FN(where_self));
  m.impl("where.self_out", TORCH_FN(where_self_out));
  m.impl("masked_fill_.Scalar", TORCH_FN(masked_fill_scalar_));
  m.impl("masked_fill_.Tensor", TORCH_FN(masked_fill_tensor_));
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
