// FormatStaging.h - private formats at the two doors every op goes through: a named device op's
// operands (EXEC_NPU_CMD) and the boxed fallback's stack (generic executor, CPU fallback).
// Operands a device op takes natively keep their format (elementwise ops over agreeing formats,
// convolution / batch norm in NC1HWC0 with FRACTAL_Z weights, matmul in FRACTAL_NZ, when
// allow_internal_format is set); every other private operand is replaced by a base-format
// stand-in made by TransData, and converted back when the op wrote it.
#pragma once

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <vector>

#include "FormatCast.h"
#include "FormatHelper.h"
#include "StorageDesc.h"

struct aclTensor;

namespace at_npu::native {

// Device ops with a format rule even when no private storage exists yet (their inputs are
// converted to the native format under allow_internal_format).
bool convertsToNativeFormat(const char* op);

inline bool formatsInPlay() { return anyPrivateFormat() || allowInternalFormat(); }

inline bool hasPrivateFormat(const at::Tensor& t) { return privateDesc(t) != nullptr; }
inline bool hasPrivateFormat(const std::optional<at::Tensor>& t) { return t.has_value() && hasPrivateFormat(*t); }
inline bool hasPrivateFormat(at::TensorList tensors) {
  for (const at::Tensor& t : tensors) {
    if (hasPrivateFormat(t)) return true;
  }
  return false;
}
inline bool hasPrivateFormat(const c10::List<std::optional<at::Tensor>>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::optional<at::Tensor> t = tensors.get(i);
    if (hasPrivateFormat(t)) return true;
  }
  return false;
}
template <typename T>
bool hasPrivateFormat(const T&) {
  return false;
}

// True when a device-op launch must go through FormatStaging. For plain tensors the hot path's
// test is formatsInPlay(): two relaxed loads, false until a private storage exists or
// allow_internal_format is set.
template <typename... Args>
bool formatStagingNeeded(const char* op, const Args&... args) {
  if (C10_LIKELY(!formatsInPlay())) return false;
  if (allowInternalFormat() && convertsToNativeFormat(op)) return true;
  return (hasPrivateFormat(args) || ...);
}

class FormatStaging {
 public:
  explicit FormatStaging(const char* op);
  ~FormatStaging();
  FormatStaging(const FormatStaging&) = delete;
  FormatStaging& operator=(const FormatStaging&) = delete;

  // The op's arguments, in order (non-tensor ones are skipped).
  void add(const at::Tensor& t);
  void add(const std::optional<at::Tensor>& t);
  void add(at::TensorList tensors);
  void add(const c10::List<std::optional<at::Tensor>>& tensors);
  template <typename T>
  void add(const T&) {}

  // Plans every operand (queuing the TransData of converted inputs) and becomes the thread's
  // active staging, which ConvertType consults.
  void begin();
  aclTensor* describe(const at::Tensor& t);
  // After XxxGetWorkspaceSize: which stand-ins the op writes (aclIsOutputTensor).
  void noteWrittenOperands();
  // Converts written stand-ins back into their private storages.
  void end();

  static FormatStaging* active();

 private:
  enum class Plan { kPlain, kFlat, kNative, kStandIn };
  struct Operand {
    at::Tensor tensor;
    int index;  // position among the op's tensor arguments; -1 inside a tensor list
    Plan plan = Plan::kPlain;
    at::Tensor stand_in;  // kStandIn: a base-layout view, or a whole tensor in the native format
  };
  void planElementwise();
  void planNative();
  Operand* find(const at::Tensor& t);

  const char* op_;
  std::vector<Operand> operands_;
  int next_index_ = 0;
  BaseLayouts layouts_;
  std::vector<std::pair<aclTensor*, at::Tensor>> described_;  // descriptor -> the operand it shows
  FormatStaging* previous_ = nullptr;
  bool activated_ = false;
};

// The boxed fallback's door: runs `run` on a stack whose private-format tensors are replaced by
// base-layout stand-ins, then converts mutated ones back and returns the original tensors where
// the op returns its (mutated) arguments.
bool stackHasPrivateFormat(const c10::OperatorHandle& op, const torch::jit::Stack& stack);
void runOnBaseLayouts(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                      void (*run)(const c10::OperatorHandle&, torch::jit::Stack*));

}  // namespace at_npu::native
