// NpuNativeFunctions.h - declarations of the hand-written npu ATen kernels (registered in RegisterNpu.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/core/Storage.h>

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

}  // namespace at_npu::native
