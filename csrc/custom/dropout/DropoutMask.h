// DropoutMask.h - torch_npu's dropout mask bits, shared by the dropout ops and the fused attention
// ops: one bit per element (1 = kept), element i in bit i % 8 of byte i / 8, padded to 128 elements.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

namespace at_npu::native {

inline int64_t dropoutMaskBytes(int64_t numel) { return (numel + 127) / 128 * 128 / 8; }

// (seed, offset) from `device`'s npu generator as torch_npu draws them for a mask: the offset starts
// at 0 after manual_seed and advances by 10 per mask.
std::pair<int64_t, int64_t> nextDropoutSeed(c10::DeviceIndex device);

// The bits of `numel` elements, each dropped with probability `drop_prob`, a function of (seed,
// offset) only, on aclnnDropoutGenMaskV2; `options` gives the device, `prob_dtype` the op's
// probability dtype argument.
at::Tensor dropoutMaskBits(int64_t numel, double drop_prob, int64_t seed, int64_t offset,
                           const at::TensorOptions& options, at::ScalarType prob_dtype);

}  // namespace at_npu::native
