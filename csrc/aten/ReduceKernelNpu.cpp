// ReduceKernelNpu.cpp - sum, mean, max/min (all and along a dim), argmax/argmin and var/std on
// device ops.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <c10/core/WrapDimMinimal.h>

#include "csrc/aten/DeviceOpSupport.h"
#include "csrc/aten/NpuNativeFunctions.h"
#include "csrc/framework/OpCommand.h"

namespace at_npu::native {
at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (!onDevice({self, out}, out.device()) || (dtype && *dtype != out.scalar_type())) {
    runGeneric("aten::sum", "IntList_out", self, dim, keepdim, dtype, out);
    return out;
  }
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, reducedShape(self, dim, keepdim));
  EXEC_NPU_CMD(aclnnReduceSum, self, dim, keepdim, aclType(out.scalar_type()), out);
  return out;
}

at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const bool floating = at::isFloatingType(out.scalar_type()) && at::isFloatingType(self.scalar_type());
  if (!onDevice({self, out}, out.device()) || !floating || (dtype && *dtype != out.scalar_type())) {
    runGeneric("aten::mean", "out", self, dim, keepdim, dtype, out);  // raises PyTorch's errors
    return out;
  }
  c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, reducedShape(self, dim, keepdim));
  EXEC_NPU_CMD(aclnnMean, self, dim, keepdim, aclType(out.scalar_type()), out);
  return out;
}

#define NPU_REDUCE_DIM_KERNEL(fn, Name, overload)                                                 \
  std::tuple<at::Tensor&, at::Tensor&> fn##_dim_out(const at::Tensor& self, int64_t dim,          \
                                                    bool keepdim, at::Tensor& values,            \
                                                    at::Tensor& indices) {                        \
    if (!onDevice({self, values, indices}, values.device()) || self.scalar_type() == at::kBool || \
        values.scalar_type() != self.scalar_type() || indices.scalar_type() != at::kLong ||      \
        self.numel() == 0) {                                                                      \
      runGeneric("aten::" #fn, overload, self, dim, keepdim, values, indices);                    \
      return {values, indices};                                                                   \
    }                                                                                             \
    checkOutOverlap(values, {self, indices});                                                     \
    checkOutOverlap(indices, {self});                                                             \
    c10::DeviceGuard guard(values.device());                                                      \
    const int64_t d = c10::maybe_wrap_dim(dim, self.dim());                                       \
    const auto shape = reducedShape(self, at::IntArrayRef(d), keepdim);                           \
    at::native::resize_output(values, shape);                                                     \
    at::native::resize_output(indices, shape);                                                    \
    EXEC_NPU_CMD(aclnn##Name, self, d, keepdim, values, indices);                                 \
    return {values, indices};                                                                     \
  }

NPU_REDUCE_DIM_KERNEL(max, MaxDim, "dim_max")
NPU_REDUCE_DIM_KERNEL(min, MinDim, "dim_min")
#undef NPU_REDUCE_DIM_KERNEL

#define NPU_REDUCE_ALL_KERNEL(fn, Name)                                                          \
  at::Tensor fn##_all(const at::Tensor& self) {                                                  \
    if (!onDevice({self}, self.device()) || self.scalar_type() == at::kBool) {                   \
      return runGeneric("aten::" #fn, "", self)[0].toTensor();                                   \
    }                                                                                            \
    TORCH_CHECK(self.numel() > 0, #fn "(): Expected reduction dim to be specified for ",         \
                "input.numel() == 0. Specify the reduction dim with the 'dim' argument.");       \
    c10::DeviceGuard guard(self.device());                                                       \
    at::Tensor out = at::empty({}, self.options());                                              \
    EXEC_NPU_CMD(aclnn##Name, self, out);                                                        \
    return out;                                                                                  \
  }

NPU_REDUCE_ALL_KERNEL(max, Max)
NPU_REDUCE_ALL_KERNEL(min, Min)
#undef NPU_REDUCE_ALL_KERNEL

#define NPU_ARG_REDUCE_KERNEL(fn, Name)                                                          \
  at::Tensor& fn##_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,         \
                       at::Tensor& out) {                                                        \
    if (!onDevice({self, out}, out.device()) || self.scalar_type() == at::kBool ||               \
        out.scalar_type() != at::kLong || self.numel() == 0) {                                   \
      runGeneric("aten::" #fn, "out", self, dim, keepdim, out);                                  \
      return out;                                                                                \
    }                                                                                            \
    c10::DeviceGuard guard(out.device());                                                        \
    std::vector<int64_t> shape;                                                                  \
    int64_t d = 0;                                                                               \
    if (dim.has_value()) {                                                                       \
      d = c10::maybe_wrap_dim(*dim, self.dim());                                                 \
      shape = reducedShape(self, at::IntArrayRef(d), keepdim);                                   \
    } else if (keepdim) {                                                                        \
      shape.assign(static_cast<size_t>(self.dim()), 1);                                          \
    }                                                                                            \
    at::native::resize_output(out, shape);                                                       \
    EXEC_NPU_CMD(aclnn##Name, self, d, !dim.has_value(), keepdim, out);                          \
    return out;                                                                                  \
  }

NPU_ARG_REDUCE_KERNEL(argmax, ArgMax)
NPU_ARG_REDUCE_KERNEL(argmin, ArgMin)
#undef NPU_ARG_REDUCE_KERNEL

#define NPU_VARIANCE_KERNELS(fn, Name)                                                            \
  at::Tensor& fn##_correction_out(const at::Tensor& self, at::OptionalIntArrayRef dim,            \
                                  const std::optional<at::Scalar>& correction, bool keepdim,      \
                                  at::Tensor& out) {                                              \
    if (!onDevice({self, out}, out.device()) || !at::isFloatingType(self.scalar_type()) ||        \
        out.scalar_type() != self.scalar_type()) {                                                \
      runGeneric("aten::" #fn, "correction_out", self, dim, correction, keepdim, out);            \
      return out;                                                                                 \
    }                                                                                             \
    c10::DeviceGuard guard(out.device());                                                         \
    at::native::resize_output(out, reducedShape(self, dim, keepdim));                             \
    const double c = correction.has_value() ? correction->toDouble() : 1.0;                       \
    EXEC_NPU_CMD(aclnn##Name, self, dim, c, keepdim, out);                                        \
    return out;                                                                                   \
  }                                                                                               \
  at::Tensor fn##_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,                 \
                             const std::optional<at::Scalar>& correction, bool keepdim) {         \
    if (!deviceOpsSupport({self}) || !at::isFloatingType(self.scalar_type())) {                   \
      return runGeneric("aten::" #fn, "correction", self, dim, correction, keepdim)[0].toTensor(); \
    }                                                                                             \
    at::Tensor out = at::empty(reducedShape(self, dim, keepdim), self.options());                 \
    return fn##_correction_out(self, dim, correction, keepdim, out);                              \
  }

NPU_VARIANCE_KERNELS(var, Var)
NPU_VARIANCE_KERNELS(std, Std)
#undef NPU_VARIANCE_KERNELS

}  // namespace at_npu::native
