// DeviceTask.h - the one launch path for host-executed device work: queue a function on an npu stream,
// honour TASK_QUEUE_ENABLE / ASCEND_LAUNCH_BLOCKING, and attribute failures to the op and the Python
// line that launched it.
#pragma once

#include <functional>
#include <string>

#include "csrc/core/NPUStream.h"

namespace at_npu::native {

// Runs fn in stream order. If fn throws, the error, prefixed with `what` (which must outlive the
// task: a literal or an op name that lives for the process) and suffixed with the launch site, is
// raised by the next synchronising call (or right away under TASK_QUEUE_ENABLE=0 /
// ASCEND_LAUNCH_BLOCKING=1).
void launchDeviceTask(const c10_npu::NPUStream& stream, const char* what, std::function<void()> fn);

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
