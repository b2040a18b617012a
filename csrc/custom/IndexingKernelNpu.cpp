// IndexingKernelNpu.cpp - npu_indexing (strided slice), npu_masked_fill_range and npu_sign_bits_pack /
// npu_sign_bits_unpack, composed
// of ATen ops (which run on the npu and, on meta tensors, as Meta kernels).
#include <ATen/ops/arange.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/custom/CustomOpUtils.h"

namespace at_npu::native {

at::Tensor npu_indexing(const at::Tensor& self, at::IntArrayRef begin, at::IntArrayRef end, at::IntArrayRef strides,
                        int64_t begin_mask, int64_t end_mask, int64_t ellipsis_mask, int64_t new_axis_mask,
                        int64_t shrink_axis_mask) {
  TORCH_CHECK_VALUE(begin.size() == end.size() && end.size() == strides.size(),
                    "npu_indexing: begin, end and strides need one entry per sliced dimension, got ", begin.size(),
                    ", ", end.size(), " and ", strides.size());
  TORCH_CHECK_VALUE(static_cast<int64_t>(begin.size()) <= self.dim(), "npu_indexing: ", begin.size(),
                    " sliced dimensions for a ", self.dim(), "-d tensor");
  TORCH_CHECK_VALUE(ellipsis_mask == 0 && new_axis_mask == 0,
                    "npu_indexing: ellipsis_mask and new_axis_mask are not supported; slice every leading "
                    "dimension explicitly and add axes with unsqueeze");
  at::Tensor out = self;
  std::vector<int64_t> shrink;
  for (int64_t d = 0; d < static_cast<int64_t>(begin.size()); ++d) {
    const int64_t size = self.size(d), step = strides[d];
    TORCH_CHECK_VALUE(step > 0, "npu_indexing: strides must be positive, got ", step, " for dimension ", d);
    const bool shrink_d = (shrink_axis_mask >> d) & 1;
    int64_t b = ((begin_mask >> d) & 1) ? 0 : begin[d];
    int64_t e = ((end_mask >> d) & 1) ? size : end[d];
    if (b < 0) b += size;
    if (e < 0) e += size;
    b = std::clamp<int64_t>(b, 0, size);
    e = std::clamp<int64_t>(e, b, size);
    if (shrink_d) {
      TORCH_CHECK_INDEX(b < size, "npu_indexing: begin ", begin[d], " is out of range for dimension ", d,
                        " of size ", size);
      e = b + 1;
      shrink.push_back(d);
    }
    out = out.slice(d, b, e, step);
  }
  for (auto it = shrink.rbegin(); it != shrink.rend(); ++it) out = out.squeeze(*it);
  return out.clone(at::MemoryFormat::Contiguous);
}

at::Tensor npu_masked_fill_range(const at::Tensor& self, const at::Tensor& start, const at::Tensor& end,
                                 const at::Tensor& value, int64_t axis) {
  TORCH_CHECK_VALUE(self.dim() >= 1, "npu_masked_fill_range: self must have at least one dimension");
  TORCH_CHECK_VALUE(start.dim() == 2 && start.sizes().equals(end.sizes()),
                    "npu_masked_fill_range: start and end must be 2-d [ranges, batch] of the same shape, got ",
                    start.sizes(), " and ", end.sizes());
  TORCH_CHECK_VALUE(value.dim() == 1 && value.size(0) == start.size(0), "npu_masked_fill_range: value must be 1-d "
                    "with one entry per range (", start.size(0), "), got ", value.sizes());
  const int64_t dim = self.dim();
  const int64_t ax = axis < 0 ? axis + dim : axis;
  TORCH_CHECK_INDEX(ax >= 0 && ax < dim, "npu_masked_fill_range: axis ", axis, " is out of range for a ", dim,
                    "-d tensor");
  // Along the last axis of a tensor of 2 or more dimensions, batch entry j fills row j of dimension 0;
  // along any other axis the ranges of every batch entry fill whole slices.
  const bool batched = dim >= 2 && ax == dim - 1;
  const int64_t batch = start.size(1), length = self.size(ax);
  TORCH_CHECK_VALUE(!batched || batch <= self.size(0), "npu_masked_fill_range: ", batch,
                    " batch entries for dimension 0 of size ", self.size(0));
  at::Tensor pos = at::arange(length, start.options().dtype(at::kLong));
  std::vector<int64_t> mask_shape(dim, 1);
  mask_shape[ax] = length;
  if (batched) mask_shape[0] = self.size(0);
  at::Tensor out = self;
  for (int64_t i = 0; i < start.size(0); ++i) {
    at::Tensor s = start[i].to(at::kLong).unsqueeze(1), e = end[i].to(at::kLong).unsqueeze(1);
    at::Tensor in_range = pos.unsqueeze(0).ge(s).logical_and(pos.unsqueeze(0).lt(e));  // [batch, length]
    at::Tensor mask = batched ? at::constant_pad_nd(in_range, {0, 0, 0, self.size(0) - batch}, 0)
                              : in_range.any(0, /*keepdim=*/true);
    out = at::where(mask.reshape(mask_shape), value[i].to(self.scalar_type()), out);
  }
  return out.scalar_type() == self.scalar_type() ? out : out.to(self.scalar_type());
}

at::Tensor npu_sign_bits_pack(const at::Tensor& self, int64_t size) {
  TORCH_CHECK_VALUE(self.dim() == 1, "npu_sign_bits_pack: self must be 1-d, got ", self.dim(), " dimensions");
  TORCH_CHECK_VALUE(self.scalar_type() == at::kFloat || self.scalar_type() == at::kHalf,
                    "npu_sign_bits_pack: self must be float32 or float16, got ", self.scalar_type());
  const int64_t n = self.size(0), bytes = (n + 7) / 8;
  TORCH_CHECK_VALUE(size > 0 && bytes % size == 0, "npu_sign_bits_pack: the ", bytes,
                    " packed bytes cannot be split into size=", size, " rows");
  // One bit per element (1 for x >= 0), least significant bit first, zero padded to whole bytes.
  at::Tensor bits = at::constant_pad_nd(self.ge(0).to(at::kInt), {0, bytes * 8 - n}, 0).reshape({bytes, 8});
  at::Tensor weights = at::pow(2, at::arange(8, bits.options()));
  return at::sum(bits * weights, {1}).to(at::kByte).reshape({size, bytes / size});
}

at::Tensor npu_sign_bits_unpack(const at::Tensor& input, int64_t size, at::ScalarType dtype) {
  TORCH_CHECK_VALUE(input.dim() == 1 && input.scalar_type() == at::kByte,
                    "npu_sign_bits_unpack: input must be 1-d uint8, got ", input.scalar_type(), " of shape ",
                    input.sizes());
  TORCH_CHECK_VALUE(dtype == at::kFloat || dtype == at::kHalf,
                    "npu_sign_bits_unpack: dtype must be torch.float32 or torch.float16, got ", dtype);
  const int64_t bits = input.size(0) * 8;
  TORCH_CHECK_VALUE(size > 0 && bits % size == 0, "npu_sign_bits_unpack: the ", bits,
                    " unpacked values cannot be split into size=", size, " rows");
  // Least significant bit first; a set bit is +1, a clear one -1.
  at::Tensor shifts = at::arange(8, input.options().dtype(at::kInt));
  at::Tensor set = input.to(at::kInt).unsqueeze(1).bitwise_right_shift(shifts).bitwise_and(1);
  return (set * 2 - 1).to(dtype).reshape({size, bits / size});
}

}  // namespace at_npu::native
