// ReduceOps.cpp - reductions: sum, mean, max/min (whole tensor and along a dim), argmax/argmin,
// var/std. A NULL dim array means "all dimensions".
#include <ATen/ops/argmax_cpu_dispatch.h>
#include <ATen/ops/argmin_cpu_dispatch.h>
#include <ATen/ops/max_cpu_dispatch.h>
#include <ATen/ops/mean_cpu_dispatch.h>
#include <ATen/ops/min_cpu_dispatch.h>
#include <ATen/ops/std_cpu_dispatch.h>
#include <ATen/ops/sum_cpu_dispatch.h>
#include <ATen/ops/var_cpu_dispatch.h>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {

std::optional<std::vector<int64_t>> optionalDims(const aclIntArray* dim) {
  if (dim == nullptr) return std::nullopt;
  return intArray(dim);
}

at::OptionalIntArrayRef asRef(const std::optional<std::vector<int64_t>>& dims) {
  if (!dims) return std::nullopt;
  return at::IntArrayRef(*dims);
}

}  // namespace

// out = sum(self, dim, keepdim) computed in `dtype` (an aclDataType; out's type).
extern "C" NOP_API aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor* self,
                                                              const aclIntArray* dim, bool keepDim,
                                                              int64_t dtype, aclTensor* out,
                                                              uint64_t* workspaceSize,
                                                              aclOpExecutor** executor) {
  return prepareOp("aclnnReduceSum", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self"), o = requiredTensor(out, "out");
    auto dims = optionalDims(dim);
    const at::ScalarType type = toScalarType(static_cast<aclDataType>(dtype));
    return Prepared{{a}, [a, o, dims, keepDim, type]() mutable {
                      at::cpu::sum_out(o, a, asRef(dims), keepDim, type);
                    }, {o}};
  });
}
NPU_ATEN_OP(ReduceSum, "self, dim, keepDim, dtype, out");

extern "C" NOP_API aclnnStatus aclnnMeanGetWorkspaceSize(const aclTensor* self, const aclIntArray* dim,
                                                         bool keepDim, int64_t dtype, aclTensor* out,
                                                         uint64_t* workspaceSize,
                                                         aclOpExecutor** executor) {
  return prepareOp("aclnnMean", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self"), o = requiredTensor(out, "out");
    auto dims = optionalDims(dim);
    const at::ScalarType type = toScalarType(static_cast<aclDataType>(dtype));
    return Prepared{{a}, [a, o, dims, keepDim, type]() mutable {
                      at::cpu::mean_out(o, a, asRef(dims), keepDim, type);
                    }, {o}};
  });
}
NPU_ATEN_OP(Mean, "self, dim, keepDim, dtype, out");

// (values, indices) = max / min of self along dim.
#define NPU_REDUCE_DIM_OP(Name, fn)                                                               \
  extern "C" NOP_API aclnnStatus aclnn##Name##GetWorkspaceSize(                                   \
      const aclTensor* self, int64_t dim, bool keepDim, aclTensor* values, aclTensor* indices,    \
      uint64_t* workspaceSize, aclOpExecutor** executor) {                                        \
    return prepareOp("aclnn" #Name, workspaceSize, executor, [&] {                                \
      at::Tensor a = requiredTensor(self, "self");                                                \
      at::Tensor v = requiredTensor(values, "values"), i = requiredTensor(indices, "indices");     \
      return Prepared{{a}, [a, v, i, dim, keepDim]() mutable { at::cpu::fn##_out(v, i, a, dim, keepDim); }, \
                      {v, i}};                                                                    \
    });                                                                                           \
  }                                                                                               \
  NPU_ATEN_OP(Name, "self, dim, keepDim, values, indices")

NPU_REDUCE_DIM_OP(MaxDim, max);
NPU_REDUCE_DIM_OP(MinDim, min);

// out (0-d) = max / min over all elements.
#define NPU_REDUCE_ALL_OP(Name, fn)                                                               \
  extern "C" NOP_API aclnnStatus aclnn##Name##GetWorkspaceSize(                                   \
      const aclTensor* self, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) { \
    return prepareOp("aclnn" #Name, workspaceSize, executor, [&] {                                \
      at::Tensor a = requiredTensor(self, "self"), o = requiredTensor(out, "out");                \
      return Prepared{{a}, [a, o]() mutable { at::cpu::fn##_out(o, a); }, {o}};                        \
    });                                                                                           \
  }                                                                                               \
  NPU_ATEN_OP(Name, "self, out")

NPU_REDUCE_ALL_OP(Max, max);
NPU_REDUCE_ALL_OP(Min, min);

// out = argmax / argmin of self along dim, or of the flattened tensor when reduceAll.
#define NPU_ARG_REDUCE_OP(Name, fn)                                                                \
  extern "C" NOP_API aclnnStatus aclnn##Name##GetWorkspaceSize(                                    \
      const aclTensor* self, int64_t dim, bool reduceAll, bool keepDim, aclTensor* out,            \
      uint64_t* workspaceSize, aclOpExecutor** executor) {                                         \
    return prepareOp("aclnn" #Name, workspaceSize, executor, [&] {                                 \
      at::Tensor a = requiredTensor(self, "self"), o = requiredTensor(out, "out");                 \
      std::optional<int64_t> d = reduceAll ? std::nullopt : std::optional<int64_t>(dim);           \
      return Prepared{{a}, [a, o, d, keepDim]() mutable { at::cpu::fn##_out(o, a, d, keepDim); }, {o}}; \
    });                                                                                            \
  }                                                                                                \
  NPU_ATEN_OP(Name, "self, dim, reduceAll, keepDim, out")

NPU_ARG_REDUCE_OP(ArgMax, argmax);
NPU_ARG_REDUCE_OP(ArgMin, argmin);

// out = var / std of self over dim with `correction` (1 = Bessel's correction).
#define NPU_VARIANCE_OP(Name, fn)                                                                 \
  extern "C" NOP_API aclnnStatus aclnn##Name##GetWorkspaceSize(                                   \
      const aclTensor* self, const aclIntArray* dim, double correction, bool keepDim,             \
      aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {                        \
    return prepareOp("aclnn" #Name, workspaceSize, executor, [&] {                                \
      at::Tensor a = requiredTensor(self, "self"), o = requiredTensor(out, "out");                \
      auto dims = optionalDims(dim);                                                              \
      return Prepared{{a}, [a, o, dims, correction, keepDim]() mutable {                          \
                        at::cpu::fn##_out(o, a, asRef(dims), at::Scalar(correction), keepDim);    \
                      }, {o}};                                                                         \
    });                                                                                           \
  }                                                                                               \
  NPU_ATEN_OP(Name, "self, dim, correction, keepDim, out")

NPU_VARIANCE_OP(Var, var);
NPU_VARIANCE_OP(Std, std);
