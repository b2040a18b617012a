// DeviceTask.h - the one launch path for host-executed device work: queue a function on an npu stream,
// honour TASK_QUEUE_ENABLE / ASCEND_LAUNCH_BLOCKING, and attribute failures to the op and the Python
// line that launched it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "csrc/core/NPUStream.h"

namespace at_npu::native {

// Runs fn in stream order. If fn throws, the error, prefixed with `what` (which must outlive the
// task: a literal or an op name that lives for the process) and suffixed with the launch site, is
// raised by the next synchronising call (or right away under TASK_QUEUE_ENABLE=0 /
// ASCEND_LAUNCH_BLOCKING=1).
void launchDeviceTask(const c10_npu::NPUStream& stream, const char* what, std::function<void()> fn);
// The same for a name built at run time (it is interned: keep the set of distinct names small).
void launchDeviceTask(const c10_npu::NPUStream& stream, const std::string& what, std::function<void()> fn);

// While alive, device tasks this thread launches are recorded by profilers as a collective (or
// point-to-point transfer) moving `bytes` (kernel_details' HCCL rows, communication.json).
class CollectiveActivityScope {
 public:
  explicit CollectiveActivityScope(uint64_t bytes);
  ~CollectiveActivityScope();
  CollectiveActivityScope(const CollectiveActivityScope&) = delete;
  CollectiveActivityScope& operator=(const CollectiveActivityScope&) = delete;

 private:
  int64_t previous_;
};

// The compiled graph whose launches this thread is queuing ("" outside one). Tasks launched meanwhile
// name it in their failure message; the compiled graph's call sets it for its duration.
void setGraphContext(std::string context);
const std::string& graphContext();

// Where an op was launched from. Interned: one object per distinct line, alive for the process,
// so launches keep a pointer instead of formatting or copying text.
struct LaunchSite {
  std::string location;  // "train.py:42"
  std::string op_tag;    // "(launched from train.py:42)": the device ops' launch tag
};
// Installed by the Python bindings; returns nullptr when no Python line launched the op.
using LaunchSiteProvider = const LaunchSite* (*)();
void setLaunchSiteProvider(LaunchSiteProvider provider);
const LaunchSite* currentLaunchSite();

}  // namespace at_npu::native
