// Executor.cpp - executor lifetime (created by GetWorkspaceSize, consumed by one launch), the launch
// onto a stream as a runtime host function, and kernel failures turned into sticky task errors.
#include "Executor.h"

#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_set>
#include <utility>

#include "Error.h"
#include "npu/activity.h"

namespace npu::opslib {
namespace {

// Executors that may still be launched or destroyed. A second launch (or a launch after destroy)
// is then an error instead of a use-after-free, as long as the address has not been reused.
// Inserted and erased on the calling thread (GetWorkspaceSize, launch), never by a worker.
struct LiveExecutors {
  std::mutex mu;
  std::unordered_set<const aclOpExecutor*> set;
  LiveExecutors() { set.reserve(1024); }
};

// Leaked: executors may be launched or destroyed from other libraries' static destructors.
LiveExecutors& Live() {
  static auto* live = new LiveExecutors;
  return *live;
}

bool TakeLive(const aclOpExecutor* executor) {
  LiveExecutors& live = Live();
  std::lock_guard<std::mutex> lock(live.mu);
  return live.set.erase(executor) == 1;
}

// The host function: runs the kernel once and owns the executor from here on.
int RunExecutor(void* data) {
  std::unique_ptr<aclOpExecutor> executor(static_cast<aclOpExecutor*>(data));
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
  if (!executor->launch_tag.empty()) message += " " + executor->launch_tag;
  nrtSetTaskErrMsg(message.c_str());
  return 1;
}

// Owns a custom package's user data; destroyUserData runs when the last kernel copy goes away.
struct UserData {
  void* data;
  void (*destroy)(void*);
  ~UserData() {
    if (destroy != nullptr) destroy(data);
  }
};

}  // namespace

aclOpExecutor* RegisterExecutor(std::unique_ptr<aclOpExecutor> executor) {
  NoteExecutorCreated();
  LiveExecutors& live = Live();
  std::lock_guard<std::mutex> lock(live.mu);
  live.set.insert(executor.get());
  return executor.release();
}

}  // namespace npu::opslib

using npu::opslib::Fail;
using npu::opslib::StrCat;

extern "C" {

aclnnStatus aclnnLaunchExecutor(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                nrtStream_t stream) {
  return npu::opslib::GuardApi("aclnnLaunchExecutor", [&]() -> aclnnStatus {
    if (executor == nullptr) return Fail(ACLNN_ERR_PARAM_NULLPTR, "aclnnLaunchExecutor: executor is NULL");
    if (!npu::opslib::TakeLive(executor)) {
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
    owned->launch_tag = npu::opslib::LaunchTag();
    if (owned->operands) {
      int32_t stream_device = owned->device;
      nrtStreamGetDevice(stream, &stream_device);
      npu::opslib::RecordLaunch(*owned, stream, stream_device);
    }
    owned->workspace = workspace;
    owned->workspace_size = workspaceSize;
    if (nrtActivityIsEnabled()) nrtActivityLabelNextTask(NRT_ACTIVITY_DEVICE_OP, owned->op_name.c_str(), 0);
    const nrtError_t error = nrtLaunchHostFunc(stream, &npu::opslib::RunExecutor, owned.get());
    if (error != NRT_SUCCESS) {
      return NOP_FAIL(ACLNN_ERR_RUNTIME_ERROR, owned->op_name, ": the runtime refused the launch (",
                      nrtGetErrorName(error), "): ", nrtGetRecentErrMsg());
    }
    owned.release();  // the host function frees it after running
    return ACLNN_SUCCESS;
  });
}

aclOpExecutor* aclnnCreateExecutor(const char* opName, aclnnKernelFn kernel, void* userData,
                                   void (*destroyUserData)(void* userData)) {
  if (opName == nullptr || kernel == nullptr) {
    Fail(ACLNN_ERR_PARAM_NULLPTR, "aclnnCreateExecutor: opName or kernel is NULL");
    return nullptr;
  }
  std::shared_ptr<npu::opslib::UserData> owned_data;
  try {
    owned_data = std::make_shared<npu::opslib::UserData>(userData, destroyUserData);
    std::string name = opName;
    return npu::opslib::NewExecutor(
        std::move(name), -1, [kernel, owned_data](void* workspace, uint64_t workspace_size) {
          const int code = kernel(owned_data->data, workspace, workspace_size);
          if (code != 0) throw std::runtime_error(StrCat("kernel returned ", code));
        });
  } catch (const std::exception& e) {
    if (owned_data) owned_data->destroy = nullptr;  // NULL means the caller still owns userData
    Fail(ACLNN_ERR_INNER, StrCat("aclnnCreateExecutor: ", e.what()));
    return nullptr;
  }
}

aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  if (executor == nullptr) return ACLNN_SUCCESS;
  if (!npu::opslib::TakeLive(executor)) {
    return NOP_FAIL(ACLNN_ERR_PARAM_INVALID, "aclDestroyAclOpExecutor: executor ",
                    static_cast<const void*>(executor),
                    " was already launched or destroyed");
  }
  delete executor;
  return ACLNN_SUCCESS;
}

}  // extern "C"
