// ShapeOpsKernelNpu.cpp - npu_transpose, npu_slice, npu_pad, npu_bmmV2, npu_sort_v2, npu_max /
// npu_min: torch_npu's layout, batched-matmul and sort / reduce-with-index ops, composed of ATen ops
// (which run on the npu and, on meta tensors, as Meta kernels).
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/max.h>
#include <ATen/ops/min.h>
#include <ATen/ops/sort.h>

#include "csrc/custom/CustomOpUtils.h"
#include "csrc/custom/NpuCustomFunctions.h"

namespace at_npu::native {

at::Tensor npu_transpose(const at::Tensor& self, at::IntArrayRef perm, bool require_contiguous) {
  TORCH_CHECK_VALUE(static_cast<int64_t>(perm.size()) == self.dim(), "npu_transpose: perm has ",
                    perm.size(), " entries for a ", self.dim(), "-D tensor; give one per dim");
  return custom::fresh(self.permute(perm).contiguous(), self);
}

at::Tensor npu_slice(const at::Tensor& self, at::IntArrayRef offsets, at::IntArrayRef size) {
  TORCH_CHECK_VALUE(static_cast<int64_t>(offsets.size()) == self.dim() &&
                        static_cast<int64_t>(size.size()) == self.dim(),
                    "npu_slice: expected one offset and one size per dim of the ", self.dim(),
                    "-D input, got offsets ", offsets, " and size ", size);
  at::Tensor out = self;
  for (int64_t d = 0; d < self.dim(); ++d) {
    TORCH_CHECK_VALUE(offsets[d] >= 0 && size[d] >= 0 && offsets[d] + size[d] <= self.size(d),
                      "npu_slice: dim ", d, ": offset ", offsets[d], " + size ", size[d],
                      " exceeds the input's ", self.size(d));
    out = out.narrow(d, offsets[d], size[d]);
  }
  return custom::fresh(out.contiguous(), self);
}

// paddings: (before, after) for each dim in order, as the NPU's Pad op takes them.
at::Tensor npu_pad(const at::Tensor& input, at::IntArrayRef paddings) {
  TORCH_CHECK_VALUE(paddings.size() % 2 == 0 && static_cast<int64_t>(paddings.size()) <= 2 * input.dim(),
                    "npu_pad: expected (before, after) pairs for the leading dims, at most ",
                    2 * input.dim(), " values, got ", paddings.size());
  // constant_pad_nd lists pairs from the last dim backwards.
  std::vector<int64_t> pad;
  for (int64_t d = static_cast<int64_t>(paddings.size()) / 2 - 1; d >= 0; --d) {
    pad.push_back(paddings[2 * d]);
    pad.push_back(paddings[2 * d + 1]);
  }
  std::vector<int64_t> full(2 * (input.dim() - static_cast<int64_t>(paddings.size()) / 2), 0);
  full.insert(full.end(), pad.begin(), pad.end());
  return at::constant_pad_nd(input, full, 0);
}

at::Tensor npu_bmmV2(const at::Tensor& self, const at::Tensor& mat2, at::IntArrayRef output_sizes) {
  TORCH_CHECK_VALUE(self.dim() >= 2 && mat2.dim() >= 2, "npu_bmmV2: expected inputs of at least 2 dims, ",
                    "got ", self.sizes(), " and ", mat2.sizes());
  return at::matmul(self, mat2);
}

at::Tensor npu_sort_v2(const at::Tensor& self, int64_t dim, bool descending) {
  return std::get<0>(at::sort(self, dim, descending));
}

// Values and int32 indices, as the NPU's ArgMaxWithValue / ArgMinWithValue give them.
std::tuple<at::Tensor, at::Tensor> npu_max(const at::Tensor& self, int64_t dim, bool keepdim) {
  auto [values, indices] = at::max(self, dim, keepdim);
  return {values, indices.to(at::kInt)};
}

std::tuple<at::Tensor, at::Tensor> npu_min(const at::Tensor& self, int64_t dim, bool keepdim) {
  auto [values, indices] = at::min(self, dim, keepdim);
  return {values, indices.to(at::kInt)};
}

}  // namespace at_npu::native
