// StorageDesc.h - what an npu storage holds: its base (logical) sizes and strides, its storage
// (padded physical) sizes, origin and npu format and dtype, kept as a c10::BackendMeta on the
// storage itself, so that every view, set_ and alias of it shares one description.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/SmallVector.h>

#include <atomic>
#include <cstdint>

namespace at_npu::native {

// The layout of one storage. A storage in a private format (NC1HWC0, FRACTAL_Z, NDC1HWC0,
// FRACTAL_Z_3D, FRACTAL_NZ) holds the tensor of base_sizes in that padded layout; every tensor on
// it indexes a *virtual* contiguous array of base_sizes with its sizes / strides / offset, exactly
// as if the storage were plain (docs/formats.md).
struct NPUStorageDesc : c10::BackendMeta {
  c10::SmallVector<int64_t, 5> base_sizes;
  c10::SmallVector<int64_t, 5> base_strides;
  c10::SmallVector<int64_t, 5> storage_sizes;
  int64_t origin_format = 2;  // ND
  int64_t npu_format = 2;
  int64_t c0 = 16;            // lanes of the innermost block (FRACTAL_NZ: 32 / itemsize, <= 16 for wide types)
  caffe2::TypeMeta data_type;

  bool isPrivate() const;
  int64_t baseNumel() const;
  int64_t storageNumel() const;
  c10::intrusive_ptr<c10::BackendMeta> clone(const c10::intrusive_ptr<c10::BackendMeta>& ptr) const override;
};

// Every npu storage torch_npu creates. A storage without a description is plain (its format is
// the base format of the tensor looking at it: NCHW for 4 dims, NCDHW for 5, ND otherwise).
struct NPUStorageImpl final : c10::StorageImpl {
  using c10::StorageImpl::StorageImpl;
  ~NPUStorageImpl() override;

  const NPUStorageDesc* desc() const { return desc_.get(); }
  // Replaces the description (nullptr: plain). Keeps the count of private storages.
  void setDesc(c10::intrusive_ptr<NPUStorageDesc> desc);

 private:
  c10::intrusive_ptr<NPUStorageDesc> desc_;
};

namespace detail {
extern std::atomic<int64_t> private_storages;
const NPUStorageDesc* privateDescSlow(const c10::StorageImpl* storage);
}  // namespace detail

// True while any storage in a private format exists: until then every format check is this one
// relaxed load (the cost base-format tensors pay on the hot paths).
inline bool anyPrivateFormat() {
  return detail::private_storages.load(std::memory_order_relaxed) != 0;
}

// The description of a storage in a private format, or nullptr (plain storage, or not an npu one).
inline const NPUStorageDesc* privateDesc(const c10::StorageImpl* storage) {
  return anyPrivateFormat() ? detail::privateDescSlow(storage) : nullptr;
}
inline const NPUStorageDesc* privateDesc(const at::Tensor& t) {
  if (!anyPrivateFormat() || !t.defined() || !t.has_storage()) return nullptr;
  return detail::privateDescSlow(t.storage().unsafeGetStorageImpl());
}

// The storage's NPUStorageImpl, or nullptr for storages made elsewhere.
NPUStorageImpl* npuStorageImpl(const c10::Storage& storage);
// Any description of the storage (private or an explicit base-format label), or nullptr.
const NPUStorageDesc* storageDesc(const c10::Storage& storage);

// A new npu storage (the PrivateUse1 StorageImpl factory and the allocation path of empty()).
c10::intrusive_ptr<c10::StorageImpl> makeNpuStorage(c10::StorageImpl::use_byte_size_t, c10::SymInt size_bytes,
                                                    c10::DataPtr data_ptr, c10::Allocator* allocator,
                                                    bool resizable);

}  // namespace at_npu::native
