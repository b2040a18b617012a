// DeviceTask.cpp - host tasks on streams, launch modes and error attribution.
#include "csrc/framework/DeviceTask.h"

#include <atomic>
#include <memory>

#include "csrc/core/NPUException.h"
#include "csrc/framework/ExecutionPolicy.h"

namespace at_npu::native {
namespace {

std::atomic<LaunchSiteProvider> site_provider{nullptr};

struct Task {
  const char* what;
  const LaunchSite* site;
  std::function<void()> fn;

  // Runs the function; returns the attributed error message, or "" on success.
  std::string run() {
    std::string error;
    try {
      fn();
      return "";
    } catch (const c10::Error& e) {
      error = e.what_without_backtrace();
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::string msg = std::string(what) + " failed: " + error;
    if (site != nullptr) msg += "\n  launched from " + site->location;
    return msg;
  }
};

int runQueuedTask(void* data) {
  std::unique_ptr<Task> task(static_cast<Task*>(data));
  std::string error = task->run();
  if (error.empty()) return 0;
  nrtSetTaskErrMsg(error.c_str());
  return 1;
}

}  // namespace

void setLaunchSiteProvider(LaunchSiteProvider provider) { site_provider.store(provider); }

const LaunchSite* currentLaunchSite() {
  LaunchSiteProvider provider = site_provider.load(std::memory_order_acquire);
  return provider ? provider() : nullptr;
}

void launchDeviceTask(const c10_npu::NPUStream& stream, const char* what, std::function<void()> fn) {
  const ExecutionPolicy& policy = executionPolicy();
  auto task = std::make_unique<Task>(Task{what, currentLaunchSite(), std::move(fn)});
  if (!policy.task_queue) {
    // Synchronous launch: earlier work first, then this task on the calling thread.
    stream.synchronize();
    std::string error = task->run();
    TORCH_CHECK(error.empty(), error);
    return;
  }
  NPU_CHECK(nrtLaunchHostFunc(stream.handle(), &runQueuedTask, task.get()));
  task.release();  // owned by the stream until it runs
  if (policy.launch_blocking) stream.synchronize();
}

}  // namespace at_npu::native
