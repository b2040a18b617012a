// ElementwiseIterator.h - geometry of an elementwise op (inputs broadcast to out's shape, dims
// sorted and coalesced) and the loops running an op over it: a tight loop for contiguous operands
// of out's dtype, and a blocked N-d loop converting through compute-type buffers for the rest.
#ifndef NPU_OPSLIB_SRC_ELEMENTWISE_ITERATOR_H_
#define NPU_OPSLIB_SRC_ELEMENTWISE_ITERATOR_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "DataTypes.h"
#include "Descriptors.h"
#include "Executor.h"
#include "ThreadPool.h"

// On x86-64 Linux (GCC) the compute loops are compiled for AVX-512, for AVX2 + FMA and for the
// SSE2 baseline, and the loader picks the best for the host (ifunc), as PyTorch's CPU kernels do:
// 4 to 16 lanes is a 2-5x difference for the compute-bound ops (exp, tanh, sigmoid). Not under
// sanitizers: ifunc resolvers run during relocation, before a sanitizer's runtime is set up.
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define NOP_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define NOP_VECTOR_CLONES
#endif

namespace npu::opslib {

inline constexpr int kMaxOperands = 3;  // out and up to two inputs
// Kernels from this size on are split across the pool; smaller ones are not worth the hand-off.
inline constexpr int64_t kParallelMinElements = 64 * 1024;
inline constexpr int64_t kParallelMinChunk = 16 * 1024;

// Sizes and per-operand strides of the iteration dims. Kept inline for the few dims an op has after
// coalescing (almost always 1 to 3), so that a plan, and the executor holding it, is one block.
class PlanDims {
 public:
  void Resize(int dims) {
    dims_ = dims;
    if (dims > kInlineDims) heap_.assign(static_cast<size_t>(dims) * (kMaxOperands + 1), 0);
  }
  int count() const { return dims_; }
  int64_t& size(int d) { return Base()[d]; }
  int64_t size(int d) const { return Base()[d]; }
  int64_t& stride(int operand, int d) { return Base()[(operand + 1) * dims_ + d]; }
  int64_t stride(int operand, int d) const { return Base()[(operand + 1) * dims_ + d]; }

 private:
  static constexpr int kInlineDims = 6;
  int64_t* Base() { return dims_ <= kInlineDims ? inline_.data() : heap_.data(); }
  const int64_t* Base() const { return dims_ <= kInlineDims ? inline_.data() : heap_.data(); }

  // The count and the heap vector (whose destructor the worker runs) before the inline array, so
  // that a 1-dim plan's worker reads one stretch of memory.
  int dims_ = 0;
  std::vector<int64_t> heap_;
  std::array<int64_t, kInlineDims * (kMaxOperands + 1)> inline_{};
};

// Operand 0 is out, then the inputs in order. Strides are in elements of each operand's own type,
// with 0 along broadcast dims. Holds no descriptor: kernels capture it by value.
// What a kernel reads comes first, so that a small op's worker touches few of its cache lines.
struct ElementwisePlan {
  int num_operands = 0;
  bool contiguous = false;  // a single dim with unit strides for every operand
  bool same_dtype = false;  // every input has out's dtype
  int64_t numel = 0;
  std::array<char*, kMaxOperands> data{};  // element 0 of each view (storage base + offset)
  std::array<aclDataType, kMaxOperands> dtypes{};
  PlanDims dims;  // outermost first; one dim at least unless numel == 0
};

// The plan for out = f(inputs...); the inputs must already be known to broadcast to out. Dims are
// ordered by out's strides (so an op on transposed operands still walks memory in order), size-1
// dims dropped and neighbours merged where every operand allows it.
ElementwisePlan MakeElementwisePlan(const aclTensor& out, std::span<const aclTensor* const> inputs);

// The type an op computes in for a given out dtype: float for the float types up to 32 bits,
// double for DOUBLE, int64 for the integer types and bool for BOOL.
template <typename T>
using ComputeTypeOf = std::conditional_t<
    std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> || std::is_same_v<T, float>, float,
    std::conditional_t<std::is_same_v<T, double>, double,
                       std::conditional_t<std::is_same_v<T, bool>, bool, int64_t>>>;

enum class ComputeKind { kFloat, kDouble, kInt64, kBool };

constexpr ComputeKind ComputeKindOf(aclDataType out_type) {
  switch (out_type) {
    case ACL_FLOAT: case ACL_FLOAT16: case ACL_BF16: return ComputeKind::kFloat;
    case ACL_DOUBLE: return ComputeKind::kDouble;
    case ACL_BOOL: return ComputeKind::kBool;
    default: return ComputeKind::kInt64;
  }
}

namespace detail {

template <typename C>
using LoadFn = void (*)(const char* data, int64_t offset, int64_t stride, int64_t n, C* dst);
template <typename C>
using StoreFn = void (*)(char* data, int64_t offset, int64_t stride, int64_t n, const C* src);

// n elements of type T from data[offset], data[offset + stride], ... converted to C.
template <typename T, typename C>
void LoadAs(const char* data, int64_t offset, int64_t stride, int64_t n, C* dst) {
  const T* src = reinterpret_cast<const T*>(data) + offset;
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = Convert<C>(LoadElement(src, i));
  } else if (stride == 0) {  // broadcast along the row: convert once
    const C value = Convert<C>(LoadElement(src, 0));
    for (int64_t i = 0; i < n; ++i) dst[i] = value;
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = Convert<C>(LoadElement(src, i * stride));
  }
}

template <typename T, typename C>
void StoreAs(char* data, int64_t offset, int64_t stride, int64_t n, const C* src) {
  T* dst = reinterpret_cast<T*>(data) + offset;
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = Convert<T>(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i * stride] = Convert<T>(src[i]);
  }
}

template <typename C>
LoadFn<C> LoaderFor(aclDataType type) {
  LoadFn<C> fn = nullptr;
  VisitStorageType(type, [&](auto tag) { fn = &LoadAs<decltype(tag), C>; });
  return fn;
}

template <typename C>
StoreFn<C> StorerFor(aclDataType type) {
  StoreFn<C> fn = nullptr;
  VisitStorageType(type, [&](auto tag) { fn = &StoreAs<decltype(tag), C>; });
  return fn;
}

// Memory of this dtype can be used as C values in place. Never for bool: its bytes are not
// guaranteed to be 0 / 1.
template <typename C>
constexpr bool IsDirect(aclDataType type) {
  if constexpr (std::is_same_v<C, float>) return type == ACL_FLOAT;
  if constexpr (std::is_same_v<C, double>) return type == ACL_DOUBLE;
  if constexpr (std::is_same_v<C, int64_t>) return type == ACL_INT64;
  return false;
}

// ---- Contiguous operands of out's dtype: plain loops the compiler vectorises. An exactly aliased
// operand (in-place op) gets its own variant so that every pointer can be __restrict.

template <typename T, typename C, typename Op>
NOP_VECTOR_CLONES void ContiguousUnary(T* __restrict out, const T* __restrict in, int64_t n, const Op op) {
  for (int64_t i = 0; i < n; ++i) out[i] = Convert<T>(op(Convert<C>(LoadElement(in, i))));
}

template <typename T, typename C, typename Op>
NOP_VECTOR_CLONES void ContiguousUnaryInPlace(T* __restrict out, int64_t n, const Op op) {
  for (int64_t i = 0; i < n; ++i) out[i] = Convert<T>(op(Convert<C>(LoadElement<T>(out, i))));
}

template <typename T, typename C, typename Op>
NOP_VECTOR_CLONES void ContiguousBinary(T* __restrict out, const T* __restrict a, const T* __restrict b, int64_t n,
                      const Op op) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = Convert<T>(op(Convert<C>(LoadElement(a, i)), Convert<C>(LoadElement(b, i))));
  }
}

// out = op(out, other) when other_is_rhs, else op(other, out).
template <typename T, typename C, bool kOtherIsRhs, typename Op>
NOP_VECTOR_CLONES void ContiguousBinaryInPlace(T* __restrict out, const T* __restrict other, int64_t n, const Op op) {
  for (int64_t i = 0; i < n; ++i) {
    const C mine = Convert<C>(LoadElement<T>(out, i));
    const C theirs = Convert<C>(LoadElement(other, i));
    out[i] = Convert<T>(kOtherIsRhs ? op(mine, theirs) : op(theirs, mine));
  }
}

template <typename T, typename C, typename Op>
NOP_VECTOR_CLONES void ContiguousBinarySelf(T* __restrict out, int64_t n, const Op op) {
  for (int64_t i = 0; i < n; ++i) {
    const C value = Convert<C>(LoadElement<T>(out, i));
    out[i] = Convert<T>(op(value, value));
  }
}

template <typename C, int kInputs, typename Op>
void RunContiguous(const ElementwisePlan& plan, const Op& op, int64_t begin, int64_t end) {
  const int64_t n = end - begin;
  VisitStorageType(plan.dtypes[0], [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<ComputeTypeOf<T>, C>) {
      T* out = reinterpret_cast<T*>(plan.data[0]) + begin;
      const T* a = reinterpret_cast<const T*>(plan.data[1]) + begin;
      if constexpr (kInputs == 1) {
        if (out == a) {
          ContiguousUnaryInPlace<T, C>(out, n, op);
        } else {
          ContiguousUnary<T, C>(out, a, n, op);
        }
      } else {
        const T* b = reinterpret_cast<const T*>(plan.data[2]) + begin;
        if (out != a && out != b) {
          ContiguousBinary<T, C>(out, a, b, n, op);
        } else if (out == a && out == b) {
          ContiguousBinarySelf<T, C>(out, n, op);
        } else if (out == a) {
          ContiguousBinaryInPlace<T, C, true>(out, b, n, op);
        } else {
          ContiguousBinaryInPlace<T, C, false>(out, a, n, op);
        }
      }
    }
  });
}

// ---- Everything else: rows of the innermost dim, processed in blocks converted to C.

inline constexpr int64_t kBlock = 256;  // values per operand per step: a few KB, stays in L1

// The op over one block of compute-type values. No __restrict: out may be an input (in place).
template <typename C, typename Op>
NOP_VECTOR_CLONES void ComputeBlock(C* out, const C* a, int64_t n, const Op op) {
  for (int64_t j = 0; j < n; ++j) out[j] = op(a[j]);
}

template <typename C, typename Op>
NOP_VECTOR_CLONES void ComputeBlock(C* out, const C* a, const C* b, int64_t n, const Op op) {
  for (int64_t j = 0; j < n; ++j) out[j] = op(a[j], b[j]);
}

template <typename C, int kOperands>
struct RowAccess {
  std::array<LoadFn<C>, kOperands> load{};  // [0] unused
  StoreFn<C> store = nullptr;
  std::array<bool, kOperands> direct{};
};

template <typename C, int kInputs, typename Op>
void RunRow(const ElementwisePlan& plan, const RowAccess<C, kInputs + 1>& access,
            const std::array<int64_t, kInputs + 1>& offset,
            const std::array<int64_t, kInputs + 1>& stride, int64_t n, const Op& op) {
  C in_buffer[kInputs][kBlock];
  C out_buffer[kBlock];
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t len = std::min(kBlock, n - start);
    const C* in[kInputs];
    for (int k = 0; k < kInputs; ++k) {
      const int operand = k + 1;
      const int64_t first = offset[operand] + start * stride[operand];
      if (access.direct[operand] && stride[operand] == 1) {
        in[k] = reinterpret_cast<const C*>(plan.data[operand]) + first;
      } else {
        access.load[operand](plan.data[operand], first, stride[operand], len, in_buffer[k]);
        in[k] = in_buffer[k];
      }
    }
    const int64_t out_first = offset[0] + start * stride[0];
    const bool out_direct = access.direct[0] && stride[0] == 1;
    C* out = out_direct ? reinterpret_cast<C*>(plan.data[0]) + out_first : out_buffer;
    if constexpr (kInputs == 1) {
      ComputeBlock(out, in[0], len, op);
    } else {
      ComputeBlock(out, in[0], in[1], len, op);
    }
    if (!out_direct) access.store(plan.data[0], out_first, stride[0], len, out_buffer);
  }
}

template <typename C, int kInputs, typename Op>
void RunStrided(const ElementwisePlan& plan, const Op& op, int64_t begin, int64_t end) {
  constexpr int kOperands = kInputs + 1;
  RowAccess<C, kOperands> access;
  access.store = StorerFor<C>(plan.dtypes[0]);
  for (int k = 0; k < kOperands; ++k) {
    if (k > 0) access.load[k] = LoaderFor<C>(plan.dtypes[k]);
    access.direct[k] = IsDirect<C>(plan.dtypes[k]);
  }
  const PlanDims& dims = plan.dims;
  const int inner = dims.count() - 1;
  // Position of `begin` as a multi-index, and the matching element offset of every operand.
  constexpr int kStackDims = 16;
  int64_t stack_index[kStackDims];
  std::vector<int64_t> heap_index(dims.count() > kStackDims ? dims.count() : 0);
  int64_t* index = dims.count() > kStackDims ? heap_index.data() : stack_index;
  std::array<int64_t, kOperands> offset{};
  int64_t rest = begin;
  for (int d = inner; d >= 0; --d) {
    index[d] = rest % dims.size(d);
    rest /= dims.size(d);
    for (int k = 0; k < kOperands; ++k) offset[k] += index[d] * dims.stride(k, d);
  }
  std::array<int64_t, kOperands> inner_stride{};
  for (int k = 0; k < kOperands; ++k) inner_stride[k] = dims.stride(k, inner);

  int64_t position = begin;
  while (position < end) {
    const int64_t len = std::min(dims.size(inner) - index[inner], end - position);
    RunRow<C, kInputs>(plan, access, offset, inner_stride, len, op);
    position += len;
    if (position >= end) break;
    // The row is done (otherwise we would have reached `end`): carry into the outer dims.
    index[inner] += len;
    for (int k = 0; k < kOperands; ++k) offset[k] += len * inner_stride[k];
    for (int d = inner; d > 0 && index[d] == dims.size(d); --d) {
      index[d] = 0;
      ++index[d - 1];
      for (int k = 0; k < kOperands; ++k) {
        offset[k] += dims.stride(k, d - 1) - dims.size(d) * dims.stride(k, d);
      }
    }
  }
}

}  // namespace detail

// Runs out = op(inputs...) over the plan in compute type C, split across the pool when large.
template <typename C, int kInputs, typename Op>
void RunElementwise(const ElementwisePlan& plan, const Op& op) {
  if (plan.numel == 0) return;
  const auto range = [&](int64_t begin, int64_t end) {
    if (plan.contiguous && plan.same_dtype) {
      detail::RunContiguous<C, kInputs>(plan, op, begin, end);
    } else {
      detail::RunStrided<C, kInputs>(plan, op, begin, end);
    }
  };
  if (plan.numel >= kParallelMinElements) {
    ParallelFor(plan.numel, kParallelMinChunk, range);
  } else {
    range(0, plan.numel);
  }
}

// The kernel of an elementwise executor: the plan and the op, both by value.
template <typename C, int kInputs, typename Op>
struct ElementwiseKernel {
  ElementwisePlan plan;
  Op op;
  void operator()(void*, uint64_t) const { RunElementwise<C, kInputs>(plan, op); }
};

template <typename C, int kInputs, typename Op>
aclOpExecutor* NewElementwiseExecutor(const char* op_name, int32_t device, ElementwisePlan plan,
                                      Op op) {
  const bool short_run = plan.numel <= kShortRunElements;
  aclOpExecutor* executor = NewExecutor(op_name, device, ElementwiseKernel<C, kInputs, Op>{std::move(plan), op});
  executor->short_run = short_run;
  return executor;
}

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_ELEMENTWISE_ITERATOR_H_
