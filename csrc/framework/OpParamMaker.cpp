// OpParamMaker.cpp - descriptor construction from tensors, scalars and int arrays.
#include "csrc/framework/OpParamMaker.h"

#include "csrc/framework/FormatStaging.h"
#include "opslib/aten/AclDataType.h"

namespace at_npu::native {

aclDataType toAclDataType(at::ScalarType type) {
  aclDataType acl = npu::opslib::aten::AclDataTypeOf(type);
  TORCH_CHECK(acl != ACL_DT_UNDEFINED, "npu device ops do not support dtype ", type);
  return acl;
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

aclTensor* ConvertType(const std::optional<at::Tensor>& tensor) {
  return tensor.has_value() ? ConvertType(*tensor) : nullptr;
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
