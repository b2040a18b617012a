// ScatterListKernelNpu.cpp - npu_scatter_list(_): per-sequence KV cache writes into a list of tensors; entry i
// takes updates[i] along `axis` from a start position (indices[i], or indices[i][0] with length indices[i][1]),
// gated by mask[i]; on the aclnnScatterList device op. The functional form writes into copies. Inference only.
#include <ATen/ops/empty_like.h>

#include <string>
#include <vector>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

void checkScatterList(at::TensorList self, const at::Tensor& indices, const at::Tensor& updates,
                      const std::optional<at::Tensor>& mask, const std::string& reduce, int64_t axis) {
  const char* op = "npu_scatter_list";
  TORCH_CHECK_VALUE(reduce == "update", op, ": reduce only supports 'update' (overwrite), got '", reduce, "'");
  TORCH_CHECK_VALUE(!self.empty(), op, ": self must be a non-empty list of tensors");
  const at::Tensor& first = self[0];
  for (size_t i = 0; i < self.size(); ++i) {
    TORCH_CHECK_VALUE(self[i].sizes() == first.sizes(), op, ": every tensor of self must have one shape, got ",
                      self[i].sizes(), " and ", first.sizes());
    TORCH_CHECK_TYPE(self[i].scalar_type() == updates.scalar_type(), op, ": self[", i, "] must have updates' dtype ",
                     updates.scalar_type(), ", got ", self[i].scalar_type());
  }
  const int64_t batch = static_cast<int64_t>(self.size());
  TORCH_CHECK_VALUE(updates.dim() == first.dim() + 1 && updates.size(0) == batch, op,
                    ": updates must be [len(self), *self[0].shape] with the scatter axis shorter, got ",
                    updates.sizes(), " for ", batch, " tensors of ", first.sizes());
  const int64_t ax = axis < 0 ? axis + updates.dim() : axis;
  TORCH_CHECK_VALUE(ax > 0 && ax < updates.dim(), op, ": axis ", axis, " must name a dimension of updates other "
                    "than the first (updates has ", updates.dim(), ")");
  for (int64_t d = 1; d < updates.dim(); ++d) {
    const bool fits = d == ax ? updates.size(d) <= first.size(d - 1) : updates.size(d) == first.size(d - 1);
    TORCH_CHECK_VALUE(fits, op, ": updates ", updates.sizes(), " does not fit self's tensors ", first.sizes(),
                      " (dimension ", d, "; the scatter axis may be shorter, the others must match)");
  }
  TORCH_CHECK_TYPE(indices.scalar_type() == at::kInt || indices.scalar_type() == at::kLong, op,
                   ": indices must be int32 or int64, got ", indices.scalar_type());
  TORCH_CHECK_VALUE((indices.dim() == 1 && indices.size(0) == batch) ||
                        (indices.dim() == 2 && indices.size(0) == batch && indices.size(1) == 2),
                    op, ": indices must be (", batch, ",) start positions or (", batch, ", 2) start / length pairs, "
                    "got ", indices.sizes());
  if (mask.has_value() && mask->defined()) {
    TORCH_CHECK_TYPE(mask->scalar_type() == at::kByte || mask->scalar_type() == at::kBool, op,
                     ": mask must be uint8 (or bool), got ", mask->scalar_type());
    TORCH_CHECK_VALUE(mask->dim() == 1 && mask->size(0) == batch, op, ": mask must be (", batch, ",), got ",
                      mask->sizes());
  }
}

}  // namespace

std::vector<at::Tensor> npu_scatter_list(at::TensorList self, const at::Tensor& indices, const at::Tensor& updates,
                                         const std::optional<at::Tensor>& mask, c10::string_view reduce,
                                         int64_t axis) {
  const std::string mode(reduce);
  checkScatterList(self, indices, updates, mask, mode, axis);
  std::vector<at::Tensor> result;
  result.reserve(self.size());
  for (const at::Tensor& t : self) result.push_back(t.clone(at::MemoryFormat::Contiguous));
  EXEC_NPU_CMD(aclnnScatterList, at::TensorList(result), indices, updates, mask, mode, axis);
  return result;
}

std::vector<at::Tensor> npu_scatter_list_meta(at::TensorList self, const at::Tensor& indices,
                                              const at::Tensor& updates, const std::optional<at::Tensor>& mask,
                                              c10::string_view reduce, int64_t axis) {
  checkScatterList(self, indices, updates, mask, std::string(reduce), axis);
  std::vector<at::Tensor> result;
  result.reserve(self.size());
  for (const at::Tensor& t : self) result.push_back(at::empty_like(t, at::MemoryFormat::Contiguous));
  return result;
}

void npu_scatter_list_(at::TensorList self, const at::Tensor& indices, const at::Tensor& updates,
                       const std::optional<at::Tensor>& mask, c10::string_view reduce, int64_t axis) {
  const std::string mode(reduce);
  checkScatterList(self, indices, updates, mask, mode, axis);
  EXEC_NPU_CMD(aclnnScatterList, self, indices, updates, mask, mode, axis);
}

void npu_scatter_list__meta(at::TensorList self, const at::Tensor& indices, const at::Tensor& updates,
                            const std::optional<at::Tensor>& mask, c10::string_view reduce, int64_t axis) {
  checkScatterList(self, indices, updates, mask, std::string(reduce), axis);
}

}  // namespace at_npu::native
