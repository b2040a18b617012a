// TensorUtilityKernelNpu.cpp - torch_npu's small tensor utilities as registered ops: one_, npu_dtype_cast_,
// npu_reshape, npu_stride_copy, npu_view_copy, copy_memory_, npu_scatter, and the storage queries
// get_npu_format / get_storage_size / npu_format_cast_ (so that torch.compile and torch.ops.npu see them).
#include <ATen/ops/as_strided.h>
#include <ATen/ops/empty.h>

#include "csrc/custom/NpuCustomFunctions.h"
#include "csrc/framework/FormatCast.h"
#include "csrc/framework/FormatHelper.h"
#include "csrc/framework/OpCommand.h"

#include <npu/format_layout.h>

namespace at_npu::native {
namespace {

void checkNpu(const char* op, const at::Tensor& t, const char* what) {
  TORCH_CHECK_VALUE(t.device().type() == c10::DeviceType::PrivateUse1, op, ": ", what,
                    " must be an npu tensor, got one on ", t.device());
}

std::vector<int64_t> reshapeSizes(const at::Tensor& self, at::IntArrayRef shape) {
  TORCH_CHECK_VALUE(c10::multiply_integers(shape) == self.numel(), "npu_reshape: shape ", shape, " has ",
                    c10::multiply_integers(shape), " elements but self ", self.sizes(), " has ", self.numel());
  return shape.vec();
}

// npu_scatter's indices and updates: self's shape without `dim` (or with size 1 there).
at::Tensor alongDim(const at::Tensor& t, const at::Tensor& self, int64_t dim, const char* what) {
  std::vector<int64_t> expected = self.sizes().vec();
  expected[dim] = 1;
  at::Tensor kept = t.dim() == self.dim() - 1 ? t.unsqueeze(dim) : t;
  TORCH_CHECK_VALUE(kept.sizes().vec() == expected, "npu_scatter: ", what, " must have self's shape ", self.sizes(),
                    " without dimension ", dim, ", got ", t.sizes());
  return kept;
}

}  // namespace

at::Tensor& one_(at::Tensor& self) {
  if (self.numel() == 0) return self;
  EXEC_NPU_CMD(aclnnInplaceOne, self);
  return self;
}

at::Tensor& one__meta(at::Tensor& self) { return self; }

at::Tensor& npu_dtype_cast_(at::Tensor& self, const at::Tensor& src) {
  TORCH_CHECK_VALUE(src.numel() == self.numel() || src.numel() == 1, "npu_dtype_cast_: src ", src.sizes(),
                    " must have self's ", self.numel(), " elements (or one)");
  if (self.numel() == 0) return self;
  const at::Tensor values = src.numel() == self.numel() ? src.reshape(self.sizes()) : src.reshape({}).expand(self.sizes());
  EXEC_NPU_CMD(aclnnInplaceCopy, self, values);
  return self;
}

at::Tensor& npu_dtype_cast__meta(at::Tensor& self, const at::Tensor& src) { return self; }

at::Tensor npu_reshape(const at::Tensor& self, at::IntArrayRef shape, bool can_refresh) {
  at::Tensor out = at::empty(reshapeSizes(self, shape), self.options());
  if (out.numel() > 0) EXEC_NPU_CMD(aclnnInplaceCopy, out, self.reshape(shape));
  return out;
}

at::Tensor npu_reshape_meta(const at::Tensor& self, at::IntArrayRef shape, bool can_refresh) {
  return at::empty(reshapeSizes(self, shape), self.options());
}

at::Tensor npu_stride_copy(const at::Tensor& self, at::IntArrayRef shape, at::IntArrayRef stride,
                           const at::Scalar& storage_offset) {
  TORCH_CHECK_VALUE(shape.size() == stride.size(), "npu_stride_copy: shape ", shape, " and stride ", stride,
                    " must have as many values");
  const int64_t offset = storage_offset.toLong();
  TORCH_CHECK_VALUE(offset >= 0, "npu_stride_copy: storage_offset must be >= 0, got ", offset);
  at::Tensor out = at::empty(shape, self.options());
  if (out.numel() > 0) EXEC_NPU_CMD(aclnnInplaceCopy, out, self.as_strided(shape, stride, offset));
  return out;
}

at::Tensor npu_stride_copy_meta(const at::Tensor& self, at::IntArrayRef shape, at::IntArrayRef stride,
                                const at::Scalar& storage_offset) {
  TORCH_CHECK_VALUE(shape.size() == stride.size(), "npu_stride_copy: shape ", shape, " and stride ", stride,
                    " must have as many values");
  return at::empty(shape, self.options());
}

at::Tensor& npu_view_copy(at::Tensor& self, const at::Tensor& other, bool non_blocking) {
  if (self.numel() > 0) EXEC_NPU_CMD(aclnnInplaceCopy, self, other);
  return self;
}

at::Tensor& npu_view_copy_meta(at::Tensor& self, const at::Tensor& other, bool non_blocking) { return self; }

at::Tensor& copy_memory_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  checkNpu("copy_memory_", self, "self");
  checkNpu("copy_memory_", src, "src");
  TORCH_CHECK(self.scalar_type() == src.scalar_type() && self.device() == src.device() &&
                        self.numel() == src.numel(),
                    "copy_memory_: tensors must have the same dtype, device and number of elements, got ",
                    self.scalar_type(), "/", self.device(), "/", self.numel(), " and ", src.scalar_type(), "/",
                    src.device(), "/", src.numel());
  if (self.numel() > 0) EXEC_NPU_CMD(aclnnInplaceCopy, self, src.reshape(self.sizes()));
  return self;
}

at::Tensor& copy_memory__meta(at::Tensor& self, const at::Tensor& src, bool non_blocking) { return self; }

at::Tensor npu_scatter(const at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates, int64_t dim) {
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_TYPE(indices.scalar_type() == at::kInt || indices.scalar_type() == at::kLong,
                   "npu_scatter: indices must be int32 or int64, got ", indices.scalar_type());
  at::Tensor index = alongDim(indices, self, d, "indices").to(at::kLong);
  at::Tensor src = alongDim(updates, self, d, "updates");
  at::Tensor out = at::empty(self.sizes(), self.options());
  EXEC_NPU_CMD(aclnnScatter, self, d, index, src.to(self.scalar_type()), out);
  return out;
}

at::Tensor npu_scatter_meta(const at::Tensor& self, const at::Tensor& indices, const at::Tensor& updates,
                            int64_t dim) {
  const int64_t d = c10::maybe_wrap_dim(dim, self.dim());
  alongDim(indices, self, d, "indices");
  alongDim(updates, self, d, "updates");
  return at::empty(self.sizes(), self.options());
}

int64_t get_npu_format(const at::Tensor& self) {
  checkNpu("get_npu_format", self, "self");
  return npuFormatOf(self);
}

// A meta tensor has no storage format of its own: the base format of its rank.
int64_t get_npu_format_meta(const at::Tensor& self) {
  return self.dim() == 4 ? ACL_FORMAT_NCHW : self.dim() == 5 ? ACL_FORMAT_NCDHW : ACL_FORMAT_ND;
}

int64_t get_storage_size(const at::Tensor& self) {
  checkNpu("get_storage_size", self, "self");
  if (const NPUStorageDesc* desc = privateDesc(self)) return desc->storageNumel();
  return static_cast<int64_t>(self.storage().nbytes() / self.element_size());
}

int64_t get_storage_size_meta(const at::Tensor& self) {
  return static_cast<int64_t>(self.storage().nbytes() / self.element_size());
}

at::Tensor& npu_format_cast_(at::Tensor& self, const at::Tensor& src, std::optional<int64_t> customize_dtype,
                             std::optional<int64_t> input_dtype) {
  checkNpu("npu_format_cast_", self, "self");
  TORCH_CHECK_VALUE(!input_dtype.has_value() || *input_dtype == static_cast<int64_t>(self.scalar_type()),
                    "npu_format_cast_: input_dtype reinterprets packed 4-bit data, which the software NPU does not "
                    "have; leave it None");
  return formatCastInPlace(self, npuFormatOf(src), customize_dtype);
}

at::Tensor& npu_format_cast__meta(at::Tensor& self, const at::Tensor& src, std::optional<int64_t> customize_dtype,
                                  std::optional<int64_t> input_dtype) {
  return self;
}

}  // namespace at_npu::native
