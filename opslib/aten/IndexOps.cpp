// IndexOps.cpp - embedding (forward, dense backward), index_select, gather, scatter (tensor and
// value sources), scatter_add and index_put with integer indices.
#include <ATen/ops/_index_put_impl_cpu_dispatch.h>
#include <ATen/ops/embedding_dense_backward_cpu_dispatch.h>
#include <ATen/ops/gather_cpu_dispatch.h>
#include <ATen/ops/index_select_cpu_dispatch.h>
#include <ATen/ops/scatter_add_cpu_dispatch.h>
#include <ATen/ops/scatter_cpu_dispatch.h>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

// out[..., :] = weight[indices[...], :]; out is contiguous with shape indices.shape + [dim].
extern "C" NOP_API aclnnStatus aclnnEmbeddingGetWorkspaceSize(const aclTensor* weight,
                                                              const aclTensor* indices,
                                                              aclTensor* out,
                                                              uint64_t* workspaceSize,
                                                              aclOpExecutor** executor) {
  return prepareOp("aclnnEmbedding", workspaceSize, executor, [&] {
    at::Tensor w = requiredTensor(weight, "weight"), i = requiredTensor(indices, "indices");
    at::Tensor o = requiredTensor(out, "out");
    if (w.dim() != 2) throw std::invalid_argument("weight must be 2-D");
    if (!o.is_contiguous()) throw std::invalid_argument("out must be contiguous");
    return Prepared{{w, i}, [=]() mutable {
                      at::Tensor rows = o.view({-1, w.size(1)});
                      at::cpu::index_select_out(rows, w, 0, i.reshape(-1));
                    }, {o}};
  });
}
NPU_ATEN_OP(Embedding, "weight, indices, out");

extern "C" NOP_API aclnnStatus aclnnEmbeddingDenseBackwardGetWorkspaceSize(
    const aclTensor* grad, const aclTensor* indices, int64_t numWeights, int64_t paddingIdx,
    bool scaleGradByFreq, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnEmbeddingDenseBackward", workspaceSize, executor, [&] {
    at::Tensor g = requiredTensor(grad, "grad"), i = requiredTensor(indices, "indices");
    at::Tensor o = requiredTensor(out, "out");
    return Prepared{{g, i}, [=]() mutable {
                      o.copy_(at::cpu::embedding_dense_backward(g, i, numWeights, paddingIdx,
                                                                scaleGradByFreq));
                    }, {o}};
  });
}
NPU_ATEN_OP(EmbeddingDenseBackward, "grad, indices, numWeights, paddingIdx, scaleGradByFreq, out");

extern "C" NOP_API aclnnStatus aclnnIndexSelectGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                                const aclTensor* index,
                                                                aclTensor* out,
                                                                uint64_t* workspaceSize,
                                                                aclOpExecutor** executor) {
  return prepareOp("aclnnIndexSelect", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self"), i = requiredTensor(index, "index");
    at::Tensor o = requiredTensor(out, "out");
    return Prepared{{a, i}, [=]() mutable { at::cpu::index_select_out(o, a, dim, i); }, {o}};
  });
}
NPU_ATEN_OP(IndexSelect, "self, dim, index, out");

extern "C" NOP_API aclnnStatus aclnnGatherGetWorkspaceSize(const aclTensor* self, int64_t dim,
                                                           const aclTensor* index, aclTensor* out,
                                                           uint64_t* workspaceSize,
                                                           aclOpExecutor** executor) {
  return prepareOp("aclnnGather", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self"), i = requiredTensor(index, "index");
    at::Tensor o = requiredTensor(out, "out");
    return Prepared{{a, i}, [=]() mutable { at::cpu::gather_out(o, a, dim, i, false); }, {o}};
  });
}
NPU_ATEN_OP(Gather, "self, dim, index, out");

// out = self with src scattered along dim at index (out may be self: in place).
#define NPU_SCATTER_OP(Name, fn)                                                                  \
  extern "C" NOP_API aclnnStatus aclnn##Name##GetWorkspaceSize(                                   \
      const aclTensor* self, int64_t dim, const aclTensor* index, const aclTensor* src,          \
      aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {                        \
    return prepareOp("aclnn" #Name, workspaceSize, executor, [&] {                                \
      at::Tensor a = requiredTensor(self, "self"), i = requiredTensor(index, "index");            \
      at::Tensor s = requiredTensor(src, "src"), o = requiredTensor(out, "out");                  \
      return Prepared{{a, i, s}, [=]() mutable { at::cpu::fn(o, a, dim, i, s); }, {o}};                \
    });                                                                                           \
  }                                                                                               \
  NPU_ATEN_OP(Name, "self, dim, index, src, out")

NPU_SCATTER_OP(Scatter, scatter_out);
NPU_SCATTER_OP(ScatterAdd, scatter_add_out);

extern "C" NOP_API aclnnStatus aclnnScatterValueGetWorkspaceSize(
    const aclTensor* self, int64_t dim, const aclTensor* index, const aclScalar* value,
    aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnScatterValue", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self"), i = requiredTensor(index, "index");
    at::Tensor o = requiredTensor(out, "out");
    at::Scalar v = hostScalar(value);
    return Prepared{{a, i}, [=]() mutable { at::cpu::scatter_out(o, a, dim, i, v); }, {o}};
  });
}
NPU_ATEN_OP(ScatterValue, "self, dim, index, value, out");

// self[indices] = values (or += with accumulate); NULL entries of indices select whole dims.
extern "C" NOP_API aclnnStatus aclnnIndexPutImplGetWorkspaceSize(
    aclTensor* self, const aclTensorList* indices, const aclTensor* values, bool accumulate,
    bool unsafe, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepareOp("aclnnIndexPutImpl", workspaceSize, executor, [&] {
    at::Tensor a = requiredTensor(self, "self"), v = requiredTensor(values, "values");
    c10::List<std::optional<at::Tensor>> idx = hostOptionalTensors(indices);
    std::vector<at::Tensor> described{a, v};
    for (const auto& i : idx.vec()) described.push_back(i.value_or(at::Tensor()));
    return Prepared{described, [=]() mutable {
                      at::cpu::_index_put_impl_(a, idx, v, accumulate, unsafe);
                    }, {a}};
  });
}
NPU_ATEN_OP(IndexPutImpl, "self, indices, values, accumulate, unsafe");
