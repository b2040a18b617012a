// IndexKernelNpu.cpp - embedding (and its dense backward), index_select, gather, scatter,
// scatter_add and index_put with integer indices, on device ops. Boolean-mask indexing has a
// data-dependent shape and stays on the generic path.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <c10/core/WrapDimMinimal.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

bool indexOnDevice(TensorRefs tensors, const at::Tensor& index,
                   const at::Device& device) {
  if (!deviceOpsSupport(tensors) || !deviceOpsSupport({index})) return false;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.device() != device) return false;
  }
  return index.device() == device &&
         (index.scalar_type() == at::kLong || index.scalar_type() == at::kInt);
}

}  // namespace

at::Tensor embedding(const at::Tensor& weight, const at::Tensor& indices, int64_t padding_idx,
                     bool scale_grad_by_freq, bool sparse) {
  TORCH_CHECK(weight.dim() == 2, "'weight' must be 2-D");
  if (!indexOnDevice({weight}, indices, weight.device())) {
    return runGeneric("aten::embedding", "", weight, indices, padding_idx, scale_grad_by_freq,
                      sparse)[0]
        .toTensor();
  }
  std::vector<int64_t> shape(indices.sizes().begin(), indices.sizes().end());
  shape.push_back(weight.size(1));
  c10::DeviceGuard guard(weight.device());
  at::Tensor out = at::empty(shape, weight.options());
  if (out.numel() > 0) EXEC_NPU_CMD(aclnnEmbedding, weight, indices, out);
  return out;
}

at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices,
                                    int64_t num_weights, int64_t padding_idx,
                                    bool scale_grad_by_freq) {
  if (!indexOnDevice({grad_output}, indices, grad_output.device())) {
    return runGeneric("aten::embedding_dense_backward", "", grad_output, indices, num_weights,
                      padding_idx, scale_grad_by_freq)[0]
        .toTensor();
  }
  c10::DeviceGuard guard(grad_output.device());
  at::Tensor out = at::empty({num_weights, grad_output.size(-1)}, grad_output.options());
  EXEC_NPU_CMD(aclnnEmbeddingDenseBackward, grad_output, indices, num_weights, padding_idx,
               scale_grad_by_freq, out);
  return out;
}

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                             at::Tensor& out) {
  if (!indexOnDevice({self, out}, index, out.device()) || self.dim() == 0 || index.dim() > 1 ||
      out.scalar_type() != self.scalar_type()) {
    runGeneric("aten::index_select", "out", self, dim, index, out);
    return out;
  }
  checkOutOverlap(out, {self, index});
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  shape[static_cast<size_t>(d)] = index.numel();
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, shape);
  EXEC_NPU_CMD(aclnnIndexSelect, self, d, index, out);
  return out;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return index_select_out(self, dim, index, out);
}

at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       bool sparse_grad, at::Tensor& out) {
  if (!indexOnDevice({self, out}, index, out.device()) || index.scalar_type() != at::kLong ||
      out.scalar_type() != self.scalar_type() || index.dim() != self.dim()) {
    runGeneric("aten::gather", "out", self, dim, index, sparse_grad, out);
    return out;
  }
  checkOutOverlap(out, {self, index});
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, index.sizes());
  EXEC_NPU_CMD(aclnnGather, self, d, index, out);
  return out;
}

#define NPU_SCATTER_KERNEL(fn, overload, Name)                                                    \
  at::Tensor& fn##_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,                    \
                 const at::Tensor& src, at::Tensor& out) {                                        \
    if (!indexOnDevice({self, src, out}, index, out.device()) || index.scalar_type() != at::kLong || \
        src.scalar_type() != self.scalar_type() || out.scalar_type() != self.scalar_type()) {     \
      runGeneric(overload[0], overload[1], self, dim, index, src, out);                           \
      return out;                                                                                 \
    }                                                                                             \
    const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));                 \
    c10::DeviceGuard guard(out.device());                                                         \
    at::native::resize_output(out, self.sizes());                                                 \
    EXEC_NPU_CMD(Name, self, d, index, src, out);                                                 \
    return out;                                                                                   \
  }

namespace {
constexpr const char* kScatterSrc[] = {"aten::scatter", "src_out"};
constexpr const char* kScatterAdd[] = {"aten::scatter_add", "out"};
}  // namespace

NPU_SCATTER_KERNEL(scatter_src, kScatterSrc, aclnnScatter)
NPU_SCATTER_KERNEL(scatter_add, kScatterAdd, aclnnScatterAdd)
#undef NPU_SCATTER_KERNEL

at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                              const at::Scalar& value, at::Tensor& out) {
  if (!indexOnDevice({self, out}, index, out.device()) || index.scalar_type() != at::kLong ||
      out.scalar_type() != self.scalar_type() || value.isComplex()) {
    runGeneric("aten::scatter", "value_out", self, dim, index, value, out);
    return out;
  }
  const int64_t d = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, self.sizes());
  EXEC_NPU_CMD(aclnnScatterValue, self, d, index, value, out);
  return out;
}

at::Tensor& _index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                             const at::Tensor& values, bool accumulate, bool unsafe) {
  bool integral = deviceOpsSupport({self, values}) && values.device() == self.device() &&
                  values.scalar_type() == self.scalar_type() &&
                  static_cast<int64_t>(indices.size()) <= self.dim();
  for (const std::optional<at::Tensor>& index : indices.vec()) {
    if (!index.has_value() || !index->defined()) continue;
    integral &= index->device() == self.device() &&
                (index->scalar_type() == at::kLong || index->scalar_type() == at::kInt);
  }
  if (!integral) {
    runGeneric("aten::_index_put_impl_", "", self, indices, values, accumulate, unsafe);
    return self;
  }
  c10::DeviceGuard guard(self.device());
  EXEC_NPU_CMD(aclnnIndexPutImpl, self, indices, values, accumulate, unsafe);
  return self;
}

}  // namespace at_npu::native
