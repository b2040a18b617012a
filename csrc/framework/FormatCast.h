// FormatCast.h - TransData on npu tensors: tensors allocated in a private format, format casts
// (npu_format_cast / npu_format_cast_), and base-layout stand-ins for private storages on the
// paths that need plain memory. Every conversion is a launch of the named device op
// aclnnTransData, so it is counted in torch.npu.op_stats() like any device op.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <initializer_list>
#include <optional>

#include "FormatHelper.h"
#include "StorageDesc.h"

struct aclTensor;

namespace at_npu::native {

// An npu tensor of `sizes` whose storage is in `format` (contents unspecified).
at::Tensor emptyWithFormat(at::IntArrayRef sizes, const at::TensorOptions& options, int64_t format, int64_t c0);

// TransData on the current stream between the logical tensor `plain` (any strided npu view) and
// the whole tensor a private storage holds, in either direction, or between two private storages.
void transDataToPrivate(const at::Tensor& plain, const c10::Storage& storage, const NPUStorageDesc& desc);
void transDataFromPrivate(const c10::Storage& storage, const NPUStorageDesc& desc, const at::Tensor& plain);
void transDataBetweenPrivate(const c10::Storage& src, const NPUStorageDesc& src_desc, const c10::Storage& dst,
                             const NPUStorageDesc& dst_desc);

// Descriptors of a private storage: the whole tensor in its format, or all its elements as one
// flat plain vector (what elementwise ops run over when every operand shares the layout).
aclTensor* describePrivateStorage(const c10::Storage& storage, const NPUStorageDesc& desc);
// `t` (its storage's whole tensor, or a permutation of its dims) as a private-format descriptor.
aclTensor* describePrivateView(const at::Tensor& t, const NPUStorageDesc& desc);
aclTensor* describeFlatStorage(const c10::Storage& storage, const NPUStorageDesc& desc, at::ScalarType dtype);

// `t`'s view (dtype, sizes, strides, offset) over another npu storage.
at::Tensor viewOn(const at::Tensor& t, const c10::Storage& storage);
// Every element of a private storage, padding included, as a flat plain-looking vector (for
// kernels that treat all lanes alike: fills).
at::Tensor flatStorageView(const c10::Storage& storage, const NPUStorageDesc& desc);

// A plain storage of the same size holding a private storage's logical contents: its base tensor
// contiguous at the start, zeros after. Any view of the private storage reads the same values at
// the same sizes / strides / offset over it.
c10::Storage materialize(const c10::Storage& storage, const NPUStorageDesc& desc);

// Base-layout stand-ins for the private-format tensors of one operation: one plain copy per
// storage (so that in-place and out= arguments naming one storage share it); commit() converts the
// written ones back into their storages. Plain tensors pass through unchanged.
class BaseLayouts {
 public:
  at::Tensor get(const at::Tensor& t, bool written);
  // Marks the stand-in of `t`'s storage as written (when that is only known after the op ran).
  void markWritten(const at::Tensor& t);
  void markAllWritten();
  // Drops the stand-in of `t`'s storage without converting it back.
  void forget(const at::Tensor& t);
  void commit();
  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    const c10::StorageImpl* key;
    c10::Storage original;
    c10::intrusive_ptr<NPUStorageDesc> desc;
    c10::Storage plain;
    bool written;
  };
  c10::SmallVector<Entry, 4> entries_;
};

// Under allow_internal_format, a fresh output (nothing else references it) of an elementwise op
// takes the private layout of a same-shaped whole input, so that chains of elementwise ops stay in
// it without TransData. Does nothing otherwise.
void adoptInputFormatSlow(const at::Tensor& out, std::initializer_list<at::Tensor> inputs);
template <typename... Inputs>
inline void adoptInputFormat(const at::Tensor& out, const Inputs&... inputs) {
  if (C10_UNLIKELY(allowInternalFormat() && anyPrivateFormat())) adoptInputFormatSlow(out, {inputs...});
}
// The same for a given private format (matmul outputs in FRACTAL_NZ).
void adoptFormat(const at::Tensor& out, int64_t format);

// An output allocated in `format` when allow_internal_format is set and the format can hold it
// (dtype, rank), else a plain one: how convolution, batch norm and matmul adapters allocate.
at::Tensor emptyPreferringFormat(at::IntArrayRef sizes, const at::TensorOptions& options, int64_t format);

// torch_npu.npu_format_cast: a new tensor with self's values in `acl_format`.
at::Tensor formatCast(const at::Tensor& self, int64_t acl_format, std::optional<int64_t> customize_dtype);
// torch_npu.npu_format_cast_: self's storage converted in place (every alias sees the new layout).
at::Tensor& formatCastInPlace(at::Tensor& self, int64_t acl_format, std::optional<int64_t> customize_dtype);

// Puts a plain storage whose start holds the base tensor `desc` describes into desc's layout, in
// place (the allocation grows to the padded size).
void formatStorage(const c10::Storage& storage, c10::intrusive_ptr<NPUStorageDesc> desc);
// Converts a private storage back to a plain layout in place, keeping its size: every view of it
// keeps its values.
void unformatStorage(const c10::Storage& storage);

}  // namespace at_npu::native
