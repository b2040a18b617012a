// ScatterUpdateKernelNpu.cpp - npu_scatter_nd_update(_) (rows picked by index tuples) and scatter_update(_)
// (per-batch slices written from an offset along one axis, the KV-cache update) on the aclnnScatterNdUpdate /
// aclnnInplaceScatterUpdate device ops; the functional forms update a contiguous copy of self.
#include <ATen/ops/empty.h>

#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

void checkIndexDtype(const char* op, const at::Tensor& indices) {
  TORCH_CHECK_TYPE(indices.scalar_type() == at::kInt || indices.scalar_type() == at::kLong, op,
                   ": indices must be int32 or int64, got ", indices.scalar_type());
}

void checkSameDtype(const char* op, const at::Tensor& self, const at::Tensor& updates) {
  TORCH_CHECK_TYPE(updates.scalar_type() == self.scalar_type(), op, ": updates must have self's dtype ",
                   self.scalar_type(), ", got ", updates.scalar_type());
}

// indices [..., a] name `a` leading coordinates of self; updates must be indices' batch shape followed by
// self's remaining dimensions (self [4, 5, 6], indices [3, 2] -> updates [3, 6]).
void checkScatterNd(const char* op, const at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates) {
  checkIndexDtype(op, indices);
  checkSameDtype(op, self, updates);
  TORCH_CHECK_VALUE(self.dim() >= 1, op, ": self must have at least one dimension");
  TORCH_CHECK_VALUE(indices.dim() >= 1, op, ": indices must be [..., a] index tuples, got a 0-D tensor");
  const int64_t depth = indices.size(-1);
  TORCH_CHECK_VALUE(depth >= 1 && depth <= self.dim(), op, ": the last dimension of indices (", depth,
                    ") must be in [1, ", self.dim(), "] (self's dimensions), indices are ", indices.sizes());
  std::vector<int64_t> expected(indices.sizes().begin(), indices.sizes().end() - 1);
  expected.insert(expected.end(), self.sizes().begin() + depth, self.sizes().end());
  TORCH_CHECK_VALUE(updates.sizes().vec() == expected, op, ": updates must have shape ", at::IntArrayRef(expected),
                    " (indices' shape without its last dimension, then self's dimensions after the first ", depth,
                    "), got ", updates.sizes());
}

// Returns the wrapped axis. indices: 0-D / [n] (batch i gets offset indices[i]) or [n, 2] (rows of
// (batch, offset)); updates has self's rank, n batches, any length <= self's along axis, self's other sizes.
int64_t checkScatterUpdate(const char* op, const at::Tensor& self, const at::Tensor& indices,
                           const at::Tensor& updates, int64_t axis) {
  checkIndexDtype(op, indices);
  checkSameDtype(op, self, updates);
  TORCH_CHECK_VALUE(self.dim() >= 2 && self.dim() <= 8, op, ": self must have 2 to 8 dimensions, got ",
                    self.sizes());
  TORCH_CHECK_VALUE(axis >= -self.dim() && axis < self.dim(), op, ": axis ", axis, " is out of range for ",
                    self.dim(), "-D self");
  const int64_t dim = axis < 0 ? axis + self.dim() : axis;
  TORCH_CHECK_VALUE(dim != 0, op, ": axis must not be dimension 0 (the batch dimension indices select)");
  TORCH_CHECK_VALUE(indices.dim() <= 1 || (indices.dim() == 2 && indices.size(1) == 2), op,
                    ": indices must be 0-D, [n] offsets or [n, 2] (batch, offset) rows, got ", indices.sizes());
  TORCH_CHECK_VALUE(updates.dim() == self.dim(), op, ": updates must have self's ", self.dim(),
                    " dimensions, got ", updates.sizes());
  const int64_t batches = indices.dim() == 0 ? 1 : indices.size(0);
  TORCH_CHECK_VALUE(updates.size(0) == batches && batches <= self.size(0), op, ": updates must have ", batches,
                    " batches (one per index, at most self's ", self.size(0), "), got ", updates.sizes());
  for (int64_t d = 1; d < self.dim(); ++d) {
    const bool fits = d == dim ? updates.size(d) <= self.size(d) : updates.size(d) == self.size(d);
    TORCH_CHECK_VALUE(fits, op, ": updates ", updates.sizes(), " must match self ", self.sizes(),
                      " except in dimension 0 and along axis ", dim, " (where it may be shorter)");
  }
  return dim;
}

at::Tensor contiguousCopy(const at::Tensor& self) { return self.clone(at::MemoryFormat::Contiguous); }

}  // namespace

at::Tensor npu_scatter_nd_update(const at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates) {
  checkScatterNd("npu_scatter_nd_update", self, indices, updates);
  at::Tensor out = contiguousCopy(self);
  EXEC_NPU_CMD(aclnnScatterNdUpdate, out, indices, updates);
  return out;
}

at::Tensor npu_scatter_nd_update_meta(const at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates) {
  checkScatterNd("npu_scatter_nd_update", self, indices, updates);
  return at::empty(self.sizes(), self.options());
}

at::Tensor& npu_scatter_nd_update_(at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates) {
  checkScatterNd("npu_scatter_nd_update_", self, indices, updates);
  EXEC_NPU_CMD(aclnnScatterNdUpdate, self, indices, updates);
  return self;
}

at::Tensor& npu_scatter_nd_update__meta(at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates) {
  checkScatterNd("npu_scatter_nd_update_", self, indices, updates);
  return self;
}

at::Tensor scatter_update(const at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates, int64_t axis) {
  const int64_t dim = checkScatterUpdate("scatter_update", self, indices, updates, axis);
  at::Tensor out = contiguousCopy(self);
  EXEC_NPU_CMD(aclnnInplaceScatterUpdate, out, indices, updates, dim);
  return out;
}

at::Tensor scatter_update_meta(const at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates,
                               int64_t axis) {
  checkScatterUpdate("scatter_update", self, indices, updates, axis);
  return at::empty(self.sizes(), self.options());
}

at::Tensor& scatter_update_(at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates, int64_t axis) {
  const int64_t dim = checkScatterUpdate("scatter_update_", self, indices, updates, axis);
  EXEC_NPU_CMD(aclnnInplaceScatterUpdate, self, indices, updates, dim);
  return self;
}

at::Tensor& scatter_update__meta(at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates,
                                 int64_t axis) {
  checkScatterUpdate("scatter_update_", self, indices, updates, axis);
  return self;
}

}  // namespace at_npu::native
