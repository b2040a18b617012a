// LayerNorm.cpp - aclnnLayerNorm: per row of the normalized dims, mean and variance in one pass
// over memory (the row stays in cache for the second), then out = (x * rstd - mean * rstd) * w + b,
// written straight into the device output, rows split across the thread pool.
#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <vector>

#include "DataTypes.h"
#include "Descriptors.h"
#include "ElementwiseIterator.h"
#include "Error.h"
#include "Executor.h"
#include "OpChecks.h"
#include "OpRegistry.h"
#include "OperandHooks.h"
#include "ThreadPool.h"

namespace npu::opslib {
namespace {

constexpr int kLanes = 16;       // independent partial sums: the compiler vectorises across them
constexpr int64_t kFold = 4096;  // elements summed in the compute type before folding into double

// Sum of (x - shift), or of its squares, over a row.
template <bool kSquared, typename T, typename C>
NOP_VECTOR_CLONES C RowSum(const T* x, int64_t n, C shift) {
  double total = 0;
  for (int64_t start = 0; start < n; start += kFold) {
    const int64_t end = std::min(n, start + kFold);
    C acc[kLanes] = {};
    int64_t i = start;
    for (; i + kLanes <= end; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const C v = Convert<C>(LoadElement(x, i + l)) - shift;
        acc[l] += kSquared ? v * v : v;
      }
    }
    for (; i < end; ++i) {
      const C v = Convert<C>(LoadElement(x, i)) - shift;
      acc[0] += kSquared ? v * v : v;
    }
    C folded = 0;
    for (C a : acc) folded += a;
    total += static_cast<double>(folded);
  }
  return static_cast<C>(total);
}

// y = (x * scale + shift) * w + b, PyTorch's formula (scale = rstd, shift = -mean * rstd).
template <typename T, typename W, typename C>
NOP_VECTOR_CLONES void RowOutput(const T* x, T* y, const W* w, const W* b, int64_t n, C scale, C shift) {
  if (w != nullptr && b != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      const C v = Convert<C>(LoadElement(x, i)) * scale + shift;
      y[i] = Convert<T>(v * Convert<C>(LoadElement(w, i)) + Convert<C>(LoadElement(b, i)));
    }
  } else if (w != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      y[i] = Convert<T>((Convert<C>(LoadElement(x, i)) * scale + shift) * Convert<C>(LoadElement(w, i)));
    }
  } else if (b != nullptr) {
    for (int64_t i = 0; i < n; ++i) {
      y[i] = Convert<T>(Convert<C>(LoadElement(x, i)) * scale + shift + Convert<C>(LoadElement(b, i)));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = Convert<T>(Convert<C>(LoadElement(x, i)) * scale + shift);
  }
}

void StoreStat(void* base, aclDataType dtype, int64_t i, double value) {
  VisitStorageType(dtype, [&](auto zero) {
    using S = decltype(zero);
    static_cast<S*>(base)[i] = Convert<S>(value);
  });
}

struct Job {
  const void* x;
  void* y;
  const void* w;
  const void* b;
  void* mean;
  void* rstd;
  aclDataType stat_type;
  int64_t rows;
  int64_t cols;
  double eps;
};

template <typename T, typename W>
void RunRows(const Job& job, int64_t begin, int64_t end) {
  using C = ComputeTypeOf<T>;
  const int64_t n = job.cols;
  for (int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(job.x) + r * n;
    T* y = static_cast<T*>(job.y) + r * n;
    const C mean = n > 0 ? RowSum<false, T, C>(x, n, C(0)) / static_cast<C>(n) : C(0);
    const C var = n > 0 ? RowSum<true, T, C>(x, n, mean) / static_cast<C>(n) : C(0);
    const C rstd = C(1) / std::sqrt(std::max(var, C(0)) + static_cast<C>(job.eps));
    RowOutput<T, W, C>(x, y, static_cast<const W*>(job.w), static_cast<const W*>(job.b), n, rstd,
                       -rstd * mean);
    if (job.mean) StoreStat(job.mean, job.stat_type, r, static_cast<double>(mean));
    if (job.rstd) StoreStat(job.rstd, job.stat_type, r, static_cast<double>(rstd));
  }
}

template <typename T, typename W>
void Run(const Job& job) {
  const int64_t min_rows = std::max<int64_t>(1, kParallelMinChunk / std::max<int64_t>(job.cols, 1));
  if (job.rows * job.cols < kParallelMinElements) {
    RunRows<T, W>(job, 0, job.rows);
    return;
  }
  ParallelFor(job.rows, min_rows, [&job](int64_t begin, int64_t end) { RunRows<T, W>(job, begin, end); });
}

using RunFn = void (*)(const Job&);

// The kernel for an input dtype and a parameter dtype (the input's, or FLOAT for mixed precision).
RunFn KernelFor(aclDataType input, aclDataType params) {
  const bool mixed = params != input;
  switch (input) {
    case ACL_FLOAT: return &Run<float, float>;
    case ACL_DOUBLE: return &Run<double, double>;
    case ACL_FLOAT16: return mixed ? &Run<Half, float> : &Run<Half, Half>;
    case ACL_BF16: return mixed ? &Run<BFloat16, float> : &Run<BFloat16, BFloat16>;
    default: return nullptr;
  }
}

aclnnStatus LayerNormGetWorkspaceSize(const aclTensor* input, const aclIntArray* normalized_shape,
                                      const aclTensor* weight, const aclTensor* bias, double eps,
                                      aclTensor* out, aclTensor* mean, aclTensor* rstd,
                                      uint64_t* workspace_size, aclOpExecutor** executor) {
  const char* op = "aclnnLayerNorm";
  if (aclnnStatus s = CheckNotNull(op, {{"input", input}, {"out", out}}, workspace_size, executor)) {
    return s;
  }
  if (normalized_shape == nullptr || normalized_shape->values.empty()) {
    return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR, op, ": normalizedShape is NULL or empty");
  }
  const std::vector<int64_t>& shape = normalized_shape->values;
  const size_t axis = input->ndim - std::min(input->ndim, shape.size());
  if (shape.size() > input->ndim ||
      !std::equal(shape.begin(), shape.end(), input->sizes().begin() + static_cast<ptrdiff_t>(axis))) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": normalizedShape ", ShapeString(shape),
                    " is not the trailing shape of input ", ShapeString(input->sizes()));
  }
  const aclDataType dtype = input->dtype;
  if (!IsFloatingType(dtype) || out->dtype != dtype ||
      !std::equal(out->sizes().begin(), out->sizes().end(), input->sizes().begin(), input->sizes().end())) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": input (", DataTypeName(dtype), ShapeString(input->sizes()),
                    ") must be floating point, and out (", DataTypeName(out->dtype),
                    ShapeString(out->sizes()), ") of its dtype and shape");
  }
  int64_t cols = 1;
  for (int64_t d : shape) cols *= d;
  int64_t rows = 1;
  for (size_t d = 0; d < axis; ++d) rows *= input->sizes()[d];
  aclDataType params = dtype;
  for (const aclTensor* p : {weight, bias}) {
    if (p == nullptr) continue;
    if (p->numel() != cols || (p->dtype != dtype && p->dtype != ACL_FLOAT) || !p->is_contiguous()) {
      return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": weight and bias must be contiguous, of ", cols,
                      " elements and of input's dtype or FLOAT, got ", DataTypeName(p->dtype),
                      ShapeString(p->sizes()));
    }
    params = p->dtype;
  }
  if (weight && bias && weight->dtype != bias->dtype) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": weight (", DataTypeName(weight->dtype),
                    ") and bias (", DataTypeName(bias->dtype), ") dtypes differ");
  }
  aclDataType stat_type = ACL_FLOAT;
  for (const aclTensor* s : {mean, rstd}) {
    if (s == nullptr) continue;
    if (s->numel() != rows || !IsFloatingType(s->dtype) || !s->is_contiguous()) {
      return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": mean and rstd must be contiguous floating ",
                      "tensors of ", rows, " elements, got ", DataTypeName(s->dtype), ShapeString(s->sizes()));
    }
    stat_type = s->dtype;
  }
  if (mean && rstd && mean->dtype != rstd->dtype) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": mean and rstd dtypes differ");
  }
  if (!input->is_contiguous() || !out->is_contiguous()) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": input and out must be contiguous (got strides ",
                    ShapeString(input->strides()), " and ", ShapeString(out->strides()), ")");
  }
  std::vector<NamedTensor> named = {{"input", input}, {"out", out}};
  for (const NamedTensor& t : {NamedTensor{"weight", weight}, NamedTensor{"bias", bias},
                               NamedTensor{"mean", mean}, NamedTensor{"rstd", rstd}}) {
    if (t.tensor != nullptr) named.push_back(t);
  }
  int32_t device = -1;
  if (aclnnStatus s = CheckMemory(op, named, &device)) return s;

  auto at = [](const aclTensor* t) -> char* {
    return t == nullptr ? nullptr : t->first_element();
  };
  Job job{at(input), at(out), at(weight), at(bias), at(mean), at(rstd), stat_type, rows, cols, eps};
  RunFn run = KernelFor(dtype, params);
  *executor = NewExecutor(op, device, [job, run](void*, uint64_t) { run(job); });
  if (OperandHooksActive()) {
    const aclTensor* inputs[] = {input, weight, bias};
    const aclTensor* outputs[] = {out, mean, rstd};
    RecordOperands(*executor, inputs, outputs);
  }
  *workspace_size = 0;
  for (const aclTensor* t : {out, mean, rstd}) {
    if (t != nullptr) t->written = true;
  }
  return ACLNN_SUCCESS;
}

}  // namespace
}  // namespace npu::opslib

extern "C" {

aclnnStatus aclnnLayerNormGetWorkspaceSize(const aclTensor* input, const aclIntArray* normalizedShape,
                                           const aclTensor* weight, const aclTensor* bias, double eps,
                                           aclTensor* out, aclTensor* mean, aclTensor* rstd,
                                           uint64_t* workspaceSize, aclOpExecutor** executor) {
  return npu::opslib::GuardApi("aclnnLayerNormGetWorkspaceSize", [&] {
    return npu::opslib::LayerNormGetWorkspaceSize(input, normalizedShape, weight, bias, eps, out,
                                                  mean, rstd, workspaceSize, executor);
  });
}

}  // extern "C"

NPU_OPSLIB_DEFINE_OP(LayerNorm, "input, normalizedShape, weight, bias, eps, out, mean, rstd");
