// HiFloat8Tensors.cpp - HiFloat8 encode / decode of whole tensors: a bucket search over the midpoints between
// neighbouring magnitudes, then a table lookup, all ATen ops on the tensor's own device.
#include "csrc/custom/HiFloat8Tensors.h"

#include <ATen/ops/abs.h>
#include <ATen/ops/bitwise_or.h>
#include <ATen/ops/bucketize.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/signbit.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <c10/util/Exception.h>

#include <npu/hifloat8.h>

#include <array>
#include <vector>

namespace at_npu::native::hifloat8 {
namespace {

namespace table = npu::hifloat8;

// The tables as tensors on `device` (built on the host once; a small copy per call on other devices).
at::Tensor midpoints(const at::Device& device) {
  static const at::Tensor host = at::tensor(
      std::vector<float>(table::kTable.midpoint.begin(), table::kTable.midpoint.end()), at::kFloat);
  return host.to(device);
}

at::Tensor slotCodes(const at::Device& device) {
  static const at::Tensor host = at::tensor(
      std::vector<uint8_t>(table::kTable.code.begin(), table::kTable.code.end()), at::kByte);
  return host.to(device);
}

at::Tensor codeValues(const at::Device& device) {
  static const at::Tensor host = [] {
    std::vector<float> values(256);
    for (int c = 0; c < 256; ++c) values[static_cast<size_t>(c)] = table::ToFloat(static_cast<uint8_t>(c));
    return at::tensor(values, at::kFloat);
  }();
  return host.to(device);
}

}  // namespace

at::Tensor encode(const at::Tensor& values) {
  TORCH_CHECK_TYPE(at::isFloatingType(values.scalar_type()), "hifloat8: only floating values encode to ",
                   "hifloat8, got ", values.scalar_type());
  const at::Device device = values.device();
  const at::Tensor v = values.to(at::kFloat);
  const at::Tensor slot = at::bucketize(at::abs(v), midpoints(device), /*out_int32=*/false, /*right=*/true);
  at::Tensor code = at::index_select(slotCodes(device), 0, slot.reshape({-1})).view(values.sizes());
  // Negative values keep their sign bit unless they round to zero: 0x80 is NaN, not -0.
  const at::Tensor negative = at::signbit(v).logical_and(at::ne(code, 0));
  code = at::where(negative, at::bitwise_or(code, static_cast<int64_t>(table::kNaN)), code);
  return at::where(at::isnan(v), at::scalar_tensor(static_cast<int64_t>(table::kNaN), code.options()), code);
}

at::Tensor decode(const at::Tensor& codes) {
  TORCH_CHECK_TYPE(codes.scalar_type() == at::kByte || codes.scalar_type() == at::kChar, "hifloat8: codes are held ",
                   "in uint8 (or int8) tensors, got ", codes.scalar_type());
  const at::Tensor index = codes.view(at::kByte).to(at::kLong).reshape({-1});
  return at::index_select(codeValues(codes.device()), 0, index).view(codes.sizes());
}

}  // namespace at_npu::native::hifloat8
