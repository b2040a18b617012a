// ForeachOps.cpp - the foreach ops optimizers run over their parameter lists (aclnnForeachXxx): one
// executor, one stream task, for a whole list of tensors. Every tensor of a call is contiguous and
// of one floating dtype; each element computes in float (double for DOUBLE), as PyTorch's kernels.
#include <cmath>
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

enum class Kind { kAddList, kAddScalar, kMulScalar, kDivScalarList, kSqrt, kLerpScalar,
                  kAddcmulScalar, kAddcdivScalarList };

struct KindInfo {
  int inputs;        // tensor lists read (the first may also be the output)
  bool scalar_list;  // one scalar per tensor, else one for all (or none)
};

constexpr KindInfo InfoOf(Kind kind) {
  switch (kind) {
    case Kind::kAddList: return {2, false};
    case Kind::kAddScalar: case Kind::kMulScalar: return {1, false};
    case Kind::kDivScalarList: return {1, true};
    case Kind::kSqrt: return {1, false};
    case Kind::kLerpScalar: return {2, false};
    case Kind::kAddcmulScalar: return {3, false};
    case Kind::kAddcdivScalarList: return {3, true};
  }
  return {};
}

// One tensor of the list: where its operands are, how many elements, its scalar.
struct Item {
  char* out;
  const char* in[3];
  int64_t n;
  double scalar;
};

template <typename T, typename C>
struct Ptrs {
  T* out;
  const T* a;
  const T* b;
  const T* c;
};

// out[i] = f(a[i], b[i], c[i]) in compute type C, over one contiguous range (no __restrict: the
// output is usually the first input).
template <Kind kKind, typename T, typename C>
NOP_VECTOR_CLONES void RunRange(Ptrs<T, C> p, int64_t begin, int64_t end, C s, C alpha) {
  for (int64_t i = begin; i < end; ++i) {
    const C a = Convert<C>(p.a[i]);
    C r;
    if constexpr (kKind == Kind::kAddList) {
      r = a + alpha * Convert<C>(p.b[i]);
    } else if constexpr (kKind == Kind::kAddScalar) {
      r = a + s;
    } else if constexpr (kKind == Kind::kMulScalar) {
      r = a * s;
    } else if constexpr (kKind == Kind::kDivScalarList) {
      r = a / s;
    } else if constexpr (kKind == Kind::kSqrt) {
      r = std::sqrt(a);
    } else if constexpr (kKind == Kind::kLerpScalar) {
      // PyTorch's lerp: the form that is exact at the end the weight is closer to.
      const C b = Convert<C>(p.b[i]);
      r = std::abs(s) < C(0.5) ? a + s * (b - a) : b - (b - a) * (C(1) - s);
    } else if constexpr (kKind == Kind::kAddcmulScalar) {
      r = a + s * Convert<C>(p.b[i]) * Convert<C>(p.c[i]);
    } else {
      r = a + s * Convert<C>(p.b[i]) / Convert<C>(p.c[i]);
    }
    p.out[i] = Convert<T>(r);
  }
}

template <Kind kKind, typename T>
void RunItems(const std::vector<Item>& items, double alpha) {
  using C = ComputeTypeOf<T>;
  for (const Item& item : items) {
    const Ptrs<T, C> p{reinterpret_cast<T*>(item.out), reinterpret_cast<const T*>(item.in[0]),
                       reinterpret_cast<const T*>(item.in[1]), reinterpret_cast<const T*>(item.in[2])};
    const C s = static_cast<C>(item.scalar);
    const C a = static_cast<C>(alpha);
    if (item.n >= kParallelMinElements) {
      ParallelFor(item.n, kParallelMinChunk, [&](int64_t begin, int64_t end) {
        RunRange<kKind, T, C>(p, begin, end, s, a);
      });
    } else {
      RunRange<kKind, T, C>(p, 0, item.n, s, a);
    }
  }
}

template <Kind kKind>
void Dispatch(aclDataType dtype, const std::vector<Item>& items, double alpha) {
  switch (dtype) {
    case ACL_FLOAT: return RunItems<kKind, float>(items, alpha);
    case ACL_DOUBLE: return RunItems<kKind, double>(items, alpha);
    case ACL_FLOAT16: return RunItems<kKind, Half>(items, alpha);
    case ACL_BF16: return RunItems<kKind, BFloat16>(items, alpha);
    default: throw std::logic_error("foreach dtype was not validated");
  }
}

void Run(Kind kind, aclDataType dtype, const std::vector<Item>& items, double alpha) {
  switch (kind) {
    case Kind::kAddList: return Dispatch<Kind::kAddList>(dtype, items, alpha);
    case Kind::kAddScalar: return Dispatch<Kind::kAddScalar>(dtype, items, alpha);
    case Kind::kMulScalar: return Dispatch<Kind::kMulScalar>(dtype, items, alpha);
    case Kind::kDivScalarList: return Dispatch<Kind::kDivScalarList>(dtype, items, alpha);
    case Kind::kSqrt: return Dispatch<Kind::kSqrt>(dtype, items, alpha);
    case Kind::kLerpScalar: return Dispatch<Kind::kLerpScalar>(dtype, items, alpha);
    case Kind::kAddcmulScalar: return Dispatch<Kind::kAddcmulScalar>(dtype, items, alpha);
    case Kind::kAddcdivScalarList: return Dispatch<Kind::kAddcdivScalarList>(dtype, items, alpha);
  }
}

aclnnStatus ForeachGetWorkspaceSize(const char* op, Kind kind,
                                    std::initializer_list<const aclTensorList*> inputs,
                                    const aclScalar* scalar, const aclScalarList* scalars,
                                    const aclScalar* alpha, const aclTensorList* out,
                                    uint64_t* workspace_size, aclOpExecutor** executor) {
  if (workspace_size == nullptr || executor == nullptr || out == nullptr) {
    return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR, op, ": out, workspaceSize or executor is NULL");
  }
  const KindInfo info = InfoOf(kind);
  const size_t count = out->tensors.size();
  for (const aclTensorList* list : inputs) {
    if (list == nullptr) return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR, op, ": a tensor list is NULL");
    if (list->tensors.size() != count) {
      return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": tensor lists of different lengths (",
                      list->tensors.size(), " and ", count, ")");
    }
  }
  if (info.scalar_list && (scalars == nullptr || scalars->scalars.size() != count)) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": needs one scalar per tensor (", count, "), got ",
                    scalars == nullptr ? 0 : scalars->scalars.size());
  }
  const bool needs_scalar = kind == Kind::kAddScalar || kind == Kind::kMulScalar ||
                            kind == Kind::kLerpScalar || kind == Kind::kAddcmulScalar;
  if (needs_scalar && scalar == nullptr) return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR, op, ": scalar is NULL");
  std::vector<Item> items;
  items.reserve(count);
  aclDataType dtype = ACL_DT_UNDEFINED;
  int32_t device = -1;
  for (size_t i = 0; i < count; ++i) {
    const aclTensor* o = out->tensors[i];
    if (o == nullptr) return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR, op, ": out tensor ", i, " is NULL");
    if (dtype == ACL_DT_UNDEFINED) dtype = o->dtype;
    Item item{o->first_element(), {nullptr, nullptr, nullptr}, o->numel(),
              info.scalar_list ? scalars->scalars[i].ToDouble() : (scalar ? scalar->ToDouble() : 0.0)};
    NamedTensor named[4] = {{"out", o}};
    int k = 0;
    for (const aclTensorList* list : inputs) {
      const aclTensor* t = list->tensors[i];
      if (t == nullptr) return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR, op, ": input tensor ", i, " is NULL");
      if (t->dtype != dtype || !std::equal(t->sizes().begin(), t->sizes().end(), o->sizes().begin(),
                                           o->sizes().end()) || !t->is_contiguous()) {
        return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": tensor ", i, " of list ", k + 1, " (",
                        DataTypeName(t->dtype), ShapeString(t->sizes()), ") must be contiguous, of ",
                        DataTypeName(dtype), " and of shape ", ShapeString(o->sizes()));
      }
      item.in[k] = t->first_element();
      named[++k] = NamedTensor{"input", t};
    }
    if (o->dtype != dtype || !IsFloatingType(dtype) || !o->is_contiguous()) {
      return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": out tensor ", i, " (", DataTypeName(o->dtype),
                      ") must be contiguous and of one floating dtype with the rest (",
                      DataTypeName(dtype), ")");
    }
    int32_t item_device = -1;
    if (aclnnStatus s = CheckMemory(op, std::span<const NamedTensor>(named, k + 1), &item_device)) {
      return s;
    }
    if (device == -1) {
      device = item_device;
    } else if (item_device != -1 && item_device != device) {
      return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, op, ": tensor ", i, " is on npu:", item_device,
                      " but the first is on npu:", device);
    }
    items.push_back(item);
  }
  const double alpha_value = alpha ? alpha->ToDouble() : 1.0;
  *executor = NewExecutor(op, device, [kind, dtype, items = std::move(items), alpha_value](void*, uint64_t) {
    Run(kind, dtype, items, alpha_value);
  });
  if (OperandHooksActive()) {
    std::vector<const aclTensor*> in_tensors;
    for (const aclTensorList* list : inputs) {
      in_tensors.insert(in_tensors.end(), list->tensors.begin(), list->tensors.end());
    }
    RecordOperands(*executor, in_tensors, out->tensors);
  }
  *workspace_size = 0;
  for (const aclTensor* o : out->tensors) o->written = true;
  return ACLNN_SUCCESS;
}

}  // namespace
}  // namespace npu::opslib

using npu::opslib::ForeachGetWorkspaceSize;
using npu::opslib::GuardApi;
using Kind = npu::opslib::Kind;

extern "C" {

aclnnStatus aclnnForeachAddListV2GetWorkspaceSize(const aclTensorList* x1, const aclTensorList* x2,
                                                  const aclScalar* alpha, aclTensorList* out,
                                                  uint64_t* workspaceSize, aclOpExecutor** executor) {
  return GuardApi("aclnnForeachAddListV2GetWorkspaceSize", [&] {
    return ForeachGetWorkspaceSize("aclnnForeachAddListV2", Kind::kAddList, {x1, x2}, nullptr,
                                   nullptr, alpha, out, workspaceSize, executor);
  });
}

aclnnStatus aclnnForeachAddScalarV2GetWorkspaceSize(const aclTensorList* x, const aclScalar* scalar,
                                                    aclTensorList* out, uint64_t* workspaceSize,
                                                    aclOpExecutor** executor) {
  return GuardApi("aclnnForeachAddScalarV2GetWorkspaceSize", [&] {
    return ForeachGetWorkspaceSize("aclnnForeachAddScalarV2", Kind::kAddScalar, {x}, scalar,
                                   nullptr, nullptr, out, workspaceSize, executor);
  });
}

aclnnStatus aclnnForeachMulScalarV2GetWorkspaceSize(const aclTensorList* x, const aclScalar* scalar,
                                                    aclTensorList* out, uint64_t* workspaceSize,
                                                    aclOpExecutor** executor) {
  return GuardApi("aclnnForeachMulScalarV2GetWorkspaceSize", [&] {
    return ForeachGetWorkspaceSize("aclnnForeachMulScalarV2", Kind::kMulScalar, {x}, scalar,
                                   nullptr, nullptr, out, workspaceSize, executor);
  });
}

aclnnStatus aclnnForeachDivScalarListGetWorkspaceSize(const aclTensorList* x,
                                                      const aclScalarList* scalars,
                                                      aclTensorList* out, uint64_t* workspaceSize,
                                                      aclOpExecutor** executor) {
  return GuardApi("aclnnForeachDivScalarListGetWorkspaceSize", [&] {
    return ForeachGetWorkspaceSize("aclnnForeachDivScalarList", Kind::kDivScalarList, {x}, nullptr,
                                   scalars, nullptr, out, workspaceSize, executor);
  });
}

aclnnStatus aclnnForeachSqrtGetWorkspaceSize(const aclTensorList* x, aclTensorList* out,
                                             uint64_t* workspaceSize, aclOpExecutor** executor) {
  return GuardApi("aclnnForeachSqrtGetWorkspaceSize", [&] {
    return ForeachGetWorkspaceSize("aclnnForeachSqrt", Kind::kSqrt, {x}, nullptr, nullptr, nullptr,
                                   out, workspaceSize, executor);
  });
}

aclnnStatus aclnnForeachLerpScalarGetWorkspaceSize(const aclTensorList* x1, const aclTensorList* x2,
                                                   const aclScalar* weight, aclTensorList* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return GuardApi("aclnnForeachLerpScalarGetWorkspaceSize", [&] {
    return ForeachGetWorkspaceSize("aclnnForeachLerpScalar", Kind::kLerpScalar, {x1, x2}, weight,
                                   nullptr, nullptr, out, workspaceSize, executor);
  });
}

aclnnStatus aclnnForeachAddcmulScalarV2GetWorkspaceSize(const aclTensorList* x1,
                                                        const aclTensorList* x2,
                                                        const aclTensorList* x3,
                                                        const aclScalar* scalar, aclTensorList* out,
                                                        uint64_t* workspaceSize,
                                                        aclOpExecutor** executor) {
  return GuardApi("aclnnForeachAddcmulScalarV2GetWorkspaceSize", [&] {
    return ForeachGetWorkspaceSize("aclnnForeachAddcmulScalarV2", Kind::kAddcmulScalar,
                                   {x1, x2, x3}, scalar, nullptr, nullptr, out, workspaceSize,
                                   executor);
  });
}

aclnnStatus aclnnForeachAddcdivScalarListGetWorkspaceSize(const aclTensorList* x1,
                                                          const aclTensorList* x2,
                                                          const aclTensorList* x3,
                                                          const aclScalarList* scalars,
                                                          aclTensorList* out,
                                                          uint64_t* workspaceSize,
                                                          aclOpExecutor** executor) {
  return GuardApi("aclnnForeachAddcdivScalarListGetWorkspaceSize", [&] {
    return ForeachGetWorkspaceSize("aclnnForeachAddcdivScalarList", Kind::kAddcdivScalarList,
                                   {x1, x2, x3}, nullptr, scalars, nullptr, out, workspaceSize,
                                   executor);
  });
}

}  // extern "C"

NPU_OPSLIB_DEFINE_OP(ForeachAddListV2, "x1, x2, alpha, out");
NPU_OPSLIB_DEFINE_OP(ForeachAddScalarV2, "x, scalar, out");
NPU_OPSLIB_DEFINE_OP(ForeachMulScalarV2, "x, scalar, out");
NPU_OPSLIB_DEFINE_OP(ForeachDivScalarList, "x, scalars, out");
NPU_OPSLIB_DEFINE_OP(ForeachSqrt, "x, out");
NPU_OPSLIB_DEFINE_OP(ForeachLerpScalar, "x1, x2, weight, out");
NPU_OPSLIB_DEFINE_OP(ForeachAddcmulScalarV2, "x1, x2, x3, scalar, out");
NPU_OPSLIB_DEFINE_OP(ForeachAddcdivScalarList, "x1, x2, x3, scalars, out");
