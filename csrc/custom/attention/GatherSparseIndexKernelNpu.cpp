// GatherSparseIndexKernelNpu.cpp - npu_gather_sparse_index (rows of input picked by an index tensor of any shape)
// on aclnnGatherV3, and its gradient npu_gather_sparse_index_backward (accumulating index_put on aclnnIndexPutImpl).
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {

namespace {

constexpr int64_t kMaxOutputRank = 8;

// index.shape + input.shape[1:]; a 0-d input passes through with its own (empty) shape.
std::vector<int64_t> gatheredShape(const at::Tensor& input, const at::Tensor& index) {
  const char* op = "npu_gather_sparse_index";
  TORCH_CHECK_TYPE(index.scalar_type() == at::kInt || index.scalar_type() == at::kLong, op,
                   ": index must be int32 or int64, got ", index.scalar_type());
  if (input.dim() == 0) {
    return {};
  }
  TORCH_CHECK_VALUE(input.dim() + index.dim() - 1 <= kMaxOutputRank, op,
                    ": input.dim() + index.dim() - 1 must be at most ", kMaxOutputRank, ", got input ", input.sizes(),
                    " and index ", index.sizes());
  std::vector<int64_t> shape(index.sizes().begin(), index.sizes().end());
  shape.insert(shape.end(), input.sizes().begin() + 1, input.sizes().end());
  return shape;
}

}  // namespace

at::Tensor npu_gather_sparse_index(const at::Tensor& input, const at::Tensor& index) {
  at::Tensor out = at::empty(gatheredShape(input, index), input.options());
  // Gather along dim 0 with no batch dims; mode 1 is the sparse-index (row gather) variant torch_npu uses.
  const int64_t dim = 0, batch_dims = 0, mode = 1;
  EXEC_NPU_CMD(aclnnGatherV3, input, dim, index, batch_dims, mode, out);
  return out;
}

at::Tensor npu_gather_sparse_index_meta(const at::Tensor& input, const at::Tensor& index) {
  return at::empty(gatheredShape(input, index), input.options());
}

at::Tensor npu_gather_sparse_index_backward(const at::Tensor& grad, at::IntArrayRef self_sizes,
                                            const at::Tensor& index) {
  at::Tensor grad_input = at::zeros(self_sizes, grad.options());
  if (self_sizes.empty()) {  // a 0-d input was passed through unchanged
    grad_input.copy_(grad.reshape({}));
    return grad_input;
  }
  // Rows gathered several times receive the sum of their gradients.
  c10::List<std::optional<at::Tensor>> rows;
  rows.push_back(std::optional<at::Tensor>(index));
  const bool accumulate = true, unsafe = false;
  EXEC_NPU_CMD(aclnnIndexPutImpl, grad_input, rows, grad, accumulate, unsafe);
  return grad_input;
}

at::Tensor npu_gather_sparse_index_backward_meta(const at::Tensor& grad, at::IntArrayRef self_sizes,
                                                 const at::Tensor& index) {
  return at::empty(self_sizes, grad.options());
}

}  // namespace at_npu::native
