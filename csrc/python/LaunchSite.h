// LaunchSite.h - installs the Python launch-site provider used to attribute device task errors.
#pragma once

#include <string>

#include "csrc/framework/DeviceTask.h"

namespace torch_npu::python {

void installLaunchSiteProvider();

// Treats Python files under `prefix` (generated code, e.g. Inductor's cache directory) as library
// code, so a launch from them is attributed to the user's line that called into them.
void addLibraryPathPrefix(const std::string& prefix);

}  // namespace torch_npu::python
