// StorageDesc.cpp - the storage description, the npu StorageImpl that carries it, and the count of
// private-format storages that keeps format handling off the hot paths of plain tensors.
#include "csrc/framework/StorageDesc.h"

#include <npu/format_layout.h>

#include <typeinfo>

namespace at_npu::native {

namespace detail {
std::atomic<int64_t> private_storages{0};

const NPUStorageDesc* privateDescSlow(const c10::StorageImpl* storage) {
  // NPUStorageImpl is final: a type-id compare, cheaper than dynamic_cast.
  if (storage == nullptr || typeid(*storage) != typeid(NPUStorageImpl)) return nullptr;
  const NPUStorageDesc* desc = static_cast<const NPUStorageImpl*>(storage)->desc();
  return desc != nullptr && desc->isPrivate() ? desc : nullptr;
}
}  // namespace detail

bool NPUStorageDesc::isPrivate() const { return npu::formats::IsPrivateFormat(npu_format); }

int64_t NPUStorageDesc::baseNumel() const {
  int64_t n = 1;
  for (int64_t s : base_sizes) n *= s;
  return n;
}

int64_t NPUStorageDesc::storageNumel() const {
  int64_t n = 1;
  for (int64_t s : storage_sizes) n *= s;
  return n;
}

c10::intrusive_ptr<c10::BackendMeta> NPUStorageDesc::clone(
    const c10::intrusive_ptr<c10::BackendMeta>& /*ptr*/) const {
  return c10::make_intrusive<NPUStorageDesc>(*this);
}

NPUStorageImpl::~NPUStorageImpl() {
  if (desc_ && desc_->isPrivate()) detail::private_storages.fetch_sub(1, std::memory_order_relaxed);
}

void NPUStorageImpl::setDesc(c10::intrusive_ptr<NPUStorageDesc> desc) {
  const bool was_private = desc_ && desc_->isPrivate();
  const bool is_private = desc && desc->isPrivate();
  if (is_private && !was_private) detail::private_storages.fetch_add(1, std::memory_order_relaxed);
  desc_ = std::move(desc);
  if (was_private && !is_private) detail::private_storages.fetch_sub(1, std::memory_order_relaxed);
}

NPUStorageImpl* npuStorageImpl(const c10::Storage& storage) {
  return dynamic_cast<NPUStorageImpl*>(storage.unsafeGetStorageImpl());
}

const NPUStorageDesc* storageDesc(const c10::Storage& storage) {
  const NPUStorageImpl* impl = npuStorageImpl(storage);
  return impl != nullptr ? impl->desc() : nullptr;
}

c10::intrusive_ptr<c10::StorageImpl> makeNpuStorage(c10::StorageImpl::use_byte_size_t, c10::SymInt size_bytes,
                                                    c10::DataPtr data_ptr, c10::Allocator* allocator,
                                                    bool resizable) {
  if (data_ptr == nullptr && allocator != nullptr) {
    data_ptr = allocator->allocate(static_cast<size_t>(size_bytes.as_int_unchecked()));
  }
  return c10::make_intrusive<NPUStorageImpl>(c10::StorageImpl::use_byte_size_t(), std::move(size_bytes),
                                             std::move(data_ptr), allocator, resizable);
}

namespace {
// Storages created by PyTorch for npu (torch.UntypedStorage(n, device="npu"), storage copies,
// shared-memory rebuilds) are NPUStorageImpl too, so that any of them can take a format.
struct RegisterStorageFactory {
  RegisterStorageFactory() { c10::SetStorageImplCreate(c10::DeviceType::PrivateUse1, &makeNpuStorage); }
} register_storage_factory;
}  // namespace

}  // namespace at_npu::native
