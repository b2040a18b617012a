// DeviceOpSupport.h - shared checks for adapters that call named device ops: which dtypes the device
// ops take, CPU scalars as device operands, out= validation, and handing unsupported cases to the
// generic executor (so an adapter never narrows what the op accepts).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <c10/util/MaybeOwned.h>

#include <functional>
#include <initializer_list>

#include "csrc/framework/GenericExecutor.h"
#include "csrc/framework/OpParamMaker.h"

namespace at_npu::native {

// Tensors named by reference: copying an at::Tensor that Python owns costs a GIL round trip (its
// Python object is kept alive while C++ holds more than one reference), on every launch.
using TensorRefs = std::initializer_list<std::reference_wrapper<const at::Tensor>>;

// A dtype the elementwise device ops compute on.
inline bool deviceOpsSupport(at::ScalarType type) {
  switch (type) {
    case at::kFloat: case at::kHalf: case at::kBFloat16: case at::kDouble: case at::kChar:
    case at::kByte: case at::kShort: case at::kInt: case at::kLong: case at::kBool:
      return true;
    default:
      return false;
  }
}

// True when every defined tensor has a dtype the elementwise device ops compute on.
bool deviceOpsSupport(TensorRefs tensors);

// True when every defined tensor is on `device` with a dtype the device ops take (and a floating
// one when floating_only): the common precondition of the family adapters.
bool onDevice(TensorRefs tensors, const at::Device& device, bool floating_only = false);
// The value of spatial dim i in a stride / padding / dilation / kernel list that may hold one value
// for all dims, or none (fallback).
inline int64_t perDim(at::IntArrayRef values, size_t i, int64_t fallback) {
  if (values.empty()) return fallback;
  return values.size() == 1 ? values[0] : values[i];
}
// A dtype argument of a device op (an aclDataType, passed as int64_t).
inline int64_t aclType(at::ScalarType type) { return static_cast<int64_t>(toAclDataType(type)); }
// `t` as an operand on `device`: npu tensors as they are; a CPU scalar becomes a 0-d npu tensor.
// Any other CPU tensor is an error, as on CUDA.
// Borrowed (no copy, see TensorRefs) when t is already on the device.
c10::MaybeOwned<at::Tensor> deviceOperand(const at::Tensor& t, const at::Device& device, const char* op);

// out= checks of a binary elementwise op (dtype castable, no partial overlap) and resize of out to
// the broadcast shape; returns the common (computation) dtype.
at::ScalarType prepareBinaryOut(const char* op, const at::Tensor& self, const at::Tensor& other,
                                const at::Tensor& out);
void prepareUnaryOut(const char* op, const at::Tensor& self, const at::Tensor& out);

// PyTorch computes in the common dtype and casts to out's: when they differ (float32 inputs into a
// float64 out), compute into a temporary of the common dtype, then cast into out.
template <typename Launch>
void computeInCommonDtype(at::Tensor& out, at::ScalarType common, Launch launch) {
  if (out.scalar_type() == common) {
    launch(out);
    return;
  }
  at::Tensor tmp = at::empty(out.sizes(), out.options().dtype(common));
  launch(tmp);
  out.copy_(tmp);
}

// The shared body of binary elementwise adapters: device guard, out= checks and resize, CPU
// scalars moved to the device, computation in the common dtype (floating for true division), then
// launch(a, b, dst) with the device op.
template <typename Launch>
at::Tensor& runBinaryDeviceOp(const char* name, const at::Tensor& self, const at::Tensor& other,
                              at::Tensor& out, bool true_division, Launch launch) {
  c10::DeviceGuard guard(out.device());
  at::ScalarType common = prepareBinaryOut(name, self, other, out);
  if (true_division && at::isIntegralType(common, /*includeBool=*/true)) {
    common = c10::typeMetaToScalarType(c10::get_default_dtype());
  }
  const c10::MaybeOwned<at::Tensor> a = deviceOperand(self, out.device(), name);
  const c10::MaybeOwned<at::Tensor> b = deviceOperand(other, out.device(), name);
  computeInCommonDtype(out, common, [&](at::Tensor& dst) { launch(*a, *b, dst); });
  return out;
}

// Runs aten::<name>.<overload> as if it had no npu kernel (generic executor, or the CPU fallback
// in strict mode) with these arguments; returns the op's results.
template <typename... Args>
torch::jit::Stack runGeneric(const char* name, const char* overload, const Args&... args) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  torch::jit::Stack stack;
  torch::jit::push(stack, args...);
  npuBoxedFallback(op, &stack);
  return stack;
}

// out= must not overlap itself or any input (PyTorch's "unsupported operation: ... refer to a
// single memory location" errors), checked before the launch.
void checkOutOverlap(const at::Tensor& out, TensorRefs inputs);

// The shape of a reduction's result over `dims` (none or empty: all dims), as PyTorch computes it.
std::vector<int64_t> reducedShape(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim);

// A tensor value as a device-op operand on `device`, or nullopt when absent.
inline std::optional<at::Tensor> definedOrNone(const std::optional<at::Tensor>& t) {
  return (t.has_value() && t->defined()) ? t : std::nullopt;
}

}  // namespace at_npu::native
