// OpCommand.h - EXEC_NPU_CMD(aclnnXxx, args...) and its builder form OpCommand().Name().Input()
// .Attr().Output().Run(): the one launch path for named device ops. Converts
// the arguments to descriptors, runs XxxGetWorkspaceSize, allocates the workspace, queues Xxx on the
// current stream and counts the launch in torch.npu.op_stats(). Out-of-tree extensions use the same
// macro against custom op packages.
#pragma once

#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <npu/op_signature.h>

// Sibling includes: extensions compile this header from torch_npu/include/torch_npu/csrc/framework.
#include "FormatStaging.h"
#include "OpParamMaker.h"

namespace at_npu::native {

// The registry entry for `name`; throws a clear error if no package provides it.
const aclnnOpEntry& findDeviceOp(const char* name);
// Workspace (kept alive by the caching allocator's stream order), launch, and launch-mode handling.
void launchDeviceOp(const aclnnOpEntry& op, uint64_t workspace_size, aclOpExecutor* executor);
[[noreturn]] void throwDeviceOpError(const char* name, const char* phase, aclnnStatus status);
// Sets the launch tag so a failure inside the op names the Python line that launched it.
void tagDeviceOpLaunch();

// Raises a clear error when a launch's arguments, of kinds `given` (npu/op_signature.h), do not
// fit the op's parameters: their count, or a kind (a number where the op takes a scalar descriptor
// would crash inside the op). Ops whose parameters are unknown are not checked.
void checkDeviceOpArguments(const aclnnOpEntry& op, const char* given);

// The kind of an EXEC_NPU_CMD argument as the caller wrote it.
template <typename Arg>
constexpr char argumentKind() {
  using U = std::remove_cv_t<std::remove_reference_t<Arg>>;
  if constexpr (std::is_arithmetic_v<U> || std::is_enum_v<U>) {
    return npu::opslib::KindOf<U>();
  } else {
    return npu::opslib::KindOf<decltype(launchOperand(std::declval<const U&>()))>();
  }
}

template <typename... Args>
void checkArguments(const aclnnOpEntry& op) {
  static constexpr char kKinds[] = {argumentKind<Args>()..., '\0'};
  // Per thread, the argument types of this instantiation were last found to fit `checked`: a call
  // site checks once, so the launch path pays one comparison.
  thread_local const aclnnOpEntry* checked = nullptr;
  if (C10_LIKELY(checked == &op)) return;
  checkDeviceOpArguments(op, kKinds);
  checked = &op;
}

// The launch itself. `staging` is set when private formats are in play (FormatStaging.h): it
// learns which of its descriptors the op writes before they are destroyed.
template <typename... Args>
void runDeviceOp(const aclnnOpEntry& op, const char* name, FormatStaging* staging, const Args&... args) {
  checkArguments<Args...>(op);
  auto converted = std::make_tuple(launchOperand(args)...);
  using GetWorkspaceSize = aclnnStatus (*)(decltype(launchOperand(args))..., uint64_t*, aclOpExecutor**);
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  tagDeviceOpLaunch();
  const aclnnStatus status = std::apply(
      [&](auto... descriptors) {
        return reinterpret_cast<GetWorkspaceSize>(op.get_workspace_size)(descriptors..., &workspace_size,
                                                                          &executor);
      },
      converted);
  if (C10_UNLIKELY(staging != nullptr)) staging->noteWrittenOperands();
  // The executor captured what it needs: descriptors can go now.
  std::apply([](auto... descriptors) { (releaseLaunchOperand(descriptors), ...); }, converted);
  if (status != ACLNN_SUCCESS) throwDeviceOpError(name, "GetWorkspaceSize", status);
  launchDeviceOp(op, workspace_size, executor);
}

template <typename... Args>
void execNpuCmdWith(const aclnnOpEntry& op, const char* name, const Args&... args) {
  if (C10_UNLIKELY(formatStagingNeeded(name, args...))) {
    // Operands in private formats: native ones pass as they are, the rest through TransData.
    FormatStaging staging(name);
    (staging.add(args), ...);
    staging.begin();
    runDeviceOp(op, name, &staging, args...);
    staging.end();
    return;
  }
  runDeviceOp(op, name, nullptr, args...);
}

template <typename... Args>
void execNpuCmd(const char* name, const Args&... args) {
  execNpuCmdWith(findDeviceOp(name), name, args...);
}

// The builder form of the same launch, for adapters that read better spelled out:
//   OpCommand().Name("aclnnAdd").Input(self).Input(other).Attr("alpha", alpha).Output(out).Run();
// Inputs, attributes and outputs are passed to the op in the order they are added (that is its
// GetWorkspaceSize signature); attribute names document the call. Each step returns a new builder
// whose type records the arguments so far, so Run() is exactly execNpuCmd(name, args...).
template <typename... Args>
class OpCommandBuilder {
 public:
  OpCommandBuilder(const char* name, std::tuple<Args...> args) : name_(name), args_(std::move(args)) {}

  template <typename T>
  auto Input(const T& value) && {
    return append<const T&>(value);
  }
  auto Output(at::Tensor& tensor) && { return append<at::Tensor&>(tensor); }
  // Attributes are held by value: literals and temporaries are fine.
  template <typename T>
  auto Attr(const char* /*name*/, T value) && {
    return append<T>(std::move(value));
  }
  void Run() && {
    std::apply([this](const auto&... args) { execNpuCmd(name_, args...); }, args_);
  }

 private:
  template <typename T, typename V>
  OpCommandBuilder<Args..., T> append(V&& value) {
    return OpCommandBuilder<Args..., T>(
        name_, std::tuple_cat(std::move(args_), std::tuple<T>(std::forward<V>(value))));
  }

  const char* name_;
  std::tuple<Args...> args_;
};

class OpCommand {
 public:
  using PROC_FUNC = std::function<int()>;

  OpCommandBuilder<> Name(const char* name) { return OpCommandBuilder<>(name, std::tuple<>()); }

  // Runs `func`, which queues device work on the current stream itself (a direct kernel launch:
  // ACLRT_LAUNCH_KERNEL(kernel)(blockDim, getCurrentNPUStream().stream(false), args...)), as one op
  // named `name`: failures of the work name the Python line that launched it, the launch is counted
  // in torch.npu.op_stats(), and TASK_QUEUE_ENABLE=0 / ASCEND_LAUNCH_BLOCKING=1 / `sync` wait for it.
  // A non-zero return from `func` raises a RuntimeError naming the op.
  static void RunOpApi(const std::string& name, const PROC_FUNC& func, bool sync = false);
  static void RunOpApiV2(const std::string& name, const PROC_FUNC& func, bool sync = false) {
    RunOpApi(name, func, sync);
  }
};

}  // namespace at_npu::native

// The registry entry is looked up once per call site (entries never change once handed out).
#define EXEC_NPU_CMD(aclnn_api, ...)                                                       \
  ::at_npu::native::execNpuCmdWith(                                                        \
      []() -> const aclnnOpEntry& {                                                        \
        static const aclnnOpEntry& entry = ::at_npu::native::findDeviceOp(#aclnn_api);     \
        return entry;                                                                      \
      }(),                                                                                 \
      #aclnn_api, __VA_ARGS__)
