// QuantPacking.h - the packed integer and scale forms the quantization device ops share: int4 values eight to an
// int32, npu_trans_quant_param's int64 scales (float32 bits with a 9-bit offset), and int8 saturation.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/round.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace npu::opslib::aten::quant {

// The int4 values (as int8) of data packed eight to an int32 along the last dimension, lowest nibble first.
inline at::Tensor unpackInt4(const at::Tensor& packed) {
  at::Tensor src = packed.contiguous();
  std::vector<int64_t> shape = src.sizes().vec();
  shape.back() *= 8;
  at::Tensor out = at::empty(shape, src.options().dtype(at::kChar));
  const int32_t* p = src.const_data_ptr<int32_t>();
  int8_t* o = out.mutable_data_ptr<int8_t>();
  for (int64_t i = 0; i < src.numel(); ++i) {
    const uint32_t word = static_cast<uint32_t>(p[i]);
    for (int64_t j = 0; j < 8; ++j) {
      const int nibble = static_cast<int>((word >> (4 * j)) & 0xFu);
      o[i * 8 + j] = static_cast<int8_t>(nibble >= 8 ? nibble - 16 : nibble);
    }
  }
  return out;
}

// The float32 scales an int64 (packed) scale tensor holds in its bits 0-31.
inline at::Tensor unpackScale(const at::Tensor& packed) {
  at::Tensor src = packed.contiguous();
  at::Tensor out = at::empty(src.sizes(), src.options().dtype(at::kFloat));
  const int64_t* p = src.const_data_ptr<int64_t>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < src.numel(); ++i) {
    const uint32_t bits = static_cast<uint32_t>(p[i] & 0xFFFFFFFFLL);
    std::memcpy(o + i, &bits, sizeof(float));
  }
  return out;
}

// The offsets an int64 (packed) scale tensor holds in bits 37-45, a 9-bit two's complement (0 where none was packed).
inline at::Tensor unpackOffset(const at::Tensor& packed) {
  at::Tensor src = packed.contiguous();
  at::Tensor out = at::empty(src.sizes(), src.options().dtype(at::kFloat));
  const int64_t* p = src.const_data_ptr<int64_t>();
  float* o = out.mutable_data_ptr<float>();
  for (int64_t i = 0; i < src.numel(); ++i) {
    const int64_t v = (p[i] >> 37) & 0x1FF;
    o[i] = static_cast<float>(v >= 256 ? v - 512 : v);
  }
  return out;
}

inline at::Tensor saturateInt8(const at::Tensor& v) { return at::clamp(at::round(v), -128, 127).to(at::kChar); }

}  // namespace npu::opslib::aten::quant
