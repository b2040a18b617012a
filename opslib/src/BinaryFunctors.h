// BinaryFunctors.h - the element functions of Add, Sub, Mul and Div (tensor and scalar forms):
// integer arithmetic wraps as in PyTorch, bool results are logical or / and.
#ifndef NPU_OPSLIB_SRC_BINARY_FUNCTORS_H_
#define NPU_OPSLIB_SRC_BINARY_FUNCTORS_H_

#include <cstdint>
#include <type_traits>

#include "Descriptors.h"

namespace npu::opslib {

enum class BinaryKind { kAdd, kSub, kMul, kDiv };

// Integer arithmetic wraps like PyTorch's; going through uint64 keeps it defined in C++.
template <typename C>
C Plus(C a, C b) {
  if constexpr (std::is_same_v<C, int64_t>) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}
template <typename C>
C Minus(C a, C b) {
  if constexpr (std::is_same_v<C, int64_t>) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  } else {
    return a - b;
  }
}
template <typename C>
C Times(C a, C b) {
  if constexpr (std::is_same_v<C, int64_t>) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  } else {
    return a * b;
  }
}

// alpha == 1 gets its own functors: the common case, one multiply less per element.
template <typename C>
struct AddFn {
  C operator()(C a, C b) const { return Plus(a, b); }
};
template <typename C>
struct AddScaledFn {
  C alpha;
  C operator()(C a, C b) const { return Plus(a, Times(alpha, b)); }
};
template <typename C>
struct SubFn {
  C operator()(C a, C b) const { return Minus(a, b); }
};
template <typename C>
struct SubScaledFn {
  C alpha;
  C operator()(C a, C b) const { return Minus(a, Times(alpha, b)); }
};
template <typename C>
struct MulFn {
  C operator()(C a, C b) const { return Times(a, b); }
};
template <typename C>
struct DivFn {
  C operator()(C a, C b) const { return a / b; }
};
// Bool results: add is a logical or (of self and alpha * other), mul a logical and.
struct LogicalAddFn {
  bool alpha;
  bool operator()(bool a, bool b) const { return a || (alpha && b); }
};
struct LogicalMulFn {
  bool operator()(bool a, bool b) const { return a && b; }
};

template <typename C>
C AlphaAs(const aclScalar* alpha) {
  if (alpha == nullptr) return C(1);
  if constexpr (std::is_same_v<C, int64_t>) {
    return alpha->ToInt64();
  } else {
    return static_cast<C>(alpha->ToDouble());
  }
}

}  // namespace npu::opslib

#endif  // NPU_OPSLIB_SRC_BINARY_FUNCTORS_H_
