// OpParamMaker.cpp - descriptor construction from tensors, scalars and int arrays.
#include "csrc/framework/OpParamMaker.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

#include "csrc/framework/FormatStaging.h"
#include "csrc/framework/AclTensorAs.h"
#include "opslib/aten/AclDataType.h"
#include "opslib/aten/Float8Dtypes.h"

namespace at_npu::native {

aclDataType toAclDataType(at::ScalarType type) {
  aclDataType acl = npu::opslib::aten::AclDataTypeOf(type);
  // float8 tensors reach the ATen-backed ops (quantisers, quantised matmuls); opslib's kernels refuse them.
  if (acl == ACL_DT_UNDEFINED) acl = npu::opslib::aten::float8AclTypeOf(type);
  TORCH_CHECK(acl != ACL_DT_UNDEFINED, "npu device ops do not support dtype ", type);
  return acl;
}

aclTensor* ConvertType(const AclTensorAs& operand) {
  const at::Tensor& t = operand.tensor;
  if (!t.defined()) return nullptr;
  const std::optional<at::ScalarType> holder = npu::opslib::aten::float8HolderOf(operand.dtype);
  TORCH_CHECK((holder.has_value() && *holder == t.scalar_type()) || operand.dtype == toAclDataType(t.scalar_type()),
              "AclTensorAs: a ", t.scalar_type(), " tensor cannot be described as aclDataType ",
              static_cast<int>(operand.dtype));
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "a device op input must be an npu tensor, got one on ", t.device());
  const int64_t storage_elems = static_cast<int64_t>(t.storage().nbytes() / t.dtype().itemsize());
  return aclCreateTensor(t.sizes().data(), t.dim(), operand.dtype, t.strides().data(), t.storage_offset(),
                         ACL_FORMAT_ND, &storage_elems, 1, t.storage().mutable_data());
}

aclTensor* ConvertType(const at::Tensor& tensor) {
  if (!tensor.defined()) return nullptr;
  if (C10_UNLIKELY(formatsInPlay())) {
    if (FormatStaging* staging = FormatStaging::active()) return staging->describe(tensor);
  }
  return describeTensor(tensor);
}

aclTensor* describeTensor(const at::Tensor& tensor) {
  TORCH_CHECK(tensor.device().type() == c10::DeviceType::PrivateUse1,
              "a device op input must be an npu tensor, got one on ", tensor.device());
  const int64_t storage_elems =
      static_cast<int64_t>(tensor.storage().nbytes() / tensor.dtype().itemsize());
  return aclCreateTensor(tensor.sizes().data(), tensor.dim(), toAclDataType(tensor.scalar_type()),
                         tensor.strides().data(), tensor.storage_offset(), ACL_FORMAT_ND,
                         &storage_elems, 1, tensor.storage().mutable_data());
}

namespace {

// A recently used descriptor and the geometry it describes (see launchOperand).
struct CachedDescriptor {
  static constexpr size_t kMaxDims = 6;
  aclTensor* descriptor = nullptr;
  bool in_use = false;  // bound in the launch being prepared
  at::ScalarType dtype = at::ScalarType::Undefined;
  size_t dims = 0;
  int64_t offset = 0;
  size_t storage_bytes = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  // Plain loops: these views have a few dims, where a memcmp call costs more than the compare.
  bool matches(at::ScalarType type, at::IntArrayRef s, at::IntArrayRef st, int64_t off,
               size_t bytes) const {
    if (descriptor == nullptr || in_use || dtype != type || dims != s.size() || offset != off ||
        storage_bytes != bytes) {
      return false;
    }
    for (size_t d = 0; d < dims; ++d) {
      if (sizes[d] != s[d] || strides[d] != st[d]) return false;
    }
    return true;
  }
};

// A recently used scalar descriptor (scalar descriptors never change once created).
struct CachedScalar {
  aclScalar* descriptor = nullptr;
  bool in_use = false;
  aclDataType dtype = ACL_DT_UNDEFINED;
  uint64_t bits = 0;
};

// A few descriptors per thread: a small-op loop uses one geometry for all of its operands, and
// one or two scalars (add's alpha of 1).
struct DescriptorCache {
  static constexpr size_t kEntries = 8;
  std::array<CachedDescriptor, kEntries> entries;
  size_t next_victim = 0;
  static constexpr size_t kScalars = 4;
  std::array<CachedScalar, kScalars> scalars;
  size_t next_scalar_victim = 0;

  DescriptorCache() {
    // Touches opslib's per-thread state first, so that it outlives this cache at thread exit
    // (thread-local objects are destroyed in the reverse order of their construction).
    const int64_t one = 1;
    aclDestroyTensor(aclCreateTensor(&one, 1, ACL_FLOAT, &one, 0, ACL_FORMAT_ND, &one, 1, nullptr));
  }
  ~DescriptorCache() {
    for (CachedDescriptor& e : entries) {
      if (e.descriptor != nullptr) aclDestroyTensor(e.descriptor);
    }
    for (CachedScalar& e : scalars) {
      if (e.descriptor != nullptr) aclDestroyScalar(e.descriptor);
    }
  }
};

DescriptorCache& descriptorCache() {
  thread_local DescriptorCache cache;
  return cache;
}

}  // namespace

aclTensor* launchOperand(const at::Tensor& tensor) {
  if (!tensor.defined() || C10_UNLIKELY(formatsInPlay())) return ConvertType(tensor);
  TORCH_CHECK(tensor.device().type() == c10::DeviceType::PrivateUse1,
              "a device op input must be an npu tensor, got one on ", tensor.device());
  const at::IntArrayRef sizes = tensor.sizes();
  if (sizes.size() > CachedDescriptor::kMaxDims) return describeTensor(tensor);
  const at::IntArrayRef strides = tensor.strides();
  const at::ScalarType type = tensor.scalar_type();
  const int64_t offset = tensor.storage_offset();
  const c10::StorageImpl& storage = *tensor.unsafeGetTensorImpl()->storage().unsafeGetStorageImpl();
  const size_t bytes = storage.nbytes();
  DescriptorCache& cache = descriptorCache();
  for (CachedDescriptor& e : cache.entries) {
    if (e.matches(type, sizes, strides, offset, bytes)) {
      aclSetRawTensorAddr(e.descriptor, tensor.storage().mutable_data());
      e.in_use = true;
      return e.descriptor;
    }
  }
  aclTensor* descriptor = describeTensor(tensor);
  if (descriptor == nullptr) return nullptr;  // the op reports the NULL operand
  // Replace an entry not bound in this launch (round robin); if all are, the descriptor is not
  // cached and its release destroys it.
  for (size_t tries = 0; tries < DescriptorCache::kEntries; ++tries) {
    CachedDescriptor& e = cache.entries[cache.next_victim];
    cache.next_victim = (cache.next_victim + 1) % DescriptorCache::kEntries;
    if (e.in_use) continue;
    if (e.descriptor != nullptr) aclDestroyTensor(e.descriptor);
    e.descriptor = descriptor;
    e.in_use = true;
    e.dtype = type;
    e.dims = sizes.size();
    e.offset = offset;
    e.storage_bytes = bytes;
    std::copy(sizes.begin(), sizes.end(), e.sizes);
    std::copy(strides.begin(), strides.end(), e.strides);
    break;
  }
  return descriptor;
}

void releaseLaunchOperand(aclTensor* descriptor) {
  if (descriptor == nullptr) return;
  for (CachedDescriptor& e : descriptorCache().entries) {
    if (e.descriptor == descriptor) {
      e.in_use = false;
      return;
    }
  }
  aclDestroyTensor(descriptor);
}

aclTensor* ConvertType(const std::optional<at::Tensor>& tensor) {
  return tensor.has_value() ? ConvertType(*tensor) : nullptr;
}

aclScalar* launchOperand(const at::Scalar& scalar) {
  aclDataType dtype = ACL_DOUBLE;
  uint64_t bits = 0;
  if (scalar.isBoolean()) {
    dtype = ACL_BOOL;
    bits = scalar.toBool() ? 1 : 0;
  } else if (scalar.isIntegral(/*includeBool=*/false)) {
    dtype = ACL_INT64;
    bits = static_cast<uint64_t>(scalar.toLong());
  } else if (scalar.isFloatingPoint()) {
    bits = std::bit_cast<uint64_t>(scalar.toDouble());
  } else {
    return ConvertType(scalar);  // complex and symbolic scalars: its error or its descriptor
  }
  DescriptorCache& cache = descriptorCache();
  for (CachedScalar& e : cache.scalars) {
    if (e.descriptor != nullptr && !e.in_use && e.dtype == dtype && e.bits == bits) {
      e.in_use = true;
      return e.descriptor;
    }
  }
  aclScalar* descriptor = ConvertType(scalar);
  if (descriptor == nullptr) return nullptr;
  for (size_t tries = 0; tries < DescriptorCache::kScalars; ++tries) {
    CachedScalar& e = cache.scalars[cache.next_scalar_victim];
    cache.next_scalar_victim = (cache.next_scalar_victim + 1) % DescriptorCache::kScalars;
    if (e.in_use) continue;
    if (e.descriptor != nullptr) aclDestroyScalar(e.descriptor);
    e = CachedScalar{descriptor, true, dtype, bits};
    break;
  }
  return descriptor;
}

void releaseLaunchOperand(aclScalar* descriptor) {
  if (descriptor == nullptr) return;
  for (CachedScalar& e : descriptorCache().scalars) {
    if (e.descriptor == descriptor) {
      e.in_use = false;
      return;
    }
  }
  aclDestroyScalar(descriptor);
}

aclScalar* ConvertType(const at::Scalar& scalar) {
  if (scalar.isBoolean()) {
    bool v = scalar.toBool();
    return aclCreateScalar(&v, ACL_BOOL);
  }
  if (scalar.isIntegral(/*includeBool=*/false)) {
    int64_t v = scalar.toLong();
    return aclCreateScalar(&v, ACL_INT64);
  }
  TORCH_CHECK(!scalar.isComplex(), "npu device ops do not support complex scalars");
  double v = scalar.toDouble();
  return aclCreateScalar(&v, ACL_DOUBLE);
}

aclIntArray* ConvertType(at::IntArrayRef values) {
  return aclCreateIntArray(values.data(), values.size());
}

aclIntArray* ConvertType(at::OptionalIntArrayRef values) {
  return values.has_value() ? ConvertType(*values) : nullptr;
}

aclScalarList* ConvertType(at::ArrayRef<at::Scalar> scalars) {
  std::vector<aclScalar*> converted;
  converted.reserve(scalars.size());
  for (const at::Scalar& s : scalars) converted.push_back(ConvertType(s));
  aclScalarList* list = aclCreateScalarList(converted.data(), converted.size());
  for (aclScalar* s : converted) Release(s);  // the list keeps copies
  return list;
}

namespace {
// The list owns its entries once created; on failure they are destroyed here.
aclTensorList* makeTensorList(std::vector<const aclTensor*>& tensors) {
  aclTensorList* list = aclCreateTensorList(tensors.data(), tensors.size());
  if (list == nullptr) {
    for (const aclTensor* t : tensors) Release(const_cast<aclTensor*>(t));
  }
  return list;
}
}  // namespace

aclTensorList* ConvertType(at::TensorList tensors) {
  std::vector<const aclTensor*> converted;
  converted.reserve(tensors.size());
  for (const at::Tensor& t : tensors) converted.push_back(ConvertType(t));
  return makeTensorList(converted);
}

aclTensorList* ConvertType(const c10::List<std::optional<at::Tensor>>& tensors) {
  std::vector<const aclTensor*> converted;
  converted.reserve(tensors.size());
  for (const std::optional<at::Tensor>& t : tensors.vec()) {
    converted.push_back(t.has_value() ? ConvertType(*t) : nullptr);
  }
  return makeTensorList(converted);
}

}  // namespace at_npu::native
