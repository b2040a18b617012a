// MatmulOps.cpp - matrix products: mm, bmm, addmm, baddbmm (matmul and linear decompose into these).
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/baddbmm_cpu_dispatch.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>

#include <algorithm>

#include "AtenOpSupport.h"

using namespace npu::opslib::aten;

namespace {
bool reduced(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}
// Float16 / bfloat16 products accumulate in float32 and round once, as NPU cube units do. The upcast
// keeps the operands' strides, so the float32 kernel is the one a float32 caller would get.
at::Tensor wide(const at::Tensor& t) { return reduced(t) ? t.to(at::kFloat) : t; }

// A large product runs as row panels, and before each one the worker's thread team is sized for the host's state
// at that moment: an empty pass of the op library's parallel loop (aclnnParallelFor) does that on a stream
// worker. The BLAS fixes its thread count when a GEMM starts, so an unsplit GEMM that starts while the host is still
// launching keeps the smaller team to the end, even once the host waits for it: a 2048 x 2048 product launched and
// waited for at once ran on one of two cores.
constexpr int64_t kPanelWork = int64_t{1} << 26;  // multiply-adds below which a product runs whole
constexpr int64_t kPanels = 8;
constexpr int64_t kMinPanelRows = 64;

// fn(begin, end) per row panel of an m-row product of `work` multiply-adds (one panel when it is small).
template <typename F>
void byPanels(int64_t m, int64_t work, const F& fn) {
  if (work < kPanelWork || m < 2 * kMinPanelRows) {
    fn(int64_t{0}, m);
    return;
  }
  const int64_t rows = std::max(kMinPanelRows, (m + kPanels - 1) / kPanels);
  for (int64_t begin = 0; begin < m; begin += rows) {
    // Two chunks: the op library runs a single one inline, without the host process's loop that sizes the team.
    aclnnParallelFor(2, 1, nullptr, [](void*, int64_t, int64_t) {});
    fn(begin, std::min(m, begin + rows));
  }
}

// The float32 products: mm and addmm (always 2-d) by row panels, bmm and baddbmm whole.
void mmFloat(at::Tensor& o, const at::Tensor& a, const at::Tensor& b) {
  byPanels(a.size(0), a.size(0) * a.size(1) * b.size(1), [&](int64_t begin, int64_t end) {
    at::Tensor part = o.narrow(0, begin, end - begin);
    at::cpu::mm_out(part, a.narrow(0, begin, end - begin), b);
  });
}

void bmmFloat(at::Tensor& o, const at::Tensor& a, const at::Tensor& b) { at::cpu::bmm_out(o, a, b); }

// self is broadcast to out's shape first, so that its rows split with out's.
void addmmFloat(at::Tensor& o, const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                const at::Scalar& beta, const at::Scalar& alpha) {
  const at::Tensor full = self.expand({a.size(0), b.size(1)});
  byPanels(a.size(0), a.size(0) * a.size(1) * b.size(1), [&](int64_t begin, int64_t end) {
    at::Tensor part = o.narrow(0, begin, end - begin);
    at::cpu::addmm_out(part, full.narrow(0, begin, end - begin), a.narrow(0, begin, end - begin), b, beta, alpha);
  });
}

void baddbmmFloat(at::Tensor& o, const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                  const at::Scalar& beta, const at::Scalar& alpha) {
  at::cpu::baddbmm_out(o, self, a, b, beta, alpha);
}
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
          fn##Float(o, a, b);                                                                    \
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
                          fn##Float(o, s, a, b, be, al);                                         \
                        }                                                                        \
                      }, {o}};                                                                                   \
    });                                                                                          \
  }                                                                                              \
  NPU_ATEN_OP(Name, "self, mat1, mat2, beta, alpha, out, cubeMathType")

NPU_ADD_MATMUL_OP(Addmm, addmm);
NPU_ADD_MATMUL_OP(Baddbmm, baddbmm);
