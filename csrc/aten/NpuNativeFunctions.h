// NpuNativeFunctions.h - declarations of the hand-written npu ATen kernels (registered in RegisterNpu.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/core/Storage.h>
#include <ATen/core/List.h>
#include <ATen/core/Generator.h>
#include <ATen/core/IListRef.h>
#include <c10/util/OptionalArrayRef.h>

#include <array>
#include <optional>
#include <tuple>

namespace at_npu::native {

at::Tensor empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                 std::optional<at::Layout> layout, std::optional<at::Device> device,
                 std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format);
at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                         std::optional<at::Device> device, std::optional<bool> pin_memory);

at::Tensor as_strided(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride,
                      std::optional<int64_t> storage_offset);
at::Tensor view(const at::Tensor& self, at::IntArrayRef size);
at::Tensor _reshape_alias(const at::Tensor& self, at::IntArrayRef size, at::IntArrayRef stride);

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format);
at::Tensor& set_(at::Tensor& self);
at::Tensor& set_source_Storage(at::Tensor& self, c10::Storage source);
at::Tensor& set_source_Storage_storage_offset(at::Tensor& self, c10::Storage source,
                                              int64_t storage_offset, at::IntArrayRef size,
                                              at::IntArrayRef stride);
at::Tensor& set_source_Tensor(at::Tensor& self, const at::Tensor& source);

at::Tensor _copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);
at::Tensor _copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst);
at::Scalar _local_scalar_dense(const at::Tensor& self);
at::Tensor& fill_(at::Tensor& self, const at::Scalar& value);
at::Tensor& fill_tensor_(at::Tensor& self, const at::Tensor& value);
at::Tensor& zero_(at::Tensor& self);
void record_stream(at::Tensor& self, c10::Stream stream);

// Elementwise ops on named device ops (opslib).
at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                    at::Tensor& out);
at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                    at::Tensor& out);
at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor& neg_out(const at::Tensor& self, at::Tensor& out);
at::Tensor& abs_out(const at::Tensor& self, at::Tensor& out);
at::Tensor& exp_out(const at::Tensor& self, at::Tensor& out);
at::Tensor& sqrt_out(const at::Tensor& self, at::Tensor& out);
at::Tensor& sigmoid_out(const at::Tensor& self, at::Tensor& out);
at::Tensor& tanh_out(const at::Tensor& self, at::Tensor& out);
at::Tensor relu(const at::Tensor& self);
at::Tensor& relu_(at::Tensor& self);

// Host-computed kernels for ops the generic CPU fallback gets wrong (see each file's header).
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps);
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train);

// ---- Comparisons and logical ops (CompareKernelNpu.cpp).
#define NPU_DECLARE_COMPARE(fn)                                                                  \
  at::Tensor& fn##_tensor_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out); \
  at::Tensor& fn##_scalar_out(const at::Tensor& self, const at::Scalar& other, at::Tensor& out);
NPU_DECLARE_COMPARE(eq)
NPU_DECLARE_COMPARE(ne)
NPU_DECLARE_COMPARE(lt)
NPU_DECLARE_COMPARE(le)
NPU_DECLARE_COMPARE(gt)
NPU_DECLARE_COMPARE(ge)
#undef NPU_DECLARE_COMPARE
at::Tensor& logical_and_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor& logical_or_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor& logical_not_out(const at::Tensor& self, at::Tensor& out);

// ---- Reductions (ReduceKernelNpu.cpp).
at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out);
at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, at::Tensor& out);
std::tuple<at::Tensor&, at::Tensor&> max_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                 at::Tensor& values, at::Tensor& indices);
std::tuple<at::Tensor&, at::Tensor&> min_dim_out(const at::Tensor& self, int64_t dim, bool keepdim,
                                                 at::Tensor& values, at::Tensor& indices);
at::Tensor max_all(const at::Tensor& self);
at::Tensor min_all(const at::Tensor& self);
at::Tensor& argmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor& out);
at::Tensor& argmin_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor& out);
at::Tensor& var_correction_out(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const std::optional<at::Scalar>& correction, bool keepdim,
                               at::Tensor& out);
at::Tensor var_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                          const std::optional<at::Scalar>& correction, bool keepdim);
at::Tensor& std_correction_out(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const std::optional<at::Scalar>& correction, bool keepdim,
                               at::Tensor& out);
at::Tensor std_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                          const std::optional<at::Scalar>& correction, bool keepdim);

// ---- Matrix products (MatmulKernelNpu.cpp).
at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out);
at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out);

// ---- Convolution and pooling (ConvolutionKernelNpu.cpp, PoolingKernelNpu.cpp).
at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                       at::IntArrayRef output_padding, int64_t groups);
std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    at::OptionalIntArrayRef bias_sizes, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask);
std::tuple<at::Tensor&, at::Tensor&> max_pool2d_with_indices_out(
    const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode, at::Tensor& out,
    at::Tensor& indices);
at::Tensor& max_pool2d_with_indices_backward_out(const at::Tensor& grad_output,
                                                 const at::Tensor& self, at::IntArrayRef kernel_size,
                                                 at::IntArrayRef stride, at::IntArrayRef padding,
                                                 at::IntArrayRef dilation, bool ceil_mode,
                                                 const at::Tensor& indices, at::Tensor& grad_input);
at::Tensor& avg_pool2d_out(const at::Tensor& self, at::IntArrayRef kernel_size,
                           at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                           bool count_include_pad, std::optional<int64_t> divisor_override,
                           at::Tensor& out);
at::Tensor& avg_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                    at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                    at::IntArrayRef padding, bool ceil_mode,
                                    bool count_include_pad, std::optional<int64_t> divisor_override,
                                    at::Tensor& grad_input);
at::Tensor _adaptive_avg_pool2d(const at::Tensor& self, at::IntArrayRef output_size);
at::Tensor _adaptive_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self);

// ---- Normalization (NormKernelNpu.cpp).
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd,
    bool train, double eps, std::array<bool, 3> output_mask);
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(
    const at::Tensor& input, at::IntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, double eps);
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> output_mask);

// ---- Softmax and losses (SoftmaxLossKernelNpu.cpp).
at::Tensor& _softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out);
at::Tensor& _log_softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float,
                             at::Tensor& out);
at::Tensor& _softmax_backward_data_out(const at::Tensor& grad_output, const at::Tensor& output,
                                       int64_t dim, at::ScalarType input_dtype,
                                       at::Tensor& grad_input);
at::Tensor& _log_softmax_backward_data_out(const at::Tensor& grad_output, const at::Tensor& output,
                                           int64_t dim, at::ScalarType input_dtype,
                                           at::Tensor& grad_input);
std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(const at::Tensor& self,
                                                          const at::Tensor& target,
                                                          const std::optional<at::Tensor>& weight,
                                                          int64_t reduction, int64_t ignore_index,
                                                          at::Tensor& output,
                                                          at::Tensor& total_weight);
at::Tensor& nll_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                  const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                  int64_t reduction, int64_t ignore_index,
                                  const at::Tensor& total_weight, at::Tensor& grad_input);
at::Tensor& mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                         at::Tensor& out);
at::Tensor& mse_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                  const at::Tensor& target, int64_t reduction,
                                  at::Tensor& grad_input);
at::Tensor mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                             const at::Tensor& target, int64_t reduction);

// ---- Activations (ActivationKernelNpu.cpp).
at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out);
at::Tensor& gelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                              c10::string_view approximate, at::Tensor& grad_input);
at::Tensor& silu_out(const at::Tensor& self, at::Tensor& out);
at::Tensor& silu_backward_out(const at::Tensor& grad_output, const at::Tensor& x,
                              at::Tensor& grad_input);
at::Tensor silu_backward(const at::Tensor& grad_output, const at::Tensor& self);
at::Tensor& sigmoid_backward_out(const at::Tensor& grad_output, const at::Tensor& x,
                                 at::Tensor& grad_input);
at::Tensor& tanh_backward_out(const at::Tensor& grad_output, const at::Tensor& x,
                              at::Tensor& grad_input);
at::Tensor& threshold_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                   const at::Scalar& threshold, at::Tensor& grad_input);

// ---- Dropout, random fills, arange (DropoutKernelNpu.cpp, RandomKernelNpu.cpp).
at::Tensor native_dropout_backward(const at::Tensor& grad_output, const at::Tensor& mask,
                                   double scale);
at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen);
at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen);
at::Tensor& bernoulli_float_(at::Tensor& self, double p, std::optional<at::Generator> gen);
at::Tensor& arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step,
                       at::Tensor& out);

// ---- Indexing (IndexKernelNpu.cpp).
at::Tensor embedding(const at::Tensor& weight, const at::Tensor& indices, int64_t padding_idx,
                     bool scale_grad_by_freq, bool sparse);
at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices,
                                    int64_t num_weights, int64_t padding_idx,
                                    bool scale_grad_by_freq);
at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                             at::Tensor& out);
at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index);
at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       bool sparse_grad, at::Tensor& out);
at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out);
at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out);
at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                              const at::Scalar& value, at::Tensor& out);
at::Tensor& _index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                             const at::Tensor& values, bool accumulate, bool unsafe);

// ---- cat / where / masked_fill (ShapeKernelNpu.cpp).
at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out);
at::Tensor& where_self_out(const at::Tensor& condition, const at::Tensor& self,
                           const at::Tensor& other, at::Tensor& out);
at::Tensor where_self(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other);
at::Tensor& masked_fill_scalar_(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value);
at::Tensor& masked_fill_tensor_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value);

}  // namespace at_npu::native
