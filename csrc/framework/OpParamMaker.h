// OpParamMaker.h - PyTorch values -> opslib descriptors for EXEC_NPU_CMD (tensors, scalars, int
// arrays; plain numbers pass through), and their release after the launch.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/List.h>
#include <c10/core/Scalar.h>
#include <c10/util/OptionalArrayRef.h>
#include <npu/opslib.h>

#include <optional>
#include <string>

namespace at_npu::native {

aclDataType toAclDataType(at::ScalarType type);  // throws for types opslib does not know

// A descriptor of the tensor's view of its storage. Under a FormatStaging (private formats in
// play) the staging decides: the storage as it is, a flat view, or a converted stand-in.
aclTensor* ConvertType(const at::Tensor& tensor);  // undefined -> nullptr
aclTensor* describeTensor(const at::Tensor& tensor);  // the plain descriptor, no staging
// Descriptors made elsewhere (TransData's private operands) pass through and are released.
inline aclTensor* ConvertType(aclTensor* descriptor) { return descriptor; }
aclTensor* ConvertType(const std::optional<at::Tensor>& tensor);
aclScalar* ConvertType(const at::Scalar& scalar);
aclIntArray* ConvertType(at::IntArrayRef values);
aclIntArray* ConvertType(at::OptionalIntArrayRef values);  // none -> nullptr ("all dims")
aclTensorList* ConvertType(at::TensorList tensors);
aclTensorList* ConvertType(const c10::List<std::optional<at::Tensor>>& tensors);  // None -> NULL entry
aclScalarList* ConvertType(at::ArrayRef<at::Scalar> scalars);
// Strings (an op's layout name, "BSND") pass as char*, as the op API takes them.
inline char* ConvertType(const char* text) { return const_cast<char*>(text); }
inline char* ConvertType(const std::string& text) { return const_cast<char*>(text.c_str()); }
// Integers, bools and enums (aclDataType...) pass to an op as int64: an integer parameter of any
// width reads the low bits of its 64-bit slot, so `1`, `-1` or `true` reach an int64_t, int32_t or
// bool parameter intact. Floating-point values pass as they are (a float parameter needs a float).
template <typename T>
  requires(std::is_integral_v<T> || std::is_enum_v<T>)
int64_t ConvertType(T value) {
  return static_cast<int64_t>(value);
}
template <typename T>
  requires std::is_floating_point_v<T>
T ConvertType(T value) {
  return value;
}

inline void Release(aclTensor* p) { if (p) aclDestroyTensor(p); }
inline void Release(aclScalar* p) { if (p) aclDestroyScalar(p); }
inline void Release(aclIntArray* p) { if (p) aclDestroyIntArray(p); }
inline void Release(aclTensorList* p) { if (p) aclDestroyTensorList(p); }
inline void Release(aclScalarList* p) { if (p) aclDestroyScalarList(p); }
inline void Release(char*) {}  // a string belongs to the caller
template <typename T>
  requires std::is_arithmetic_v<T>
void Release(T) {}

// The descriptors of a launch's own operands (EXEC_NPU_CMD's arguments). A tensor outside any
// private-format staging gets a descriptor from the calling thread's small cache of recent
// geometries (sizes, strides, offset, dtype, storage extent), rebound to the tensor's memory:
// repeated small ops skip creating and destroying it. Everything else is converted as above.
aclTensor* launchOperand(const at::Tensor& tensor);
// Scalars the same way: a cache of recent values (dtype and bits).
aclScalar* launchOperand(const at::Scalar& scalar);
template <typename T>
auto launchOperand(const T& value) {
  return ConvertType(value);
}
// Returns a cached descriptor to the cache (destroys any other), and releases everything else.
void releaseLaunchOperand(aclTensor* descriptor);
void releaseLaunchOperand(aclScalar* descriptor);
template <typename T>
void releaseLaunchOperand(T value) {
  Release(value);
}

}  // namespace at_npu::native
