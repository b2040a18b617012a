// DeviceTask.cpp - host tasks on streams, launch modes and error attribution.
#include "csrc/framework/DeviceTask.h"

#include "csrc/core/NPUThreadTeams.h"

#include <ATen/core/LegacyTypeDispatch.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_set>

#include <npu/activity.h>
#include <npu/graph.h>

#include "csrc/core/NPUException.h"
#include "csrc/core/NPUGraph.h"
#include "csrc/framework/ExecutionPolicy.h"

namespace at_npu::native {
namespace {

std::atomic<LaunchSiteProvider> site_provider{nullptr};
thread_local int64_t t_collective_bytes = -1;  // >= 0 inside a CollectiveActivityScope
thread_local const std::string* t_graph_context = nullptr;

// Names and graph contexts given as text live for the process, so tasks keep pointers, not copies.
const std::string* intern(std::string text) {
  static std::mutex mutex;
  static auto* names = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  return &*names->insert(std::move(text)).first;
}

struct Task {
  const char* what;
  const std::string* context;  // the compiled graph queuing it, or nullptr
  const LaunchSite* site;
  std::function<void()> fn;

  // Runs the function; returns the attributed error message, or "" on success.
  std::string run() {
    std::string error;
    try {
      // Kernels run below autograd: the tensors they write may have been made under the caller's
      // InferenceMode, which this (worker) thread does not share; their writes bump no versions.
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      fn();
      return "";
    } catch (const c10::Error& e) {
      error = e.what_without_backtrace();
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::string msg = std::string(what) + " failed: " + error;
    if (context != nullptr) msg += "\n  in " + *context;
    if (site != nullptr) msg += "\n  launched from " + site->location;
    return msg;
  }
};

// Runs once per launch, or once per replay of a graph that captured it (releaseTask frees it).
int runQueuedTask(void* data) {
  Task* task = static_cast<Task*>(data);
  std::string error = task->run();
  if (error.empty()) return 0;
  nrtSetTaskErrMsg(error.c_str());
  return 1;
}

void releaseTask(void* data) { delete static_cast<Task*>(data); }

}  // namespace

CollectiveActivityScope::CollectiveActivityScope(uint64_t bytes) : previous_(t_collective_bytes) {
  t_collective_bytes = static_cast<int64_t>(bytes);
}

CollectiveActivityScope::~CollectiveActivityScope() { t_collective_bytes = previous_; }

void setLaunchSiteProvider(LaunchSiteProvider provider) { site_provider.store(provider); }

void setGraphContext(std::string context) {
  t_graph_context = context.empty() ? nullptr : intern(std::move(context));
}

const std::string& graphContext() {
  static const std::string none;
  return t_graph_context ? *t_graph_context : none;
}

const LaunchSite* currentLaunchSite() {
  LaunchSiteProvider provider = site_provider.load(std::memory_order_acquire);
  return provider ? provider() : nullptr;
}

void launchDeviceTask(const c10_npu::NPUStream& stream, const char* what, std::function<void()> fn) {
  c10_npu::noteDeviceLaunch();
  const ExecutionPolicy& policy = executionPolicy();
  auto task = std::make_unique<Task>(Task{what, t_graph_context, currentLaunchSite(), std::move(fn)});
  if ((!policy.task_queue || stream.isSyncLaunch()) && !c10_npu::anyCaptureUnderway()) {
    // Synchronous launch (TASK_QUEUE_ENABLE=0, or a SyncLaunchStream): earlier work first, then this
    // task on the calling thread.
    stream.synchronize();
    std::string error = task->run();
    if (!error.empty()) c10_npu::throwTaskError(error, __FILE__, __LINE__);
    return;
  }
  if (nrtActivityIsEnabled()) {
    const bool collective = t_collective_bytes >= 0;
    nrtActivityLabelNextTask(collective ? NRT_ACTIVITY_COLLECTIVE : NRT_ACTIVITY_HOST_TASK, task->what,
                             collective ? static_cast<uint64_t>(t_collective_bytes) : 0);
  }
  // Named, so that the watchdog and injected faults (NPU_SIM_FAULT op=...) can name the op and the
  // line that launched it. Both strings live for the process (literals or interned).
  // Owned by the runtime from here on: freed after its run, with the graph that captured it, or at
  // once if the launch is refused.
  Task* launched = task.release();
  NPU_CHECK(nrtLaunchHostFuncOwned(stream.handle(), &runQueuedTask, launched, &releaseTask, launched->what,
                                   launched->site != nullptr ? launched->site->location.c_str() : nullptr, 0));
  if (policy.launch_blocking && !c10_npu::anyCaptureUnderway()) stream.synchronize();
}

void launchDeviceTask(const c10_npu::NPUStream& stream, const std::string& what, std::function<void()> fn) {
  launchDeviceTask(stream, intern(what)->c_str(), std::move(fn));
}

}  // namespace at_npu::native
