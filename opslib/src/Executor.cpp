// Executor.cpp - executor lifetime (created by GetWorkspaceSize, consumed by one launch), the launch
// onto a stream as a runtime host function, and kernel failures turned into sticky task errors.
#include "Executor.h"

#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <stdexcept>
#include <utility>

#include "Error.h"
#include "npu/activity.h"
#include "npu/graph.h"

namespace npu::opslib {
namespace {

// The host function: runs the kernel once and owns the executor from here on.
// Runs once per launch, or once per replay of a graph that captured the launch (ReleaseExecutor
// frees it after the last).
int RunExecutor(void* data) {
  aclOpExecutor* executor = static_cast<aclOpExecutor*>(data);
  std::string reason;
  try {
    KernelWatch watch(*executor);
    executor->Run(executor->workspace, executor->workspace_size);
    watch.AfterKernel();
    return 0;
  } catch (const std::exception& e) {
    reason = e.what();
  } catch (...) {
    reason = "unknown exception";
  }
  std::string message = StrCat(executor->op_name, " failed: ", reason);
  const char* tag = executor->Tag();
  if (*tag != '\0') message += StrCat(" ", tag);
  nrtSetTaskErrMsg(message.c_str());
  return 1;
}

void ReleaseExecutor(void* data) { delete static_cast<aclOpExecutor*>(data); }

// Custom op names live for the process like built-in ones, so that the runtime can keep pointers
// to them (task names for the watchdog and injected faults). Custom ops are few.
const char* InternName(const char* name) {
  static std::mutex mutex;
  static auto* names = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  return names->insert(name).first->c_str();
}

}  // namespace

// A custom op's executor: its name is the package's (interned); destroyUserData runs when the
// executor goes away (after it ran, or unlaunched).
struct CustomExecutor final : aclOpExecutor {
  CustomExecutor(const char* name, aclnnKernelFn kernel, void* data, void (*destroy)(void*))
      : aclOpExecutor(InternName(name), -1), kernel(kernel), data(data), destroy(destroy) {}
  ~CustomExecutor() override {
    if (destroy != nullptr) destroy(data);
  }
  void Run(void* workspace, uint64_t workspace_size) override {
    const int code = kernel(data, workspace, workspace_size);
    if (code != 0) throw std::runtime_error(StrCat("kernel returned ", code));
  }
  aclnnKernelFn kernel;
  void* data;
  void (*destroy)(void*);
};

// The magic check deliberately reads an executor that may already be destroyed (its block stays in
// the pool): that is how a stale handle is told from a live one, so UBSan's type check is off here.
__attribute__((no_sanitize("vptr"))) bool TakeReady(aclOpExecutor* executor) {
  if (executor->magic != aclOpExecutor::kMagic) return false;
  uint32_t expected = aclOpExecutor::kReady;
  return executor->state.compare_exchange_strong(expected, aclOpExecutor::kLaunched,
                                                 std::memory_order_acq_rel);
}

}  // namespace npu::opslib

using npu::opslib::Fail;
using npu::opslib::StrCat;

extern "C" {

aclnnStatus aclnnLaunchExecutor(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                nrtStream_t stream) {
  return npu::opslib::GuardApi("aclnnLaunchExecutor", [&]() -> aclnnStatus {
    if (executor == nullptr) return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclnnLaunchExecutor: executor is NULL");
    if (!npu::opslib::TakeReady(executor)) {
      return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, "aclnnLaunchExecutor: executor ",
                      static_cast<const void*>(executor),
                      " was already launched or destroyed (an executor runs once; call the op's "
                      "GetWorkspaceSize again)");
    }
    // From here on the executor is ours: it is freed if the launch fails.
    std::unique_ptr<aclOpExecutor> owned(executor);
    if (owned->device >= 0) {
      // The software NPU could run it anyway, but a real device cannot reach another's memory.
      int32_t stream_device = -1;
      if (nrtStreamGetDevice(stream, &stream_device) != NRT_SUCCESS) {
        return NOP_FAIL(ACLNN_ERR_RUNTIME_ERROR, owned->op_name, ": cannot launch on stream ",
                        static_cast<const void*>(stream), ": ", nrtGetRecentErrMsg());
      }
      if (stream_device != owned->device) {
        return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, owned->op_name, ": the operands are in npu:",
                        owned->device, " memory but the stream belongs to npu:", stream_device);
      }
    }
    if (const char* tag = npu::opslib::StaticLaunchTag()) {
      owned->static_tag = tag;
    } else {
      owned->launch_tag = npu::opslib::LaunchTag();
    }
    if (owned->operands) {
      int32_t stream_device = owned->device;
      nrtStreamGetDevice(stream, &stream_device);
      npu::opslib::RecordLaunch(*owned, stream, stream_device);
    }
    owned->workspace = workspace;
    owned->workspace_size = workspaceSize;
    if (nrtActivityIsEnabled()) nrtActivityLabelNextTask(NRT_ACTIVITY_DEVICE_OP, owned->op_name, 0);
    // Named (op names and static tags live for the process) for the watchdog and injected faults.
    // A short run may execute right here when the stream is idle: the hand-off would cost more.
    // Owned by the runtime from here on: freed after its run, with the graph that captured it, or
    // right away if the launch is refused.
    aclOpExecutor* launched = owned.release();
    const char* op_name = launched->op_name;
    const nrtError_t error =
        nrtLaunchHostFuncOwned(stream, &npu::opslib::RunExecutor, launched, &npu::opslib::ReleaseExecutor, op_name,
                               launched->static_tag, launched->short_run ? 1 : 0);
    if (error != NRT_SUCCESS) {
      return NOP_FAIL(ACLNN_ERR_RUNTIME_ERROR, op_name, ": the runtime refused the launch (",
                      nrtGetErrorName(error), "): ", nrtGetRecentErrMsg());
    }
    return ACLNN_SUCCESS;
  });
}

aclOpExecutor* aclnnCreateExecutor(const char* opName, aclnnKernelFn kernel, void* userData,
                                   void (*destroyUserData)(void* userData)) {
  if (opName == nullptr || kernel == nullptr) {
    Fail(ACLNN_ERR_PARAM_NULLPTR, "aclnnCreateExecutor: opName or kernel is NULL");
    return nullptr;
  }
  try {
    npu::opslib::NoteExecutorCreated();
    return new npu::opslib::CustomExecutor(opName, kernel, userData, destroyUserData);
  } catch (const std::exception& e) {
    // NULL means the caller still owns userData (the constructor did not take it).
    Fail(ACLNN_ERR_INNER, StrCat("aclnnCreateExecutor: ", e.what()));
    return nullptr;
  }
}

aclnnStatus aclnnSetExecutorShortRun(aclOpExecutor* executor, int short_run) {
  if (executor == nullptr) return NOP_FAIL(ACLNN_ERR_PARAM_NULLPTR, "aclnnSetExecutorShortRun: executor is NULL");
  executor->short_run = short_run != 0;
  return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  if (executor == nullptr) return ACLNN_SUCCESS;
  if (!npu::opslib::TakeReady(executor)) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, "aclDestroyAclOpExecutor: executor ",
                    static_cast<const void*>(executor),
                    " was already launched or destroyed");
  }
  delete executor;
  return ACLNN_SUCCESS;
}

}  // extern "C"
