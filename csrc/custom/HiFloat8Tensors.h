// HiFloat8Tensors.h - HiFloat8 codes held in uint8 tensors, as torch_npu keeps them (torch has no hifloat8 dtype):
// encoding and decoding composed of ATen ops, so that they run on any device (npu, cpu, meta) with the values
// and rounding of npu/hifloat8.h.
#pragma once

#include <ATen/core/Tensor.h>

namespace at_npu::native::hifloat8 {

// The HiFloat8 codes of `values` (any floating dtype; rounded to nearest, ties away from zero) as uint8.
at::Tensor encode(const at::Tensor& values);

// The float32 values of the HiFloat8 codes a uint8 tensor holds.
at::Tensor decode(const at::Tensor& codes);

}  // namespace at_npu::native::hifloat8
