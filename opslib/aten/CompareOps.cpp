// CompareOps.cpp - comparisons (eq/ne/lt/le/gt/ge, tensor and scalar forms) and logical and/or/not.
#include <ATen/ops/eq_cpu_dispatch.h>
#include <ATen/ops/ge_cpu_dispatch.h>
#include <ATen/ops/gt_cpu_dispatch.h>
#include <ATen/ops/le_cpu_dispatch.h>
#include <ATen/ops/logical_and_cpu_dispatch.h>
#include <ATen/ops/logical_not_cpu_dispatch.h>
#include <ATen/ops/logical_or_cpu_dispatch.h>
#include <ATen/ops/lt_cpu_dispatch.h>
#include <ATen/ops/ne_cpu_dispatch.h>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

// out (bool, broadcast shape) = self <op> other
#define NPU_COMPARE_OP(Name, fn)                                                                 \
  extern "C" NOP_API aclnnStatus aclnn##Name##TensorGetWorkspaceSize(                            \
      const aclTensor* self, const aclTensor* other, aclTensor* out, uint64_t* workspaceSize,    \
      aclOpExecutor** executor) {                                                                \
    return prepareOp("aclnn" #Name "Tensor", workspaceSize, executor, [&] {                      \
      at::Tensor a = requiredTensor(self, "self"), b = requiredTensor(other, "other");           \
      at::Tensor o = requiredTensor(out, "out");                                                 \
      return Prepared{{a, b}, [a, b, o]() mutable { at::cpu::fn##_out(o, a, b); }, {o}};              \
    });                                                                                          \
  }                                                                                              \
  NPU_ATEN_OP(Name##Tensor, "self, other, out");                                                                     \
  extern "C" NOP_API aclnnStatus aclnn##Name##ScalarGetWorkspaceSize(                            \
      const aclTensor* self, const aclScalar* other, aclTensor* out, uint64_t* workspaceSize,    \
      aclOpExecutor** executor) {                                                                \
    return prepareOp("aclnn" #Name "Scalar", workspaceSize, executor, [&] {                      \
      at::Tensor a = requiredTensor(self, "self"), o = requiredTensor(out, "out");               \
      at::Scalar b = hostScalar(other);                                                          \
      return Prepared{{a}, [a, b, o]() mutable { at::cpu::fn##_out(o, a, b); }, {o}};                 \
    });                                                                                          \
  }                                                                                              \
  NPU_ATEN_OP(Name##Scalar, "self, other, out")

NPU_COMPARE_OP(Eq, eq);
NPU_COMPARE_OP(Ne, ne);
NPU_COMPARE_OP(Lt, lt);
NPU_COMPARE_OP(Le, le);
NPU_COMPARE_OP(Gt, gt);
NPU_COMPARE_OP(Ge, ge);

#define NPU_LOGICAL_BINARY_OP(Name, fn)                                                          \
  extern "C" NOP_API aclnnStatus aclnn##Name##GetWorkspaceSize(                                  \
      const aclTensor* self, const aclTensor* other, aclTensor* out, uint64_t* workspaceSize,    \
      aclOpExecutor** executor) {                                                                \
    return prepareOp("aclnn" #Name, workspaceSize, executor, [&] {                               \
      at::Tensor a = requiredTensor(self, "self"), b = requiredTensor(other, "other");           \
      at::Tensor o = requiredTensor(out, "out");                                                 \
      return Prepared{{a, b}, [a, b, o]() mutable { at::cpu::fn##_out(o, a, b); }, {o}};              \
    });                                                                                          \
  }                                                                                              \
  NPU_ATEN_OP(Name, "self, other, out")

NPU_LOGICAL_BINARY_OP(LogicalAnd, logical_and);
NPU_LOGICAL_BINARY_OP(LogicalOr, logical_or);

extern "C" NOP_API aclnnStatus aclnnLogicalNotGetWorkspaceSize(const aclTensor* self, aclTensor* out,
                                                               uint64_t* workspaceSize,
                                                               aclOpExecutor** executor) {
  return prepareOp("aclnnLogicalNot", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self"), o = requiredTensor(out, "out");
    return Prepared{{a}, [a, o]() mutable { at::cpu::logical_not_out(o, a); }, {o}};
  });
}
NPU_ATEN_OP(LogicalNot, "self, out");
