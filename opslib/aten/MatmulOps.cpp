// MatmulOps.cpp - matrix products: mm, bmm, addmm, baddbmm (matmul and linear decompose into these).
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/baddbmm_cpu_dispatch.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {
bool reduced(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}
// Float16 / bfloat16 products accumulate in float32 and round once, as NPU cube units do. The upcast
// keeps the operands' strides, so the float32 kernel is the one a float32 caller would get.
at::Tensor wide(const at::Tensor& t) { return reduced(t) ? t.to(at::kFloat) : t; }
}  // namespace

// out = self @ mat2 (2-d; Mm) or per batch (3-d; BatchMatMul). cubeMathType is accepted for
// signature compatibility; float16 / bfloat16 accumulate in float32.
#define NPU_MATMUL_OP(Name, fn)                                                                  \
  extern "C" NOP_API aclnnStatus aclnn##Name##GetWorkspaceSize(                                  \
      const aclTensor* self, const aclTensor* mat2, aclTensor* out, int8_t cubeMathType,         \
      uint64_t* workspaceSize, aclOpExecutor** executor) {                                       \
    return prepareOp("aclnn" #Name, workspaceSize, executor, [&] {                               \
      at::Tensor a = requiredTensor(self, "self"), b = requiredTensor(mat2, "mat2");             \
      at::Tensor o = requiredTensor(out, "out");                                                 \
      return Prepared{{a, b}, [a, b, o]() mutable {                                              \
        if (reduced(a) || reduced(b) || reduced(o)) {                                            \
          o.copy_(at::cpu::fn(wide(a), wide(b)));                                                \
        } else {                                                                                 \
          at::cpu::fn##_out(o, a, b);                                                            \
        }                                                                                        \
      }, {o}};                                                                                  \
    });                                                                                          \
  }                                                                                              \
  NPU_ATEN_OP(Name, "self, mat2, out, cubeMathType")

NPU_MATMUL_OP(Mm, mm);
NPU_MATMUL_OP(BatchMatMul, bmm);

// out = beta * self + alpha * (mat1 @ mat2), 2-d (Addmm) or batched (Baddbmm).
#define NPU_ADD_MATMUL_OP(Name, fn)                                                              \
  extern "C" NOP_API aclnnStatus aclnn##Name##GetWorkspaceSize(                                  \
      const aclTensor* self, const aclTensor* mat1, const aclTensor* mat2, const aclScalar* beta, \
      const aclScalar* alpha, aclTensor* out, int8_t cubeMathType, uint64_t* workspaceSize,      \
      aclOpExecutor** executor) {                                                                \
    return prepareOp("aclnn" #Name, workspaceSize, executor, [&] {                               \
      at::Tensor s = requiredTensor(self, "self"), a = requiredTensor(mat1, "mat1");             \
      at::Tensor b = requiredTensor(mat2, "mat2"), o = requiredTensor(out, "out");               \
      at::Scalar be = hostScalar(beta), al = hostScalar(alpha);                                  \
      return Prepared{{s, a, b}, [s, a, b, o, be, al]() mutable {                                \
                        if (reduced(s) || reduced(a) || reduced(b) || reduced(o)) {              \
                          o.copy_(at::cpu::fn(wide(s), wide(a), wide(b), be, al));               \
                        } else {                                                                 \
                          at::cpu::fn##_out(o, s, a, b, be, al);                                 \
                        }                                                                        \
                      }, {o}};                                                                                   \
    });                                                                                          \
  }                                                                                              \
  NPU_ATEN_OP(Name, "self, mat1, mat2, beta, alpha, out, cubeMathType")

NPU_ADD_MATMUL_OP(Addmm, addmm);
NPU_ADD_MATMUL_OP(Baddbmm, baddbmm);
