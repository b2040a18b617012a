// ScatterUpdateOps.cpp - in-place scatter device ops: ScatterNdUpdate (rows addressed by index tuples over the
// leading dimensions) and InplaceScatterUpdate (each batch's slice written from an offset along one axis, the
// KV-cache append). Indices are read when the kernel runs; out-of-range ones fail it with a clear error rather
// than write outside the tensor.
#include <ATen/TensorOperators.h>
#include <ATen/ops/index_put.h>

#include <vector>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

void checkIndexDtype(const char* op, const at::Tensor& indices) {
  TORCH_CHECK(indices.scalar_type() == at::kInt || indices.scalar_type() == at::kLong, op,
              ": indices must be int32 or int64, got ", indices.scalar_type());
}

// The index tuples as [n, depth] int64, each coordinate checked against its dimension.
at::Tensor indexRows(const char* op, const at::Tensor& indices, const at::Tensor& var) {
  const int64_t depth = indices.size(-1);
  const at::Tensor rows = indices.to(at::kLong).reshape({-1, depth});
  if (rows.numel() == 0) return rows;
  for (int64_t d = 0; d < depth; ++d) {
    const at::Tensor column = rows.select(1, d);
    const int64_t low = column.min().item<int64_t>(), high = column.max().item<int64_t>();
    TORCH_CHECK(low >= 0 && high < var.size(d), op, ": indices for dimension ", d, " must be in [0, ", var.size(d),
                "), got values in [", low, ", ", high, "]");
  }
  return rows;
}

void scatterNdUpdate(const char* op, at::Tensor var, const at::Tensor& indices, const at::Tensor& updates) {
  const at::Tensor rows = indexRows(op, indices, var);
  const int64_t depth = rows.size(1);
  c10::List<std::optional<at::Tensor>> coordinates;
  for (int64_t d = 0; d < depth; ++d) coordinates.push_back(rows.select(1, d));
  std::vector<int64_t> value_shape{rows.size(0)};
  value_shape.insert(value_shape.end(), var.sizes().begin() + depth, var.sizes().end());
  var.index_put_(coordinates, updates.reshape(value_shape));
}

// Row i of updates goes to batch i (or indices[i][0]) of data, from indices[i] (or indices[i][1]) on along `dim`.
void scatterUpdate(const char* op, at::Tensor data, const at::Tensor& indices, const at::Tensor& updates,
                   int64_t dim) {
  const bool pairs = indices.dim() == 2;
  const int64_t batches = updates.size(0), length = updates.size(dim);
  const at::Tensor idx = indices.to(at::kLong).reshape({batches, pairs ? 2 : 1}).contiguous();
  const auto rows = idx.accessor<int64_t, 2>();
  for (int64_t i = 0; i < batches; ++i) {
    const int64_t batch = pairs ? rows[i][0] : i, offset = pairs ? rows[i][1] : rows[i][0];
    TORCH_CHECK(batch >= 0 && batch < data.size(0), op, ": batch index ", batch, " (row ", i,
                ") is outside data's ", data.size(0), " batches");
    TORCH_CHECK(offset >= 0 && offset + length <= data.size(dim), op, ": offset ", offset, " (row ", i,
                ") with ", length, " updates does not fit data's ", data.size(dim), " positions along axis ", dim);
    data.select(0, batch).narrow(dim - 1, offset, length).copy_(updates.select(0, i));
  }
}

}  // namespace

extern "C" NOP_API aclnnStatus aclnnScatterNdUpdateGetWorkspaceSize(aclTensor* varRef, const aclTensor* indices,
                                                                    const aclTensor* updates, uint64_t* workspaceSize,
                                                                    aclOpExecutor** executor) {
  return prepareOp("aclnnScatterNdUpdate", workspaceSize, executor, [&] {
    const char* op = "aclnnScatterNdUpdate";
    at::Tensor var = requiredTensor(varRef, "varRef"), idx = requiredTensor(indices, "indices");
    at::Tensor upd = requiredTensor(updates, "updates");
    checkIndexDtype(op, idx);
    TORCH_CHECK(upd.scalar_type() == var.scalar_type(), op, ": updates must have varRef's dtype ",
                var.scalar_type(), ", got ", upd.scalar_type());
    TORCH_CHECK(idx.dim() >= 1 && idx.size(-1) >= 1 && idx.size(-1) <= var.dim(), op,
                ": indices must be [..., a] with 1 <= a <= ", var.dim(), ", got ", idx.sizes());
    std::vector<int64_t> expected(idx.sizes().begin(), idx.sizes().end() - 1);
    expected.insert(expected.end(), var.sizes().begin() + idx.size(-1), var.sizes().end());
    TORCH_CHECK(upd.sizes().vec() == expected, op, ": updates must be ", at::IntArrayRef(expected), ", got ",
                upd.sizes());
    return Prepared{{var, idx, upd}, [=]() mutable { scatterNdUpdate(op, var, idx, upd); }, {var}};
  });
}
NPU_ATEN_OP(ScatterNdUpdate, "varRef, indices, updates");

extern "C" NOP_API aclnnStatus aclnnInplaceScatterUpdateGetWorkspaceSize(aclTensor* data, const aclTensor* indices,
                                                                         const aclTensor* updates, int64_t axis,
                                                                         uint64_t* workspaceSize,
                                                                         aclOpExecutor** executor) {
  return prepareOp("aclnnInplaceScatterUpdate", workspaceSize, executor, [&] {
    const char* op = "aclnnInplaceScatterUpdate";
    at::Tensor d = requiredTensor(data, "data"), idx = requiredTensor(indices, "indices");
    at::Tensor upd = requiredTensor(updates, "updates");
    checkIndexDtype(op, idx);
    TORCH_CHECK(upd.scalar_type() == d.scalar_type(), op, ": updates must have data's dtype ", d.scalar_type(),
                ", got ", upd.scalar_type());
    TORCH_CHECK(d.dim() >= 2 && upd.dim() == d.dim(), op, ": data must have at least 2 dimensions and updates as ",
                "many, got ", d.sizes(), " and ", upd.sizes());
    TORCH_CHECK(axis >= -d.dim() && axis < d.dim(), op, ": axis ", axis, " is out of range for ", d.dim(), "-D data");
    const int64_t dim = axis < 0 ? axis + d.dim() : axis;
    TORCH_CHECK(dim != 0, op, ": axis must not be the batch dimension 0");
    TORCH_CHECK(idx.dim() <= 1 || (idx.dim() == 2 && idx.size(1) == 2), op,
                ": indices must be 0-D, [n] or [n, 2], got ", idx.sizes());
    const int64_t batches = idx.dim() == 0 ? 1 : idx.size(0);
    TORCH_CHECK(upd.size(0) == batches, op, ": updates must have one batch per index (", batches, "), got ",
                upd.sizes());
    for (int64_t k = 1; k < d.dim(); ++k) {
      TORCH_CHECK(k == dim ? upd.size(k) <= d.size(k) : upd.size(k) == d.size(k), op, ": updates ", upd.sizes(),
                  " must match data ", d.sizes(), " outside dimension 0 and axis ", dim);
    }
    return Prepared{{d, idx, upd}, [=]() mutable { scatterUpdate(op, d, idx, upd, dim); }, {d}};
  });
}
NPU_ATEN_OP(InplaceScatterUpdate, "data, indices, updates, axis");
