// FormatCast.cpp - TransData launches, private-format allocations, materialized stand-ins, casts.
#include "csrc/framework/FormatCast.h"

#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <npu/format_layout.h>

#include "csrc/core/NPUCachingAllocator.h"
#include "csrc/core/NPUException.h"
#include "csrc/core/NPUStream.h"
#include "csrc/framework/FormatHelper.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
namespace {

namespace nf = npu::formats;

c10::Storage allocateStorage(size_t nbytes, c10::Device device) {
  c10::DeviceGuard guard(device);
  c10::Allocator* allocator = c10_npu::NPUCachingAllocator::get();
  return c10::Storage(makeNpuStorage(c10::StorageImpl::use_byte_size_t(), static_cast<int64_t>(nbytes),
                                     allocator->allocate(nbytes), allocator, /*resizable=*/true));
}

size_t privateBytes(const NPUStorageDesc& desc) {
  return static_cast<size_t>(desc.storageNumel()) * desc.data_type.itemsize();
}

aclTensor* checked(aclTensor* descriptor) {
  TORCH_CHECK(descriptor != nullptr, "TransData: ", aclnnGetRecentErrMsg());
  return descriptor;
}

aclTensor* privateDescriptor(const c10::Storage& storage, const NPUStorageDesc& desc) {
  return describePrivateStorage(storage, desc);
}

void launchTransData(aclTensor* src, aclTensor* dst, c10::Device device) {
  c10::DeviceGuard guard(device);
  static const aclnnOpEntry& op = findDeviceOp("aclnnTransData");
  runDeviceOp(op, "aclnnTransData", nullptr, src, dst);
}

// The base tensor of a private storage as a plain tensor over `plain` (contiguous at its start).
at::Tensor baseView(const c10::Storage& plain, const NPUStorageDesc& desc) {
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(plain),
                                                          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                          desc.data_type);
  t.unsafeGetTensorImpl()->set_sizes_contiguous(c10::IntArrayRef(desc.base_sizes.data(), desc.base_sizes.size()));
  return t;
}

void zeroTail(const c10::Storage& plain, size_t from) {
  if (from >= plain.nbytes()) return;
  NPU_CHECK(nrtMemsetAsync(static_cast<char*>(plain.mutable_data()) + from, 0, plain.nbytes() - from,
                           c10_npu::getCurrentNPUStream(plain.device().index()).handle()));
}

}  // namespace

aclTensor* describePrivateStorage(const c10::Storage& storage, const NPUStorageDesc& desc) {
  return checked(aclCreateTensor(desc.base_sizes.data(), desc.base_sizes.size(),
                                 toAclDataType(c10::typeMetaToScalarType(desc.data_type)), nullptr, 0,
                                 static_cast<aclFormat>(desc.npu_format), desc.storage_sizes.data(),
                                 desc.storage_sizes.size(), storage.mutable_data()));
}

aclTensor* describePrivateView(const at::Tensor& t, const NPUStorageDesc& desc) {
  return checked(aclCreateTensor(t.sizes().data(), t.dim(), toAclDataType(t.scalar_type()), t.strides().data(), 0,
                                 static_cast<aclFormat>(desc.npu_format), desc.storage_sizes.data(),
                                 desc.storage_sizes.size(), t.storage().mutable_data()));
}

aclTensor* describeFlatStorage(const c10::Storage& storage, const NPUStorageDesc& desc, at::ScalarType dtype) {
  const int64_t n = desc.storageNumel();
  const int64_t stride = 1;
  return checked(aclCreateTensor(&n, 1, toAclDataType(dtype), &stride, 0, ACL_FORMAT_ND, &n, 1,
                                 storage.mutable_data()));
}

at::Tensor emptyWithFormat(at::IntArrayRef sizes, const at::TensorOptions& options, int64_t format, int64_t c0) {
  auto desc = makeDesc(sizes, options.dtype(), format, c0);
  c10::Storage storage = allocateStorage(privateBytes(*desc), options.device());
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage),
                                                          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                          options.dtype());
  t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  npuStorageImpl(t.storage())->setDesc(std::move(desc));
  return t;
}

void transDataToPrivate(const at::Tensor& plain, const c10::Storage& storage, const NPUStorageDesc& desc) {
  launchTransData(describeTensor(plain), privateDescriptor(storage, desc), plain.device());
}

void transDataFromPrivate(const c10::Storage& storage, const NPUStorageDesc& desc, const at::Tensor& plain) {
  launchTransData(privateDescriptor(storage, desc), describeTensor(plain), plain.device());
}

void transDataBetweenPrivate(const c10::Storage& src, const NPUStorageDesc& src_desc, const c10::Storage& dst,
                             const NPUStorageDesc& dst_desc) {
  launchTransData(privateDescriptor(src, src_desc), privateDescriptor(dst, dst_desc), src.device());
}

at::Tensor viewOn(const at::Tensor& t, const c10::Storage& storage) {
  at::Tensor v = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage),
                                                          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                          t.dtype());
  v.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return v;
}

at::Tensor flatStorageView(const c10::Storage& storage, const NPUStorageDesc& desc) {
  at::Tensor v = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage),
                                                          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                          desc.data_type);
  v.unsafeGetTensorImpl()->set_sizes_contiguous({desc.storageNumel()});
  return v;
}

c10::Storage materialize(const c10::Storage& storage, const NPUStorageDesc& desc) {
  c10::Storage plain = allocateStorage(storage.nbytes(), storage.device());
  c10::DeviceGuard guard(storage.device());
  transDataFromPrivate(storage, desc, baseView(plain, desc));
  zeroTail(plain, static_cast<size_t>(desc.baseNumel()) * desc.data_type.itemsize());
  return plain;
}

at::Tensor BaseLayouts::get(const at::Tensor& t, bool written) {
  const NPUStorageDesc* desc = privateDesc(t);
  if (desc == nullptr) return t;
  const c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
  for (Entry& e : entries_) {
    if (e.key == key) {
      e.written |= written;
      return viewOn(t, e.plain);
    }
  }
  auto owned = c10::make_intrusive<NPUStorageDesc>(*desc);
  c10::Storage plain = materialize(t.storage(), *owned);
  entries_.push_back({key, t.storage(), std::move(owned), plain, written});
  return viewOn(t, plain);
}

void BaseLayouts::markWritten(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return;
  for (Entry& e : entries_) {
    if (e.key == t.storage().unsafeGetStorageImpl() || e.plain.is_alias_of(t.storage())) e.written = true;
  }
}

void BaseLayouts::forget(const at::Tensor& t) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].key == t.storage().unsafeGetStorageImpl()) {
      entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
  }
}

void BaseLayouts::markAllWritten() {
  for (Entry& e : entries_) e.written = true;
}

void BaseLayouts::commit() {
  for (Entry& e : entries_) {
    if (!e.written) continue;
    c10::DeviceGuard guard(e.original.device());
    transDataToPrivate(baseView(e.plain, *e.desc), e.original, *e.desc);
    e.written = false;
  }
}

void formatStorage(const c10::Storage& storage, c10::intrusive_ptr<NPUStorageDesc> desc) {
  NPUStorageImpl* impl = npuStorageImpl(storage);
  TORCH_INTERNAL_ASSERT(impl != nullptr && privateDesc(storage.unsafeGetStorageImpl()) == nullptr);
  const size_t base_bytes = static_cast<size_t>(desc->baseNumel()) * desc->data_type.itemsize();
  TORCH_CHECK(storage.nbytes() >= base_bytes, "npu_format_cast_: the storage holds ", storage.nbytes(),
              " bytes, fewer than the ", base_bytes, " of its base tensor ", desc->base_sizes);
  c10::Storage target = allocateStorage(privateBytes(*desc), storage.device());
  c10::DeviceGuard guard(storage.device());
  transDataToPrivate(baseView(storage, *desc), target, *desc);
  // The old block goes back to the caching allocator: it is reused only by work queued after this
  // conversion on the same stream, which has read it by then.
  impl->set_data_ptr_noswap(target.unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr()));
  impl->set_nbytes(target.nbytes());
  impl->setDesc(std::move(desc));
}

void unformatStorage(const c10::Storage& storage) {
  NPUStorageImpl* impl = npuStorageImpl(storage);
  const NPUStorageDesc* desc = privateDesc(storage.unsafeGetStorageImpl());
  if (impl == nullptr || desc == nullptr) return;
  c10::Storage plain = materialize(storage, *desc);
  impl->set_data_ptr_noswap(plain.unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr()));
  impl->setDesc(nullptr);
}

namespace {
// Re-allocates a fresh output (nothing else references it, contents unspecified) in a layout.
bool retarget(const at::Tensor& out, int64_t format, int64_t c0) {
  if (!allowInternalFormat() || !out.defined() || privateDesc(out) != nullptr) return false;
  if (!out.is_contiguous() || out.storage_offset() != 0 || !holdsPrivateFormats(out.scalar_type()) ||
      out.numel() == 0 || out.use_count() != 1 || out.storage().use_count() != 1 ||
      !nf::CheckRank(format, static_cast<size_t>(out.dim())).empty()) {
    return false;
  }
  NPUStorageImpl* impl = npuStorageImpl(out.storage());
  if (impl == nullptr) return false;
  auto desc = makeDesc(out.sizes(), out.dtype(), format, c0);
  c10::Storage fresh = allocateStorage(privateBytes(*desc), out.device());
  impl->set_data_ptr_noswap(fresh.unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr()));
  impl->set_nbytes(fresh.nbytes());
  impl->setDesc(std::move(desc));
  return true;
}
}  // namespace

void adoptInputFormatSlow(const at::Tensor& out, std::initializer_list<at::Tensor> inputs) {
  for (const at::Tensor& in : inputs) {
    const NPUStorageDesc* d = in.defined() ? privateDesc(in) : nullptr;
    if (d != nullptr && isWholeTensor(in, *d) && in.sizes() == out.sizes()) {
      retarget(out, d->npu_format, d->c0);
      return;
    }
  }
}

void adoptFormat(const at::Tensor& out, int64_t format) {
  if (allowInternalFormat()) retarget(out, format, nf::DefaultC0(format, out.element_size()));
}

at::Tensor emptyPreferringFormat(at::IntArrayRef sizes, const at::TensorOptions& options, int64_t format) {
  if (allowInternalFormat() && nf::IsPrivateFormat(format) &&
      holdsPrivateFormats(c10::typeMetaToScalarType(options.dtype())) &&
      nf::CheckRank(format, sizes.size()).empty() && !sizes.empty()) {
    return emptyWithFormat(sizes, options, format, nf::DefaultC0(format, options.dtype().itemsize()));
  }
  return at::empty(sizes, options);
}

at::Tensor formatCast(const at::Tensor& self, int64_t acl_format, std::optional<int64_t> customize_dtype) {
  TORCH_CHECK_VALUE(self.device().type() == c10::DeviceType::PrivateUse1,
                    "npu_format_cast: expected an npu tensor, got one on ", self.device(),
                    "; move it with .npu() first");
  const FormatChoice choice = resolveFormat(self, acl_format, customize_dtype);
  c10::DeviceGuard guard(self.device());
  const NPUStorageDesc* src = privateDesc(self);
  if (!nf::IsPrivateFormat(choice.format)) {
    at::Tensor out = at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
    if (src != nullptr && isWholeTensor(self, *src)) {
      transDataFromPrivate(self.storage(), *src, out);
    } else {
      out.copy_(self);
    }
    if (choice.format != guessBaseFormat(out.dim())) {
      npuStorageImpl(out.storage())->setDesc(makeDesc(out.sizes(), out.dtype(), choice.format, choice.c0));
    }
    return out;
  }
  at::Tensor out = emptyWithFormat(self.sizes(), self.options(), choice.format, choice.c0);
  const NPUStorageDesc& dst = *privateDesc(out);
  if (self.numel() == 0) return out;
  if (src == nullptr) {
    transDataToPrivate(self, out.storage(), dst);
  } else if (isWholeTensor(self, *src)) {
    transDataBetweenPrivate(self.storage(), *src, out.storage(), dst);
  } else {
    BaseLayouts layouts;  // a view of a private tensor: its values, through the base layout
    transDataToPrivate(layouts.get(self, /*written=*/false), out.storage(), dst);
  }
  return out;
}

at::Tensor& formatCastInPlace(at::Tensor& self, int64_t acl_format, std::optional<int64_t> customize_dtype) {
  TORCH_CHECK_VALUE(self.device().type() == c10::DeviceType::PrivateUse1,
                    "npu_format_cast_: expected an npu tensor, got one on ", self.device());
  const FormatChoice choice = resolveFormat(self, acl_format, customize_dtype);
  const NPUStorageDesc* current = privateDesc(self);
  if (current != nullptr && current->npu_format == choice.format && current->c0 == choice.c0) return self;
  if (current == nullptr && npuFormatOf(self) == choice.format) return self;
  c10::DeviceGuard guard(self.device());
  NPUStorageImpl* impl = npuStorageImpl(self.storage());
  const bool whole = current != nullptr
                         ? isWholeTensor(self, *current)
                         : (self.is_contiguous() && self.storage_offset() == 0 &&
                            self.storage().nbytes() == static_cast<size_t>(self.numel()) * self.element_size());
  if (impl == nullptr || !whole) {
    // The layout belongs to the whole storage: a view of part of it (or a storage made outside
    // torch_npu) gets a new storage of its own instead, as torch_npu's npu_format_cast_ does.
    at::Tensor converted = formatCast(self, choice.format, customize_dtype);
    self.set_(converted.storage(), 0, converted.sizes(), converted.strides());
    return self;
  }
  if (current != nullptr) unformatStorage(self.storage());
  if (nf::IsPrivateFormat(choice.format)) {
    formatStorage(self.storage(), makeDesc(self.sizes(), self.dtype(), choice.format, choice.c0));
  } else {
    impl->setDesc(choice.format == guessBaseFormat(self.dim())
                      ? nullptr
                      : makeDesc(self.sizes(), self.dtype(), choice.format, choice.c0));
  }
  return self;
}

}  // namespace at_npu::native
