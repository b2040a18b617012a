// npu/op_signature.h - an op's parameter kinds as a string, one letter per parameter of its
// XxxGetWorkspaceSize (without the trailing workspaceSize and executor), so that a launch can check
// its arguments against the op instead of crashing inside it. C++ only.
#ifndef NPU_OP_SIGNATURE_H_
#define NPU_OP_SIGNATURE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "npu/opslib.h"

namespace npu::opslib {

// The kind letters (also aclnnOpEntry::param_kinds):
//   T tensor   S scalar   I int array   L tensor list   A scalar list   s string (const char*)
//   b bool     c int8     C uint8       h int16         H uint16        i int32   u uint32
//   l int64    m uint64   f float       d double        p any other pointer      ? anything else
template <typename T>
constexpr char KindOf() {
  using U = std::remove_cv_t<std::remove_reference_t<T>>;
  if constexpr (std::is_pointer_v<U>) {
    using P = std::remove_cv_t<std::remove_pointer_t<U>>;
    if constexpr (std::is_same_v<P, aclTensor>) return 'T';
    else if constexpr (std::is_same_v<P, aclScalar>) return 'S';
    else if constexpr (std::is_same_v<P, aclIntArray>) return 'I';
    else if constexpr (std::is_same_v<P, aclTensorList>) return 'L';
    else if constexpr (std::is_same_v<P, aclScalarList>) return 'A';
    else if constexpr (std::is_same_v<P, char>) return 's';
    else return 'p';
  } else if constexpr (std::is_enum_v<U>) {
    return KindOf<std::underlying_type_t<U>>();
  } else if constexpr (std::is_same_v<U, bool>) {
    return 'b';
  } else if constexpr (std::is_integral_v<U>) {
    constexpr bool is_signed = std::is_signed_v<U>;
    if constexpr (sizeof(U) == 1) return is_signed ? 'c' : 'C';
    else if constexpr (sizeof(U) == 2) return is_signed ? 'h' : 'H';
    else if constexpr (sizeof(U) == 4) return is_signed ? 'i' : 'u';
    else return is_signed ? 'l' : 'm';
  } else if constexpr (std::is_same_v<U, float>) {
    return 'f';
  } else if constexpr (std::is_same_v<U, double>) {
    return 'd';
  } else {
    return '?';
  }
}

// "a tensor", "an int64", ...: how messages name a kind.
constexpr const char* KindName(char kind) {
  switch (kind) {
    case 'T': return "a tensor";
    case 'S': return "a scalar";
    case 'I': return "an int array";
    case 'L': return "a tensor list";
    case 'A': return "a scalar list";
    case 's': return "a string";
    case 'b': return "a bool";
    case 'c': return "an int8";
    case 'C': return "a uint8";
    case 'h': return "an int16";
    case 'H': return "a uint16";
    case 'i': return "an int32";
    case 'u': return "a uint32";
    case 'l': return "an int64";
    case 'm': return "a uint64";
    case 'f': return "a float";
    case 'd': return "a double";
    case 'p': return "a pointer";
    default: return "a value of another type";
  }
}

constexpr bool IsIntegerKind(char kind) {
  return kind == 'b' || kind == 'c' || kind == 'C' || kind == 'h' || kind == 'H' || kind == 'i' ||
         kind == 'u' || kind == 'l' || kind == 'm';
}

// Whether an argument of kind `given` may be passed where the op takes `expected`. Integers of any
// width (and bool) pass for one another: launches widen them to 64 bits, and a parameter reads its
// low bits. Everything else must match: a number where a descriptor is expected is what crashes.
constexpr bool KindAccepts(char expected, char given) {
  return expected == given || (IsIntegerKind(expected) && IsIntegerKind(given)) || expected == '?';
}

// The kinds of a GetWorkspaceSize function type: every parameter but the trailing two.
template <typename F>
struct ParamKinds;
template <typename R, typename... P>
struct ParamKinds<R (*)(P...)> {
  static constexpr std::size_t kCount = sizeof...(P) >= 2 ? sizeof...(P) - 2 : 0;
  static constexpr std::array<char, sizeof...(P) + 1> kAll{KindOf<P>()..., '\0'};
  static constexpr std::array<char, kCount + 1> Make() {
    std::array<char, kCount + 1> out{};
    for (std::size_t i = 0; i < kCount; ++i) out[i] = kAll[i];
    out[kCount] = '\0';
    return out;
  }
  static constexpr std::array<char, kCount + 1> kValue = Make();
};

// The number of comma-separated names in "self, other, alpha, out" (0 for "").
constexpr std::size_t CountNames(const char* names) {
  std::size_t n = 0;
  bool in_name = false;
  for (; *names != '\0'; ++names) {
    if (*names == ',') {
      in_name = false;
    } else if (*names != ' ' && !in_name) {
      in_name = true;
      ++n;
    }
  }
  return n;
}

}  // namespace npu::opslib

// The kinds string of aclnn<Name>GetWorkspaceSize, checked at compile time against its parameter
// names: registration macros pass both to the registry.
#define NPU_OPSLIB_PARAM_KINDS(get_workspace_size, names)                                                  \
  ([]() -> const char* {                                                                                   \
    using Kinds = ::npu::opslib::ParamKinds<decltype(&get_workspace_size)>;                                \
    static_assert(::npu::opslib::CountNames(names) == Kinds::kCount,                                       \
                  "the parameter names given to the op's registration do not match its GetWorkspaceSize"); \
    return Kinds::kValue.data();                                                                           \
  }())

#endif  // NPU_OP_SIGNATURE_H_
