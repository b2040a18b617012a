// BatchGatherMatmulKernelNpu.cpp - npu_batch_gather_matmul(_): LoRA BGMV (batched gather matrix-vector product):
// each token's row of y gains scale * B_i (A_i x) for its adapter i = indices[t], on the aclnnAddLora device op.
// The functional form returns a new tensor; the in-place form updates y. Inference only (no backward).
#include <ATen/ops/empty_like.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool isLoraFloat(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat; }

// Checks shapes and dtypes; returns the resolved y_slice_size (-1 means all of y's columns).
int64_t checkBatchGatherMatmul(const at::Tensor& y, const at::Tensor& x, const at::Tensor& weight_b,
                               const at::Tensor& indices, const std::optional<at::Tensor>& weight_a,
                               int64_t layer_idx, int64_t y_offset, int64_t y_slice_size) {
  const char* op = "npu_batch_gather_matmul";
  TORCH_CHECK_VALUE(y.dim() == 2 && x.dim() == 2, op, ": y (self) and x must be 2-D [tokens, columns], got ",
                    y.sizes(), " and ", x.sizes());
  TORCH_CHECK_VALUE(weight_b.dim() == 4, op, ": weight_b must be 4-D [adapters, layers, H2, R], got ",
                    weight_b.sizes());
  TORCH_CHECK_VALUE(indices.dim() == 1 && indices.size(0) == y.size(0) && x.size(0) == y.size(0), op,
                    ": indices must be 1-D with one entry per row of y and x (", y.size(0), "), got ",
                    indices.sizes(), " and x ", x.sizes());
  TORCH_CHECK_TYPE(indices.scalar_type() == at::kInt || indices.scalar_type() == at::kLong, op,
                   ": indices must be int32 or int64, got ", indices.scalar_type());
  TORCH_CHECK_TYPE(isLoraFloat(y.scalar_type()) && x.scalar_type() == y.scalar_type() &&
                       weight_b.scalar_type() == y.scalar_type(),
                   op, ": y, x and the weights must share one dtype of float16, bfloat16 or float32, got ",
                   y.scalar_type(), ", ", x.scalar_type(), " and ", weight_b.scalar_type());
  const bool has_a = weight_a.has_value() && weight_a->defined();
  if (has_a) {
    TORCH_CHECK_VALUE(weight_a->dim() == 4 && weight_a->size(0) == weight_b.size(0) &&
                          weight_a->size(1) == weight_b.size(1) && weight_a->size(2) == weight_b.size(3) &&
                          weight_a->size(3) == x.size(1),
                      op, ": weight_a must be [adapters, layers, R, H1] = [", weight_b.size(0), ", ",
                      weight_b.size(1), ", ", weight_b.size(3), ", ", x.size(1), "], got ", weight_a->sizes());
    TORCH_CHECK_TYPE(weight_a->scalar_type() == y.scalar_type(), op, ": weight_a must have y's dtype ",
                     y.scalar_type(), ", got ", weight_a->scalar_type());
  } else {
    TORCH_CHECK_VALUE(weight_b.size(3) == x.size(1), op, ": without weight_a, weight_b's last dimension must be x's "
                      "H1 = ", x.size(1), ", got ", weight_b.sizes());
  }
  TORCH_CHECK_VALUE(layer_idx >= 0 && layer_idx < weight_b.size(1), op, ": layer_idx must be in [0, ",
                    weight_b.size(1), "), got ", layer_idx);
  const int64_t size = y_slice_size == -1 ? y.size(1) : y_slice_size;
  TORCH_CHECK_VALUE(y_offset >= 0 && size >= 0 && y_offset + size <= y.size(1), op, ": y_offset ", y_offset,
                    " and y_slice_size ", y_slice_size, " must select columns inside y's ", y.size(1));
  TORCH_CHECK_VALUE(weight_b.size(2) == size, op, ": weight_b's H2 (", weight_b.size(2),
                    ") must equal the updated slice of y (y_slice_size = ", size, ")");
  return size;
}

}  // namespace

// Unlike torch_npu (whose functional form returns `self`), the result is a new tensor and y is left as it was:
// the schema promises a fresh, non-mutating op.
at::Tensor npu_batch_gather_matmul(const at::Tensor& self, const at::Tensor& x, const at::Tensor& weight_b,
                                   const at::Tensor& indices, const std::optional<at::Tensor>& weight_a,
                                   int64_t layer_idx, double scale, int64_t y_offset, int64_t y_slice_size) {
  const int64_t size = checkBatchGatherMatmul(self, x, weight_b, indices, weight_a, layer_idx, y_offset, y_slice_size);
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  EXEC_NPU_CMD(aclnnAddLora, self, x, weight_b, indices, weight_a, layer_idx, scale, y_offset, size, out);
  return out;
}

at::Tensor npu_batch_gather_matmul_meta(const at::Tensor& self, const at::Tensor& x, const at::Tensor& weight_b,
                                        const at::Tensor& indices, const std::optional<at::Tensor>& weight_a,
                                        int64_t layer_idx, double scale, int64_t y_offset, int64_t y_slice_size) {
  checkBatchGatherMatmul(self, x, weight_b, indices, weight_a, layer_idx, y_offset, y_slice_size);
  return at::empty_like(self, at::MemoryFormat::Contiguous);
}

at::Tensor& npu_batch_gather_matmul_(at::Tensor& self, const at::Tensor& x, const at::Tensor& weight_b,
                                     const at::Tensor& indices, const std::optional<at::Tensor>& weight_a,
                                     int64_t layer_idx, double scale, int64_t y_offset, int64_t y_slice_size) {
  const int64_t size = checkBatchGatherMatmul(self, x, weight_b, indices, weight_a, layer_idx, y_offset, y_slice_size);
  EXEC_NPU_CMD(aclnnAddLora, self, x, weight_b, indices, weight_a, layer_idx, scale, y_offset, size, self);
  return self;
}

at::Tensor& npu_batch_gather_matmul__meta(at::Tensor& self, const at::Tensor& x, const at::Tensor& weight_b,
                                          const at::Tensor& indices, const std::optional<at::Tensor>& weight_a,
                                          int64_t layer_idx, double scale, int64_t y_offset, int64_t y_slice_size) {
  checkBatchGatherMatmul(self, x, weight_b, indices, weight_a, layer_idx, y_offset, y_slice_size);
  return self;
}

}  // namespace at_npu::native
