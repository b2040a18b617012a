// ShapeOps.cpp - cat, where and masked_fill.
#include <ATen/ops/cat_cpu_dispatch.h>
#include <ATen/ops/masked_fill_cpu_dispatch.h>
#include <ATen/ops/where_cpu_dispatch.h>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

extern "C" NOP_API aclnnStatus aclnnCatGetWorkspaceSize(const aclTensorList* tensors, int64_t dim,
                                                        aclTensor* out, uint64_t* workspaceSize,
                                                        aclOpExecutor** executor) {
  return prepareOp("aclnnCat", workspaceSize, executor, [&] {
    std::vector<at::Tensor> inputs = hostTensors(tensors);
    at::Tensor o = requiredTensor(out, "out");
    return Prepared{inputs, [=]() mutable { at::cpu::cat_out(o, inputs, dim); }, {o}};
  });
}
NPU_ATEN_OP(Cat, "tensors, dim, out");

// out = condition ? self : other (broadcast).
extern "C" NOP_API aclnnStatus aclnnSWhereGetWorkspaceSize(const aclTensor* condition,
                                                           const aclTensor* self,
                                                           const aclTensor* other, aclTensor* out,
                                                           uint64_t* workspaceSize,
                                                           aclOpExecutor** executor) {
  return prepareOp("aclnnSWhere", workspaceSize, executor, [&] {
    at::Tensor c = requiredTensor(condition, "condition"), a = requiredTensor(self, "self");
    at::Tensor b = requiredTensor(other, "other"), o = requiredTensor(out, "out");
    return Prepared{{c, a, b}, [=]() mutable { at::cpu::where_out(o, c, a, b); }, {o}};
  });
}
NPU_ATEN_OP(SWhere, "condition, self, other, out");

extern "C" NOP_API aclnnStatus aclnnMaskedFillScalarGetWorkspaceSize(aclTensor* self,
                                                                     const aclTensor* mask,
                                                                     const aclScalar* value,
                                                                     uint64_t* workspaceSize,
                                                                     aclOpExecutor** executor) {
  return prepareOp("aclnnMaskedFillScalar", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self"), m = requiredTensor(mask, "mask");
    at::Scalar v = hostScalar(value);
    return Prepared{{a, m}, [=]() mutable { at::cpu::masked_fill_(a, m, v); }, {a}};
  });
}
NPU_ATEN_OP(MaskedFillScalar, "self, mask, value");

// value: a 0-d tensor (read when the op runs, in stream order).
extern "C" NOP_API aclnnStatus aclnnMaskedFillTensorGetWorkspaceSize(aclTensor* self,
                                                                     const aclTensor* mask,
                                                                     const aclTensor* value,
                                                                     uint64_t* workspaceSize,
                                                                     aclOpExecutor** executor) {
  return prepareOp("aclnnMaskedFillTensor", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self"), m = requiredTensor(mask, "mask");
    at::Tensor v = requiredTensor(value, "value");
    return Prepared{{a, m, v}, [=]() mutable { at::cpu::masked_fill_(a, m, v); }, {a}};
  });
}
NPU_ATEN_OP(MaskedFillTensor, "self, mask, value");
